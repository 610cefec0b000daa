#!/usr/bin/env python3
"""The installed library and tool without the source tree, as a user of
them builds and runs: `meson install --destdir` into a temporary folder, then
examples/prefix_attention.c built with the installed prefixcl.pc
(pkg-config) and run; examples/generate_two_adapters.c built by CMake's
find_package(prefixcl) (examples/CMakeLists.txt, the target
prefixcl::prefixcl) and run on the generate fixture; prefix_attention.c
again with the build folder's prefixcl-uninstalled.pc; the installed tool
names its data under share/prefixcl (the experiment's default tokenizer),
where the demonstration's corpus and tokenizer are too.

usage: test_install.py BUILD_DIR SOURCE_DIR PREFIX LIBDIR FIXTURE_GPT2
  (needs pkg-config, a C compiler and CMake >= 3.13)
"""
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time


def run(what, cmd, env=None, cwd=None):
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=env, cwd=cwd)
    if p.returncode != 0:
        sys.exit("%s: exit %d\n$ %s\n%s%s" % (what, p.returncode, " ".join(map(shlex.quote, cmd)),
                                              p.stdout[-3000:], p.stderr[-3000:]))
    return p.stdout


def main():
    build, source, prefix, libdir, fixture = (os.path.abspath(a) if i != 3 else a
                                              for i, a in enumerate(sys.argv[1:6]))
    if not shutil.which("cmake"):
        sys.exit("cmake is not installed (tools/setup.sh installs it)")
    cc = os.environ.get("CC", "cc")
    examples = os.path.join(source, "examples")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="prefixcl-install-") as tmp:
        dest = os.path.join(tmp, "dest")
        run("meson install", ["meson", "install", "-C", build, "--destdir", dest, "--no-rebuild", "--quiet"])
        root = dest + prefix  # the installed tree: DESTDIR + prefix
        lib = os.path.join(root, libdir)
        env = dict(os.environ, LD_LIBRARY_PATH=lib)

        # pkg-config, the installed prefixcl.pc (prefix moved under DESTDIR)
        pc_env = dict(env, PKG_CONFIG_PATH=os.path.join(lib, "pkgconfig"))
        flags = run("pkg-config", ["pkg-config", "--define-variable=prefix=" + root, "--cflags", "--libs",
                                   "prefixcl"], env=pc_env).split()
        if "-I" + os.path.join(root, "include") not in flags or "-I" + os.path.join(prefix, "include") in flags:
            sys.exit("installed prefixcl.pc: %s, not the installed tree's include/" % flags)
        exe = os.path.join(tmp, "prefix_attention")
        run("prefix_attention.c with prefixcl.pc",
            [cc, "-std=c11", os.path.join(examples, "prefix_attention.c"), "-o", exe] + flags + ["-lm"],
            env=pc_env)
        out = run("prefix_attention (pkg-config)", [exe, "1e-4"], env=env)
        if "relative error" not in out:
            sys.exit("prefix_attention printed %r" % out)

        # CMake: find_package(prefixcl) from the installed tree
        cmake_build = os.path.join(tmp, "cmake-build")
        run("cmake configure", ["cmake", "-S", examples, "-B", cmake_build, "-DCMAKE_PREFIX_PATH=" + root,
                                "-DCMAKE_BUILD_TYPE=Release"], env=env)
        run("cmake build", ["cmake", "--build", cmake_build, "--target", "generate_two_adapters"], env=env)
        out = run("generate_two_adapters (CMake)",
                  [os.path.join(cmake_build, "generate_two_adapters"), fixture,
                   os.path.join(fixture, "adapter0"), os.path.join(fixture, "adapter1")], env=env)
        if not out.strip():
            sys.exit("generate_two_adapters (CMake) printed nothing")

        # the build folder's prefixcl-uninstalled.pc: include/ and the library in the build
        un_env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(build, "meson-uninstalled"),
                      LD_LIBRARY_PATH=os.path.join(build, "src"))
        flags = run("pkg-config (uninstalled)", ["pkg-config", "--cflags", "--libs", "prefixcl"],
                    env=un_env).split()
        exe = os.path.join(tmp, "prefix_attention_uninstalled")
        run("prefix_attention.c with prefixcl-uninstalled.pc",
            [cc, "-std=c11", os.path.join(examples, "prefix_attention.c"), "-o", exe] + flags + ["-lm"],
            env=un_env)
        run("prefix_attention (uninstalled)", [exe, "1e-4"], env=un_env)

        # the installed tool's data: share/prefixcl beside its bin/
        share = os.path.join(root, "share", "prefixcl")
        for name in ("demo/tokenizer.json", "demo/train.txt", "demo/eval.txt", "wordnet/tokenizer.json"):
            if not os.path.isfile(os.path.join(share, name)):
                sys.exit("not installed: %s" % os.path.join(share, name))
        tool = os.path.join(root, "bin", "prefixcl")
        out = run("prefixcl experiment gain --help", [tool, "experiment", "gain", "--help"], env=env)
        if os.path.join(share, "wordnet") not in out:
            sys.exit("the installed prefixcl's default tokenizer is not %s:\n%s"
                     % (os.path.join(share, "wordnet"), out))
    print("ok: installed, built with pkg-config and CMake, run, in %.1f s" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
