#!/bin/sh
# Sets up a Debian 12 (or Ubuntu) machine to build and test prefixcl, then
# configures the build folder `build/` if it does not exist yet.
# Packages: PoCL (the CPU OpenCL device), the ICD loader and headers, CLBlast,
# cmocka, cJSON, PCRE2, utf8proc, Meson, Ninja, pkg-config, clinfo, Python 3,
# cairo and a font (the tools' pictures); Mesa's rusticl (mesa-opencl-icd),
# the second OpenCL implementation the tests run on; Oclgrind, the GPU
# simulator of `meson test --setup oclgrind --suite oclgrind`; what the
# README's other commands run: WordNet (wordnet-base, the corpus of
# `prefixcl experiment gain`) and curl (the example request to `prefixcl
# serve`); CMake (suite 'install' builds an example with find_package);
# venv, numpy and pytest for the Python package (`pip install .`,
# python/README.md).
# Not MPI: the `mpi` feature is optional (libopenmpi-dev openmpi-bin; see
# README, .ci/run).
set -eu
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
missing=""
for pkg in pocl-opencl-icd ocl-icd-opencl-dev opencl-c-headers libclblast-dev libopenblas-dev libcmocka-dev \
           meson ninja-build pkg-config clinfo python3 gcc libc6-dev libcjson-dev libpcre2-dev \
           libutf8proc-dev libmicrohttpd-dev libcairo2-dev fonts-dejavu-core mesa-opencl-icd oclgrind \
           wordnet-base curl cmake python3-venv python3-numpy python3-pytest; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" && continue
    # Debian 12's mesa-opencl-icd needs libclc-15, which the compile gate's
    # libclc-16 (tools/install-gate-deps.sh) replaces: keep the gate's.
    if [ "$pkg" = mesa-opencl-icd ] &&
       dpkg-query -W -f='${Status}' libclc-16 2>/dev/null | grep -q "install ok installed"; then
        echo "setup: not installing mesa-opencl-icd (rusticl): it conflicts with libclc-16 of the compile gate"
        continue
    fi
    missing="$missing $pkg"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi
if [ ! -f build/build.ninja ]; then
    rm -rf build
    meson setup build --buildtype=release
fi
