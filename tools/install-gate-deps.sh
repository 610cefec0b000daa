#!/bin/sh
# Packages for tests/kernel_gate.py on Debian 12 (bookworm).
#   clang-16 + rocm-device-libs  -> AMD amdgcn (gfx90a, gfx1030, gfx1100)
#   clang-15 + llvm-spirv-15 + spirv-tools -> SPIR-V (llvm-spirv-16 is not in bookworm)
#   libclc-16                    -> NVPTX built-ins (ptxas comes from the CUDA toolkit, not Debian)
#   intel-opencl-icd             -> ocloc + IGC (offline Intel compile; registers an ICD that
#                                   reports no platform without Intel hardware)
#   llvm-15                      -> llvm-nm (undefined-symbol check)
#   pocl-opencl-icd              -> PoCL device for the runtime build row
set -eu
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    clang-15 clang-16 llvm-15 llvm-spirv-15 spirv-tools libclc-16 rocm-device-libs \
    intel-opencl-icd pocl-opencl-icd ocl-icd-libopencl1 python3
