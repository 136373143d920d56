"""Builds vlrnn._C for `pip install --no-build-isolation .` (pyproject.toml has the rest).

CMake configures the engine and the Python extension alone (no tool, tests, benchmarks or
examples) against the torch that this Python imports: its LibTorch through
torch.utils.cmake_prefix_path, this interpreter as VLRNN_PYTHON. Everything the install
builds goes under build-pip/ in the checkout (ignored by git), kept, so a second install
rebuilds only what changed; VLRNN_BUILD_DIR names a build folder that is already configured (scripts/build.sh's
build/, say) and reuses it as it is. VLRNN_CMAKE_ARGS adds arguments to the configure step
(e.g. -DVLRNN_PCH=OFF). A torch built with CUDA gets the engine's CUDA-only code by itself."""
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
PIP_BUILD = os.path.join(ROOT, "build-pip")  # not build/: scripts/build.sh's CMake build


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("VLRNN_BUILD_DIR")
        if not build or not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            build = build or os.path.join(PIP_BUILD, "cmake-" + sys.implementation.cache_tag)
            self.configure(build)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", build, "--target", "vlrnn_python", "--parallel",
                        jobs], check=True)
        built = os.path.join(build, "python", "vlrnn",
                             "_C" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not os.path.exists(built):
            sys.exit(f"vlrnn: the build made no {built}: is it configured for this Python "
                     f"({sys.executable})? (see its CMake output: VLRNN_PYTHON)")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built, target)

    @staticmethod
    def configure(build):
        try:
            import torch
        except ImportError:
            sys.exit("vlrnn: building needs torch importable by this Python "
                     f"({sys.executable}); install it first, then pip install "
                     "--no-build-isolation .")
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.run(["cmake", "-S", ROOT, "-B", build, *generator,
                        "-DCMAKE_BUILD_TYPE=Release",
                        f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}",
                        f"-DVLRNN_PYTHON={sys.executable}",
                        "-DVLRNN_BUILD_TOOLS=OFF", "-DVLRNN_BUILD_TESTS=OFF",
                        "-DVLRNN_BUILD_BENCHMARKS=OFF", "-DVLRNN_BUILD_EXAMPLES=OFF",
                        *shlex.split(os.environ.get("VLRNN_CMAKE_ARGS", ""))], check=True)


os.makedirs(PIP_BUILD, exist_ok=True)
setup(ext_modules=[CMakeExtension("vlrnn._C")], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": os.path.join(PIP_BUILD, "setuptools")},
               "egg_info": {"egg_base": PIP_BUILD}})
