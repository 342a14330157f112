"""Builds dfccl_torch and its extension dfccl_torch._C against an existing DFCCL build (see README.md).

The library is found, in this order, from
  DFCCL_PREFIX     an install prefix (cmake --install build --prefix P): P/include/dfccl.h, P/lib/libdfccl.so
  DFCCL_BUILD_DIR  a CMake build tree of this repository (default: ../build): lib/include/dfccl.h, <dir>/lib/libdfccl.so
The extension links the shared libdfccl.so (it exports only dfccl* symbols) with an rpath to its folder.
Build with the torch it will run with: pip install --no-build-isolation ./python
"""
import os
import re
import sys
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent

try:
    from torch.utils.cpp_extension import BuildExtension, CUDAExtension
except ImportError:
    sys.exit("dfccl_torch: torch is not importable here; install torch first and build with "
             "`pip install --no-build-isolation ./python`")


def find_dfccl():
    """Returns (include dir, library dir) of DFCCL, or exits naming what is missing."""
    prefix = os.environ.get("DFCCL_PREFIX")
    if prefix:
        inc = Path(prefix) / "include"
        libs = [Path(prefix) / d for d in ("lib", "lib64")]
        origin = f"DFCCL_PREFIX={prefix}"
    else:
        build = Path(os.environ.get("DFCCL_BUILD_DIR", HERE.parent / "build")).resolve()
        inc = HERE.parent / "lib" / "include"
        libs = [build / "lib"]
        origin = f"DFCCL_BUILD_DIR={build}"
    lib = next((d for d in libs if (d / "libdfccl.so").exists()), None)
    if not (inc / "dfccl.h").exists() or lib is None:
        sys.exit(f"dfccl_torch: no DFCCL at {origin} (need {inc}/dfccl.h and libdfccl.so in "
                 f"{' or '.join(map(str, libs))}); build it with `cmake --build build --target dfccl_shared` or set "
                 "DFCCL_PREFIX to an install prefix")
    return str(inc), str(lib.resolve())


def dfccl_version(inc):
    """The version of the DFCCL built against: dfccl.h's DFCCL_MAJOR.DFCCL_MINOR.DFCCL_PATCH, its one place."""
    text = (Path(inc) / "dfccl.h").read_text()
    parts = [re.search(rf"^#define DFCCL_{p} (\d+)$", text, re.M) for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        sys.exit(f"dfccl_torch: {inc}/dfccl.h defines no DFCCL_MAJOR, DFCCL_MINOR and DFCCL_PATCH")
    return ".".join(m.group(1) for m in parts)


inc, lib = find_dfccl()
setup(
    name="dfccl_torch",
    version=dfccl_version(inc),
    description="torch.distributed backend 'dfccl' over the DFCCL collective library",
    packages=["dfccl_torch"],
    ext_modules=[
        CUDAExtension(
            "dfccl_torch._C",
            ["csrc/ProcessGroupDFCCL.cpp", "csrc/WorkDFCCL.cpp", "csrc/Collectives.cpp", "csrc/PointToPoint.cpp",
             "csrc/Shrink.cpp", "csrc/init.cpp"],
            include_dirs=[inc],
            library_dirs=[lib],
            runtime_library_dirs=[lib],
            libraries=["dfccl"],
            depends=["csrc/ProcessGroupDFCCL.hpp", "csrc/Common.hpp", f"{inc}/dfccl.h"],
            extra_compile_args={"cxx": ["-O2"]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
