"""Run by `fusegen --build` once per torch install, CUDA toolkit and arch list (fusegen caches
the answer): the compilers and flags torch.utils.cpp_extension builds an extension with,
printed as JSON, so that fusegen's own ninja file compiles the package's _C and no build
imports torch (about 4 s per import on the GPU machine).

Environment: TORCH_CUDA_ARCH_LIST, the GPU targets ("all": every architecture this torch was
built for); FUSEGEN_CPU_ONLY=1, no CUDA.
"""
import json
import os
import shutil
import sysconfig

import torch
from torch.utils import cpp_extension

with_cuda = (cpp_extension.CUDA_HOME is not None
             and os.environ.get("FUSEGEN_CPU_ONLY", "0") != "1")
if with_cuda and os.environ.get("TORCH_CUDA_ARCH_LIST") == "all":
    os.environ["TORCH_CUDA_ARCH_LIST"] = " ".join(
        f"{a[3:-1]}.{a[-1]}" for a in torch._C._cuda_getArchFlags().split())

# torch's include directories, library directories and libraries for an extension.
Extension = cpp_extension.CUDAExtension if with_cuda else cpp_extension.CppExtension
extension = Extension("_C", ["unused.cpp"], py_limited_api=True)
# The defines BuildExtension adds to every compile.
defines = ["-DTORCH_API_INCLUDE_EXTENSION_H", "-DTORCH_EXTENSION_NAME=_C"]
if hasattr(torch._C, "_GLIBCXX_USE_CXX11_ABI"):
    defines.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
includes = [f"-I{d}" for d in extension.include_dirs]
nvcc_flags = []
if with_cuda:
    nvcc_flags = (cpp_extension.COMMON_NVCC_FLAGS + ["--compiler-options", "'-fPIC'"]
                  + defines + includes + cpp_extension._get_cuda_arch_flags())
    if os.environ.get("CC"):
        nvcc_flags += ["-ccbin", os.environ["CC"]]

print(json.dumps({
    "torch_version": torch.__version__,
    "cuda_version": torch.version.cuda if with_cuda else None,
    "arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST", "") if with_cuda else "",
    "ninja": shutil.which("ninja") or shutil.which("ninja", path=sysconfig.get_path("scripts")),
    "cxx": os.environ.get("CXX", "c++"),
    "cxx_flags": ["-fPIC"] + defines + includes,
    "nvcc": os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc") if with_cuda else None,
    "nvcc_flags": nvcc_flags,
    "link_flags": (["-shared"] + [f"-L{d}" for d in extension.library_dirs]
                   + [f"-l{lib}" for lib in extension.libraries]),
}))
