"""Builds the Python package sluice (python/sluice + the CMake-built _sluice extension).

  /usr/bin/python3 -m pip install --no-build-isolation --break-system-packages .
  /usr/bin/python3 -m pip install --no-build-isolation --target /tmp/x .   # a throwaway dir

CMake builds _sluice into $SLUICE_BUILD_DIR (default: build-pip/ in the source tree; an
existing configured build tree, e.g. build/, is reused as it is). CMAKE_ARGS adds arguments to
the configuration, e.g. CMAKE_ARGS=-DSLUICE_CUDA=OFF. docs/python.md, "Install".
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.path.abspath(os.environ.get("SLUICE_BUILD_DIR",
                                                   os.path.join(ROOT, "build-pip")))
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            subprocess.check_call(
                ["cmake", "-S", ROOT, "-B", build_dir, *generator,
                 "-DCMAKE_BUILD_TYPE=Release", "-DSLUICE_PYTHON=ON",
                 "-DSLUICE_BUILD_BENCHMARKS=OFF",
                 "-DSLUICE_PYTHON_EXECUTABLE=" + sys.executable,
                 *shlex.split(os.environ.get("CMAKE_ARGS", ""))])
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_sluice", "-j", jobs])
        built = glob.glob(os.path.join(build_dir, "python", "sluice", "_sluice*.so"))
        if len(built) != 1:
            raise RuntimeError("expected one _sluice module in %s/python/sluice, found %r"
                               % (build_dir, built))
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)


setup(
    name="sluice",
    version="0.1.0",
    description="sluice's data pipeline as a PyTorch loader, and its shard datasets",
    packages=["sluice"],
    package_dir={"": "python"},
    ext_modules=[Extension("sluice._sluice", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    install_requires=[],  # torch and numpy: Debian's python3-torch / python3-numpy
    zip_safe=False,
    # setuptools' own build directory, away from CMake's build/.
    options={"build": {"build_base": "build-pip/setuptools"}, "egg_info": {"egg_base": "build-pip"}},
)
