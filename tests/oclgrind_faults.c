/* Kernels with one fault each, to show that the Oclgrind setup
 * (tests/oclgrind_run.py) fails on each kind it is there to find:
 *   oclgrind_faults clean       none: exit 0 under Oclgrind
 *   oclgrind_faults race        two work-items write one local element
 *   oclgrind_faults bounds      a read one element past a local tile
 *   oclgrind_faults divergence  a barrier only some work-items reach
 *   oclgrind_faults past_end    a write past the end of a buffer
 *   oclgrind_faults api         an OpenCL call with a wrong argument (the
 *                               clean kernel, an argument of the wrong size
 *                               set first)
 * On Oclgrind only (the first platform, as its runtime provides it); exit 77
 * elsewhere or without a device. Each kernel runs to the end and returns
 * numbers: only a checker sees its fault. */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *source =
    "__kernel void clean(__global float *out) {\n"
    "    __local float tile[64];\n"
    "    const int l = get_local_id(0);\n"
    "    tile[l] = l;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[get_global_id(0)] = tile[63 - l];\n"
    "}\n"
    "__kernel void race(__global float *out) {\n"
    "    __local float tile[64];\n"
    "    const int l = get_local_id(0);\n"
    "    tile[l / 2] = l;\n" /* work-items 2k and 2k + 1 write one element */
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[get_global_id(0)] = tile[l / 2];\n"
    "}\n"
    "__kernel void bounds(__global float *out) {\n"
    "    __local float tile[64];\n"
    "    const int l = get_local_id(0);\n"
    "    tile[l] = l;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[get_global_id(0)] = tile[l + 1];\n" /* l = 63 reads tile[64] */
    "}\n"
    "__kernel void divergence(__global float *out) {\n"
    "    __local float tile[64];\n"
    "    const int l = get_local_id(0);\n"
    "    tile[l] = l;\n"
    "    if (l < 32)\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[get_global_id(0)] = tile[l];\n"
    "}\n"
    "__kernel void past_end(__global float *out) {\n"
    "    out[get_global_id(0) + 1] = 1.0f;\n" /* the last work-item writes out[n] */
    "}\n";

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "clean";
    cl_platform_id platform;
    cl_uint n = 0;
    if (clGetPlatformIDs(1, &platform, &n) != CL_SUCCESS || n == 0) {
        fprintf(stderr, "no OpenCL platform: skipped\n");
        return 77;
    }
    /* the faults are real: only on the simulator, which stops them */
    char platform_name[256] = "";
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof(platform_name), platform_name, NULL);
    if (!strstr(platform_name, "Oclgrind")) {
        fprintf(stderr, "platform %s is not Oclgrind (meson test --setup oclgrind): skipped\n",
                platform_name);
        return 77;
    }
    cl_device_id device;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, &n) != CL_SUCCESS || n == 0) {
        fprintf(stderr, "no OpenCL device: skipped\n");
        return 77;
    }
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &source, NULL, &err);
    if (clBuildProgram(prog, 1, &device, "", NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "build failed\n");
        return 1;
    }
    const bool api = !strcmp(name, "api");
    cl_kernel k = clCreateKernel(prog, api ? "clean" : name, &err);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "no kernel %s\n", name);
        return 2;
    }
    const size_t items = 128, local = 64;
    cl_mem out = clCreateBuffer(ctx, CL_MEM_READ_WRITE, items * sizeof(float), NULL, &err);
    if (api) {
        const int wrong = 0;
        clSetKernelArg(k, 0, sizeof(wrong), &wrong); /* CL_INVALID_ARG_SIZE (or _MEM_OBJECT) */
    }
    clSetKernelArg(k, 0, sizeof(cl_mem), &out);
    err = clEnqueueNDRangeKernel(q, k, 1, NULL, &items, &local, 0, NULL, NULL);
    float host[128];
    if (err == CL_SUCCESS)
        err = clEnqueueReadBuffer(q, out, CL_TRUE, 0, sizeof(host), host, 0, NULL, NULL);
    clReleaseMemObject(out);
    clReleaseKernel(k);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    printf("%s: %s\n", name, err == CL_SUCCESS ? "ran" : "failed to run");
    return err == CL_SUCCESS ? 0 : 1;
}
