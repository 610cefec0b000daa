#!/bin/sh
# Sets up a Debian 12 (or Ubuntu) machine to build and test prefixcl, then
# configures the build folder `build/` if it does not exist yet.
# Packages: PoCL (the CPU OpenCL device), the ICD loader and headers, CLBlast,
# cmocka, cJSON, PCRE2, utf8proc, Meson, Ninja, pkg-config, clinfo, Python 3.
set -eu
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
missing=""
for pkg in pocl-opencl-icd ocl-icd-opencl-dev opencl-c-headers libclblast-dev libopenblas-dev libcmocka-dev \
           meson ninja-build pkg-config clinfo python3 gcc libc6-dev libcjson-dev libpcre2-dev \
           libutf8proc-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
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
