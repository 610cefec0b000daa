#!/usr/bin/env python3
"""Cross-vendor OpenCL kernel compile gate.

Usage:
  tests/kernel_gate.py build/tools/prefixcl     # configs from `prefixcl kernel-configs`
  tests/kernel_gate.py configs.tsv              # configs from a file (testing)
  tests/kernel_gate.py --list-toolchains

Input: TSV lines `program<TAB>vendor<TAB>options` (vendor: nvidia, amd, intel,
cpu, other).  The source compiled is cl/common.cl + cl/<program>.cl, exactly as
the runtime concatenates them, with the config's -D options.

Targets per vendor of a config (cpu/other configs are only built by PoCL):
  amd    -> gfx90a (MI200, wave64), gfx1030 (RDNA2, wave32), newest (first
            member of the newest GPU family clang knows, e.g. gfx1100)
  intel  -> spirv, xe-lp (tgllp), xe-hpg (acm-g10)
  nvidia -> sm_90, sm_80
  all    -> pocl (once, for every config, via `prefixcl kernel-configs --build`)

What each target checks, and its limits:
  gfx*   clang (newest installed) -target amdgcn-amd-amdhsa, linked with the
         ROCm device libraries (Debian rocm-device-libs: opencl, ocml, ockl,
         oclc_*).  Where the libs have no oclc_isa_version_<gfx>.bc (gfx11
         with Debian's 5.2.3), the gate builds the equivalent itself: the one
         constant __oclc_ISA_version = major*1000 + minor*100 + stepping
         (11000 for gfx1100), linkonce_odr protected in addrspace(4), as in
         the real files; the output says which targets use it.  Real ISA code generation: VGPRs, SGPRs, scratch
         bytes/lane, waves/SIMD from -Rpass-analysis=kernel-resource-usage.
         Fails on compile error, undefined symbol, or any VGPR/SGPR spill.
         Scratch without spill (private arrays) is shown, not failed.
         Limit: upstream LLVM, not AMD's ROCm/PAL compiler; close but not equal.
  spirv  clang (whose LLVM matches llvm-spirv) -target spir64 -O0 -> bitcode
         -> llvm-spirv (SPIR-V 1.0) -> spirv-val --target-env opencl1.2.
         Checks front-end validity and portable built-in use only.  -O0 since
         llvm-spirv 15 rejects optimized IR (freeze) and the driver optimizes.
  xe-*   ocloc (Debian intel-opencl-icd: Intel's real IGC, offline, no GPU
         needed) compiles the OpenCL C source; the legacy patch-token binary
         is decoded for SIMD width, GRF count, private bytes/work-item and
         scratch (spill) bytes/thread.  Fails on compile error or spill.
         Limit: the IGC in Debian 12 (2022) is older than current drivers.
  sm_*   NVIDIA's driver compiles OpenCL C itself, so this is only a proxy:
         clang -target nvptx64-unknown-nvidiacl with libclc's
         nvptx64--nvidiacl.bc (built-ins), plus a small shim for the libcalls
         NVPTX cannot lower (libclc's native_exp/log/sin/cos become
         llvm.exp etc. -> expf), then ptxas -v (CUDA toolkit, not a Debian
         package; PATH, $CUDA_HOME/bin or /usr/local/cuda/bin).  Reports
         registers, spill bytes, stack frame, register-limited occupancy.
         Fails on compile error or spill.  Without ptxas only the PTX step
         runs and the cell says so.  If clang does not know the arch, PTX is
         generated for sm_80 and ptxas assembles it for the requested arch.
  pocl   the real runtime builds every config on the default OpenCL device
         (`prefixcl kernel-configs --build`); skipped when given a TSV file.

A missing toolchain gives a SKIP cell with the reason; it fails the gate only
for targets named in --require (default: amd,spirv,intel,pocl; everything
tools/install-gate-deps.sh installs).  Exit status: 0 pass, 1 fail, 2 usage.
"""
import argparse
import atexit
import glob
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLANG_VERSIONS = range(19, 14, -1)          # newest first
ROCM_BC_DIRS = ["/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", "/usr/lib/amdgcn/bitcode",
                "/opt/rocm/amdgcn/bitcode"]
LIBCLC_DIRS = ["/usr/lib/clc", "/usr/share/clc"]
NV_SHIM = r"""
/* kernel_gate: libcalls NVPTX cannot lower (libclc native_* -> llvm.exp ...) */
float expf(float x) { return __nvvm_ex2_approx_f(x * 1.4426950408889634f); }
float exp2f(float x) { return __nvvm_ex2_approx_f(x); }
float logf(float x) { return __nvvm_lg2_approx_f(x) * 0.6931471805599453f; }
float log2f(float x) { return __nvvm_lg2_approx_f(x); }
float log10f(float x) { return __nvvm_lg2_approx_f(x) * 0.3010299956639812f; }
float sinf(float x) { return __nvvm_sin_approx_f(x); }
float cosf(float x) { return __nvvm_cos_approx_f(x); }
"""
VENDOR_TARGETS = {
    "amd": ["gfx90a", "gfx1030", "gfx-newest"],
    "intel": ["spirv", "xe-lp", "xe-hpg"],
    "nvidia": ["sm_90", "sm_80"],
    "cpu": [],
    "other": [],
}
INTEL_DEVICES = {"xe-lp": "tgllp", "xe-hpg": "acm-g10"}


class Cell:
    """Result of one (config, target) compile: per-kernel metrics or an error."""

    def __init__(self, status, kernels=None, msg="", secs=0.0):
        self.status = status            # PASS, FAIL, SKIP
        self.kernels = kernels or {}    # kernel name -> short metrics text
        self.msg = msg
        self.secs = secs


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, errors="replace", **kw)
    return p.returncode, p.stdout


def first_tool(names):
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    return None


# ---------------------------------------------------------------- toolchains
def find_toolchains():
    """Locate every tool; each entry is a path/dict, or a string 'missing: why'."""
    tc = {}
    clangs = [(v, shutil.which("clang-%d" % v)) for v in CLANG_VERSIONS]
    clangs = [(v, p) for v, p in clangs if p]
    tc["clangs"] = clangs
    tc["llvm-nm"] = first_tool(["llvm-nm-%d" % v for v in CLANG_VERSIONS] + ["llvm-nm"])
    bc = next((d for d in [os.environ.get("ROCM_DEVICE_LIBS", "")] + ROCM_BC_DIRS
               if d and os.path.exists(os.path.join(d, "ocml.bc"))), None)
    if not clangs:
        tc["amd"] = "missing: no clang-N on PATH (apt-get install clang-16)"
    elif not bc:
        tc["amd"] = "missing: ROCm device libs (apt-get install rocm-device-libs)"
    elif not tc["llvm-nm"]:
        tc["amd"] = "missing: llvm-nm (apt-get install llvm-15)"
    else:
        tc["amd"] = {"clang": clangs[0][1], "ver": clangs[0][0], "bc": bc}
    # SPIR-V: llvm-spirv-N must read clang-N's bitcode
    pair = next(((c, shutil.which("llvm-spirv-%d" % v)) for v, c in clangs
                 if shutil.which("llvm-spirv-%d" % v)), None)
    val = shutil.which("spirv-val")
    if not pair:
        tc["spirv"] = "missing: no clang-N with matching llvm-spirv-N (apt-get install llvm-spirv-15 clang-15)"
    elif not val:
        tc["spirv"] = "missing: spirv-val (apt-get install spirv-tools)"
    else:
        tc["spirv"] = {"clang": pair[0], "llvm-spirv": pair[1], "spirv-val": val}
    ocloc = shutil.which("ocloc")
    tc["intel"] = {"ocloc": ocloc} if ocloc else "missing: ocloc (apt-get install intel-opencl-icd)"
    # NVPTX: the libclc bitcode must not be newer than clang; try newest clang first
    clc = next((os.path.join(d, "nvptx64--nvidiacl.bc") for d in LIBCLC_DIRS
                if os.path.exists(os.path.join(d, "nvptx64--nvidiacl.bc"))), None)
    cuda = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    ptxas = shutil.which("ptxas") or next((os.path.join(c, "bin", "ptxas") for c in cuda
                                           if c and os.access(os.path.join(c, "bin", "ptxas"), os.X_OK)), None)
    if not clangs:
        tc["nvidia"] = "missing: no clang-N"
    elif not clc:
        tc["nvidia"] = "missing: libclc nvptx64--nvidiacl.bc (apt-get install libclc-16)"
    else:
        tc["nvidia"] = {"clang": clangs[0][1], "clc": clc, "ptxas": ptxas}
    return tc


def describe_toolchains(tc):
    def ver(path, flag="--version"):
        rc, out = run([path, flag])
        return out.strip().splitlines()[0] if out.strip() else "?"
    lines = ["clang versions: %s" % (", ".join("clang-%d" % v for v, _ in tc["clangs"]) or "none")]
    for key in ("amd", "spirv", "intel", "nvidia"):
        t = tc[key]
        if isinstance(t, str):
            lines.append("%-7s %s" % (key, t))
            continue
        parts = []
        for k, v in t.items():
            if k == "ver":
                continue
            if v is None:
                parts.append("%s=NOT FOUND" % k)
            elif k in ("bc", "clc"):
                parts.append("%s=%s" % (k, v))
            elif k == "ocloc":
                parts.append("ocloc=%s" % v)
            else:
                parts.append("%s=%s (%s)" % (k, v, ver(v)))
        lines.append("%-7s %s" % (key, "; ".join(parts)))
    if not isinstance(tc["nvidia"], str) and not tc["nvidia"]["ptxas"]:
        lines.append("        (no ptxas: NVIDIA cells stop at clang -> PTX)")
    return "\n".join(lines)


def amd_newest(clang):
    """First member of the newest gfx family the compiler knows (gfx1100 for clang 15/16)."""
    with tempfile.NamedTemporaryFile("w", suffix=".cl", delete=False) as f:
        f.write("kernel void k(void) {}\n")
    rc, out = run([clang, "--target=amdgcn-amd-amdhsa", "-nogpulib", "--print-supported-cpus",
                   "-x", "cl", f.name, "-c", "-o", os.devnull])
    os.unlink(f.name)
    cpus = sorted(set(re.findall(r"\bgfx(\d+)([0-9a-f]{2})\b", out)),
                  key=lambda m: (int(m[0]), int(m[1], 16)))
    if not cpus:
        return "gfx1030"
    major = cpus[-1][0]
    return "gfx%s%s" % next(m for m in cpus if m[0] == major)


def clang_knows_cpu(clang, triple, cpu, _cache={}):
    key = (clang, triple)
    if key not in _cache:
        rc, out = run([clang, "--target=" + triple, "-nogpulib", "--print-supported-cpus",
                       "-x", "cl", "-", "-c", "-o", os.devnull], input="")
        _cache[key] = set(re.findall(r"\b((?:gfx|sm_)[0-9a-z]+)\b", out))
    return cpu in _cache[key]


# ---------------------------------------------------------------- targets
def cl_flags(opts):
    std = [] if any(o.startswith("-cl-std=") for o in opts) else ["-cl-std=CL1.2"]
    return ["-x", "cl"] + std + ["-Xclang", "-finclude-default-header"] + opts


def link_bc(files):
    out = []
    for f in files:
        out += ["-Xclang", "-mlink-builtin-bitcode", "-Xclang", f]
    return out


_ISA_LOCK = threading.Lock()
_ISA_DIR = []                                # created on first use, removed at exit
ISA_IR = """target triple = "amdgcn-amd-amdhsa"
@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 %d, align 4
"""


def isa_version_value(num):
    """gfx number -> __oclc_ISA_version: '1100' -> 11000, '1030' -> 10300, '90a' -> 9010."""
    return int(num[:-2]) * 1000 + int(num[-2], 16) * 100 + int(num[-1], 16)


def amd_isa_bc(tc, num):
    """(path of oclc_isa_version_<num>.bc, generated?): the device libs' file, or one the gate
    builds with the same clang when the libs predate the target (None, msg on failure)."""
    t = tc["amd"]
    real = os.path.join(t["bc"], "oclc_isa_version_%s.bc" % num)
    if os.path.exists(real):
        return real, False
    with _ISA_LOCK:
        if not _ISA_DIR:
            _ISA_DIR.append(tempfile.mkdtemp(prefix="gate_isa_"))
            atexit.register(shutil.rmtree, _ISA_DIR[0], True)
        path = os.path.join(_ISA_DIR[0], "oclc_isa_version_%s.bc" % num)
        if not os.path.exists(path):
            ll = path[:-3] + ".ll"
            with open(ll, "w") as f:
                f.write(ISA_IR % isa_version_value(num))
            rc, out = run([t["clang"], "-target", "amdgcn-amd-amdhsa", "-nogpulib", "-x", "ir",
                           "-c", "-emit-llvm", "-o", path, ll])
            if rc:
                return None, "cannot build oclc_isa_version_%s.bc: %s" % (num, errors_of(out))
    return path, True


def target_amd(tc, gfx, src, opts, work):
    """amdgcn ISA via clang + ROCm device libs; metrics from resource-usage remarks."""
    t = tc["amd"]
    if isinstance(t, str):
        return Cell("SKIP", msg=t)
    bc = t["bc"]
    num = gfx[3:]
    wave64 = num.startswith("9")
    libs = ["opencl", "ocml", "ockl", "oclc_wavefrontsize64_" + ("on" if wave64 else "off"),
            "oclc_daz_opt_off", "oclc_finite_only_off", "oclc_unsafe_math_off",
            "oclc_correctly_rounded_sqrt_on", "oclc_abi_version_400"]
    isa, generated = amd_isa_bc(tc, num)
    if isa is None:
        return Cell("FAIL", msg=generated)
    note = " (gate-built oclc_isa_version_%s.bc)" % num if generated else ""
    obj = os.path.join(work, gfx + ".o")
    cmd = ([t["clang"]] + cl_flags(opts) + ["-target", "amdgcn-amd-amdhsa", "-mcpu=" + gfx,
           "-O3", "-nogpulib", "-fno-caret-diagnostics", "-Rpass-analysis=kernel-resource-usage", "-c", "-o", obj, src]
           + link_bc([os.path.join(bc, l + ".bc") for l in libs] + [isa]))
    rc, out = run(cmd)
    if rc:
        return Cell("FAIL", msg=errors_of(out))
    rc, nm = run([tc["llvm-nm"], obj])
    undef = [l.split()[-1] for l in nm.splitlines() if l.split()[:1] == ["U"]]
    if undef:
        return Cell("FAIL", msg="undefined symbols%s: %s" % (note, " ".join(undef)))
    entries = {l.split()[-1][:-3] for l in nm.splitlines() if l.endswith(".kd")}
    kernels, fail = {}, False
    usage, cur = {}, None
    for line in out.splitlines():
        m = re.search(r"remark: +([A-Za-z][A-Za-z ]*?)(?: \[[^\]]*\])?: (\S+) \[-Rpass", line)
        if m and m.group(1) == "Function Name":
            cur = usage.setdefault(m.group(2), {})
        elif m and cur is not None:
            cur[m.group(1)] = m.group(2)
    for fn, m in usage.items():
        if fn not in entries:
            continue
        spill = int(m.get("VGPRs Spill", 0)) + int(m.get("SGPRs Spill", 0))
        fail |= spill > 0
        kernels[fn] = "v%s%s s%s scr%s occ%s%s" % (
            m.get("VGPRs"), "+a" + m["AGPRs"] if int(m.get("AGPRs", 0)) else "", m.get("SGPRs"),
            m.get("ScratchSize"), m.get("Occupancy"), " SPILL%d" % spill if spill else "")
    return Cell("FAIL" if fail else "PASS", kernels, "spill" if fail else "")


def target_spirv(tc, src, opts, work):
    """clang -> SPIR-V 1.0 -> spirv-val (OpenCL 1.2 environment)."""
    t = tc["spirv"]
    if isinstance(t, str):
        return Cell("SKIP", msg=t)
    bc, spv = os.path.join(work, "k.bc"), os.path.join(work, "k.spv")
    steps = [[t["clang"]] + cl_flags(opts) + ["-target", "spir64", "-O0", "-emit-llvm", "-c",
                                              "-o", bc, src],
             [t["llvm-spirv"], "--spirv-max-version=1.0", bc, "-o", spv],
             [t["spirv-val"], "--target-env", "opencl1.2", spv]]
    for cmd in steps:
        rc, out = run(cmd)
        if rc:
            return Cell("FAIL", msg="%s: %s" % (os.path.basename(cmd[0]), errors_of(out)))
    return Cell("PASS", {"*": "valid"})


def decode_patchtokens(path):
    """Intel legacy patch-token binary -> {kernel: (simd, grf, private_B, scratch_B, spillfill)}."""
    d = open(path, "rb").read()
    o = d.find(b"CTNI")
    if o < 0:
        raise ValueError("no CTNI device binary in " + path)
    _, _, _, _, nk, _, plsz = struct.unpack_from("<7I", d, o)
    p = o + 28 + plsz
    res = {}
    for _ in range(nk):
        _, _, nsz, plist, kh, gsh, dsh, ssh, _ = struct.unpack_from("<IQ7I", d, p)
        p += 40
        name = d[p:p + nsz].split(b"\0")[0].decode()
        p += nsz + kh + gsh + dsh + ssh
        end, simd, grf, priv, scratch, sf = p + plist, 0, 0, 0, 0, 0
        while p < end:
            tok, size = struct.unpack_from("<II", d, p)
            body = d[p + 8:p + size]
            if tok in (18, 55):                   # MEDIA_VFE_STATE(_SLOT1): scratch per thread
                scratch += struct.unpack_from("<2I", body)[1]
            elif tok == 23 and len(body) >= 84:   # EXECUTION_ENVIRONMENT
                f = struct.unpack_from("<21I", body)
                simd, sf, grf = f[3], f[13], f[20]
            elif tok == 38 and len(body) >= 16:   # ALLOCATE_STATELESS_PRIVATE_MEMORY
                priv = struct.unpack_from("<4I", body)[3]
            p += max(size, 8)
        res[name] = (simd, grf, priv, scratch, sf)
    return res


def target_intel(tc, dev, src, opts, work):
    """Intel IGC via ocloc; SIMD, GRF, private and spill from the binary."""
    t = tc["intel"]
    if isinstance(t, str):
        return Cell("SKIP", msg=t)
    device = INTEL_DEVICES[dev]
    std = [] if any(o.startswith("-cl-std=") for o in opts) else ["-cl-std=CL1.2"]
    rc, out = run([t["ocloc"], "compile", "-file", src, "-device", device,
                   "-options", " ".join(shlex.quote(o) for o in std + opts),
                   "-out_dir", work, "-output", "k_" + device])
    bins = glob.glob(os.path.join(work, "k_%s*.bin" % device))
    if rc or not bins:
        return Cell("FAIL", msg=errors_of(out) or "ocloc rc=%d, no binary" % rc)
    try:
        info = decode_patchtokens(bins[0])
    except (ValueError, struct.error) as e:
        return Cell("PASS", {"*": "built (metrics unreadable: %s)" % e})
    kernels, fail = {}, False
    for k, (simd, grf, priv, scratch, sf) in info.items():
        spill = scratch > 0 or sf
        fail |= bool(spill)
        kernels[k] = "simd%d grf%d prv%d%s" % (simd, grf, priv, " SPILL%d" % scratch if spill else "")
    return Cell("FAIL" if fail else "PASS", kernels, "spill" if fail else "")


def nv_occupancy(regs):
    """Register-limited resident warps per SM (sm_80/sm_90: 64K regs, 64 warps, 256-reg granule)."""
    per_warp = max(256, -(-regs * 32 // 256) * 256)
    return min(64, 65536 // per_warp) * 100 // 64


def target_nvidia(tc, sm, src, opts, work):
    """clang nvptx64 + libclc -> PTX -> ptxas -v (proxy for NVIDIA's driver compiler)."""
    t = tc["nvidia"]
    if isinstance(t, str):
        return Cell("SKIP", msg=t)
    triple = "nvptx64-unknown-nvidiacl"
    arch = sm if clang_knows_cpu(t["clang"], triple, sm) else "sm_80"
    shimmed = os.path.join(work, "nv.cl")
    with open(src) as f, open(shimmed, "w") as g:
        g.write(f.read() + NV_SHIM)
    ptx = os.path.join(work, sm + ".ptx")
    rc, out = run([t["clang"]] + cl_flags(opts) + [
        "-target", triple, "-march=" + arch, "-O3", "-nocudalib", "-Wno-unknown-cuda-version",
        "-S", "-o", ptx, shimmed] + link_bc([t["clc"]]))
    if rc:
        return Cell("FAIL", msg=errors_of(out))
    if not t["ptxas"]:
        return Cell("PASS", {"*": "ptx only (no ptxas)"})
    rc, out = run([t["ptxas"], "-arch=" + sm, "-v", "-o", os.devnull, ptx])
    if rc:
        return Cell("FAIL", msg="ptxas: " + errors_of(out))
    kernels, fail = {}, False
    for name, body in re.findall(r"Compiling entry function '(\S+)' for '\w+'\n(.*?)(?=ptxas info\s+: Compil|\Z)",
                                 out, re.S):
        st = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", body)
        regs = re.search(r"Used (\d+) registers", body)
        smem = re.search(r"(\d+) bytes smem", body)
        frame, sst, sld = map(int, st.groups()) if st else (0, 0, 0)
        r = int(regs.group(1)) if regs else 0
        fail |= sst + sld > 0
        kernels[name] = "r%d smem%s stk%d occ%d%%%s%s" % (
            r, smem.group(1) if smem else 0, frame, nv_occupancy(r),
            " SPILL%d" % (sst + sld) if sst + sld else "", "" if arch == sm else " (ptx %s)" % arch)
    return Cell("FAIL" if fail else "PASS", kernels, "spill" if fail else "")


def target_pocl(binary):
    """The real runtime builds every config on the default OpenCL device."""
    t0 = time.time()
    try:
        rc, out = run([binary, "kernel-configs", "--build"], timeout=1800)
    except subprocess.TimeoutExpired:
        return Cell("FAIL", msg="timeout", secs=time.time() - t0)
    cell = Cell("PASS" if rc == 0 else "FAIL", msg="" if rc == 0 else "rc=%d\n%s" % (rc, out[-3000:]),
                secs=time.time() - t0)
    cell.out = out
    return cell


def errors_of(out):
    lines = [l for l in out.splitlines()
             if re.search(r"error|undefined|fatal", l, re.I) and not l.startswith("Command was")]
    return "\n".join((lines or out.strip().splitlines() or ["(no output)"])[:8])


# ---------------------------------------------------------------- driver
def load_configs(source):
    if source.endswith(".tsv") or not os.access(source, os.X_OK):
        text, binary = open(source).read(), None
    else:
        rc, text = run([source, "kernel-configs"])
        if rc:
            sys.exit("error: %s kernel-configs failed (rc=%d):\n%s" % (source, rc, text))
        binary = source
    configs = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split("\t")
        if len(f) < 2 or f[1] not in VENDOR_TARGETS:
            sys.exit("error: bad config line: %r" % line)
        configs.append((f[0], f[1], f[2] if len(f) > 2 else ""))
    return configs, binary


def write_sources(cl_dir, programs, work):
    """cl/common.cl + cl/<program>.h + cl/<program>.cl + cl/<program>.<part>.cl per program, as the
    runtime joins them."""
    srcs = {}
    for program in programs:
        # as src/runtime/source.c joins them: common, the program's header, the program, its parts
        parts = [os.path.join(cl_dir, "common.cl"), os.path.join(cl_dir, program + ".h"),
                 os.path.join(cl_dir, program + ".cl")]
        parts += sorted(glob.glob(os.path.join(cl_dir, glob.escape(program) + ".*.cl")))
        if not os.path.exists(parts[2]):
            srcs[program] = None
            continue
        srcs[program] = os.path.join(work, program + ".cl")
        with open(srcs[program], "w") as out:
            for p in parts:
                if os.path.exists(p):
                    out.write(open(p).read() + "\n")
    return srcs


def compile_one(tc, src, options, target):
    """One (program source, options, concrete target) compile in its own folder."""
    if src is None:
        return Cell("FAIL", msg="missing kernel source")
    work = tempfile.mkdtemp(prefix="gate_")
    opts = shlex.split(options)
    t0 = time.time()
    if target.startswith("gfx"):
        cell = target_amd(tc, target, src, opts, work)
    elif target == "spirv":
        cell = target_spirv(tc, src, opts, work)
    elif target.startswith("xe-"):
        cell = target_intel(tc, target, src, opts, work)
    else:
        cell = target_nvidia(tc, target, src, opts, work)
    cell.secs = time.time() - t0
    shutil.rmtree(work, ignore_errors=True)
    return cell


# rough relative cost per target, so that the slowest compiles start first
TARGET_COST = {"gfx": 3, "xe-": 2, "sm_": 2, "spi": 1}


def compile_all(tc, cl_dir, configs, newest, jobs):
    """Every (config, target) as its own task; a (program, options, target) shared by several
    configs is compiled once. Returns ({config: {target: Cell}}, unique compile count)."""
    work = tempfile.mkdtemp(prefix="gate_src_")
    srcs = write_sources(cl_dir, sorted({c[0] for c in configs}), work)
    real = lambda t: newest if t == "gfx-newest" else t
    keys = sorted({(c[0], c[2], real(t)) for c in configs for t in VENDOR_TARGETS[c[1]]},
                  key=lambda k: -TARGET_COST.get(k[2][:3], 1))
    with ThreadPoolExecutor(jobs) as ex:
        futs = {k: ex.submit(compile_one, tc, srcs[k[0]], k[1], k[2]) for k in keys}
        done = {k: f.result() for k, f in futs.items()}
    shutil.rmtree(work, ignore_errors=True)
    return {c: {t: done[(c[0], c[2], real(t))] for t in VENDOR_TARGETS[c[1]]} for c in configs}, len(keys)


def print_table(configs, results, newest):
    width = 34
    for vendor in ("amd", "intel", "nvidia"):
        rows = [(c, results[c]) for c in configs if c[1] == vendor]
        if not rows:
            continue
        heads = [newest if t == "gfx-newest" else t for t in VENDOR_TARGETS[vendor]]
        print("\n== %s  (%s)" % (vendor, {"amd": "v=VGPR s=SGPR scr=scratch B/lane occ=waves/SIMD",
                                         "intel": "simd width, GRF, prv=private B/work-item",
                                         "nvidia": "r=regs stk=stack B occ=reg-limited warps/SM"}[vendor]))
        print("%-44s " % "program [options] kernel" + " ".join("%-*s" % (width, h) for h in heads))
        for (prog, _, options), res in rows:
            names = sorted({k for c in res.values() for k in c.kernels if k != "*"}) or ["*"]
            print("%s [%s]" % (prog, options))
            for k in names:
                cells = []
                for t in VENDOR_TARGETS[vendor]:
                    c = res[t]
                    txt = c.kernels.get(k) or c.kernels.get("*") or (
                        "%s: %s" % (c.status, c.msg.splitlines()[0][:width - 6] if c.msg else ""))
                    cells.append("%-*s" % (width, txt[:width]))
                print("  %-42s " % k + " ".join(cells))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", nargs="?", help="prefixcl binary, or a TSV file of configs")
    ap.add_argument("--list-toolchains", action="store_true", help="show which toolchains were found")
    ap.add_argument("--cl-dir", default=os.path.join(ROOT, "cl"))
    ap.add_argument("--require", default="amd,spirv,intel,pocl",
                    help="targets whose missing toolchain fails the gate (amd,spirv,intel,nvidia,pocl)")
    ap.add_argument("--amd-newest", help="override the newest AMD target (default: from clang)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    tc = find_toolchains()
    if args.list_toolchains:
        print(describe_toolchains(tc))
        if not args.source:
            return 0
    if not args.source:
        ap.error("need a prefixcl binary or configs TSV")
    configs, binary = load_configs(args.source)
    newest = args.amd_newest or (amd_newest(tc["amd"]["clang"]) if isinstance(tc["amd"], dict) else "gfx1100")
    if isinstance(tc["amd"], dict):
        gen = [g for g in ("gfx90a", "gfx1030", newest)
               if not os.path.exists(os.path.join(tc["amd"]["bc"], "oclc_isa_version_%s.bc" % g[3:]))]
        print("AMD targets: gfx90a, gfx1030, %s (newest family clang-%d knows)%s" % (
            newest, tc["amd"]["ver"],
            "; device libs lack oclc_isa_version for %s: the gate supplies __oclc_ISA_version (%s)"
            % (", ".join(gen), ", ".join("%s=%d" % (g, isa_version_value(g[3:])) for g in gen))
            if gen else ""))
    t0 = time.time()
    # PoCL (the real runtime, one process) overlaps the offline compiles
    with ThreadPoolExecutor(1) as pocl_ex:
        pocl_fut = pocl_ex.submit(target_pocl, binary) if binary else None
        results, unique = compile_all(tc, args.cl_dir, configs, newest, args.jobs)
        compile_secs = time.time() - t0
        pocl = pocl_fut.result() if pocl_fut else Cell("SKIP", msg="needs the prefixcl binary, not a TSV")
    total_secs = time.time() - t0
    print_table(configs, results, newest)

    require = set(args.require.split(","))
    family = {"gfx": "amd", "spi": "spirv", "xe-": "intel", "sm_": "nvidia"}
    failures = []
    for c in configs:
        for t, cell in results[c].items():
            fam = family[t[:3]]
            if cell.status == "FAIL" or (cell.status == "SKIP" and fam in require):
                failures.append("%s [%s] %s: %s %s" % (c[0], c[2], newest if t == "gfx-newest" else t,
                                                      cell.status, cell.msg))
    skips = sorted({cell.msg for r in results.values() for cell in r.values() if cell.status == "SKIP"})
    print("\n== pocl (runtime kernel-configs --build): %s %.1fs %s" % (pocl.status, pocl.secs,
                                                                      pocl.msg.splitlines()[0] if pocl.msg else ""))
    if pocl.status == "FAIL" or (pocl.status == "SKIP" and "pocl" in require and binary):
        failures.append("pocl: " + pocl.msg)
    for s in skips:
        print("SKIP: " + s)
    n = sum(len(r) for r in results.values())
    cells = {id(c): c for r in results.values() for c in r.values()}.values()
    per_family = {}
    for r in results.values():
        for t, c in r.items():
            per_family.setdefault(family[t[:3]], {})[id(c)] = c.secs
    print("%d configs, %d cells, %d distinct offline compiles in %.1fs (%.2fs per compile, %d jobs; %s);"
          " with pocl %.1fs wall"
          % (len(configs), n, unique, compile_secs, sum(c.secs for c in cells) / max(unique, 1), args.jobs,
             ", ".join("%s %.0fs" % (f, sum(v.values())) for f, v in sorted(per_family.items())),
             total_secs))
    if failures:
        print("\nGATE FAILED:")
        for f in failures:
            print("  " + f.replace("\n", "\n    "))
        return 1
    print("GATE PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
