"""Builds libprefixcl with Meson and puts it inside the Python package.

The Meson folder is $PREFIXCL_BUILD_DIR, else build/ (configured by
tools/setup.sh; configured here as tools/setup.sh does when missing); only
the shared library is compiled. PREFIXCL_BUNDLE=0 ships no library: the
package then loads an installed libprefixcl (pkg-config prefixcl, or the
linker's path) or $PREFIXCL_LIBRARY at run time.
"""
import glob
import os
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = os.path.dirname(os.path.abspath(__file__))


def project_version():
    with open(os.path.join(ROOT, "meson.build"), encoding="utf-8") as f:
        return re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)


def bundling():
    return os.environ.get("PREFIXCL_BUNDLE", "1") != "0"


def build_library():
    """The path of a freshly compiled libprefixcl.so.VERSION."""
    build = os.environ.get("PREFIXCL_BUILD_DIR") or os.path.join(ROOT, "build")
    # Meson is a Python program of the system's: not the isolated build
    # environment's path (pip's PYTHONPATH hides the system's modules).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if not os.path.exists(os.path.join(build, "build.ninja")):
        subprocess.run(["meson", "setup", build, "--buildtype=release"], cwd=ROOT, env=env,
                       check=True)
    subprocess.run(["meson", "compile", "-C", build, "src/prefixcl:shared_library"], env=env,
                   check=True)
    found = glob.glob(os.path.join(build, "src", "libprefixcl.so." + project_version()))
    if not found:
        raise RuntimeError("libprefixcl.so." + project_version() + " not built in " + build)
    return found[0]


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        if not bundling():
            return
        target = os.path.join(self.build_lib, "prefixcl", "_lib")
        os.makedirs(target, exist_ok=True)
        # Named by its soname, as the loader would look it up.
        shutil.copy2(build_library(), os.path.join(target, "libprefixcl.so.0"))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return bundling()


# setuptools' own build folder apart from Meson's build/.
setup(version=project_version(), cmdclass={"build_py": BuildWithLibrary},
      distclass=BinaryDistribution, options={"build": {"build_base": "build-python"}})
