#!/usr/bin/env bash
# Builds the fusegen wheel (`pip install` fusegen, issue #19) into dist/: the fusegen
# executable linked statically against Clang, LLVM and yaml-cpp (as for the GPU
# machine, in build-wheel/cmake), stripped, with its templates and the Python API of tools/fusegen/python
# (`fusegen` and `python -m fusegen` run it; `fusegen.load`, `fusegen.load_inline`). The wheel
# is py3-none-<platform>: any Python 3 on this platform (glibc as new as the build machine's).
# FUSEGEN_LLVM_VERSION picks the LLVM/Clang it is linked with (CI: 19, while build/ has 16).
# Usage: scripts/build_wheel.sh   (from anywhere; -j2, FUSEGEN_JOBS to change)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-wheel/cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEGEN_STATIC_LLVM=ON \
  -DFUSEGEN_TESTS=OFF -DFUSEGEN_LLVM_VERSION="${FUSEGEN_LLVM_VERSION:-}" >/dev/null
ninja -C build-wheel/cmake -j "${FUSEGEN_JOBS:-2}" fusegen
stage=build-wheel/stage
rm -rf "$stage" && mkdir -p "$stage/fusegen/bin"
cp -r tools/fusegen/python/. "$stage/"
rm -rf "$stage"/fusegen/__pycache__
strip -o "$stage/fusegen/bin/fusegen" build-wheel/cmake/fusegen
cp -r templates "$stage/fusegen/templates"
cp README.md "$stage/README.md"
version=$("$stage/fusegen/bin/fusegen" --version | awk '{print $2}')
FUSEGEN_VERSION=$version python3 -m pip wheel -q --no-deps --no-build-isolation -w dist "$stage"
ls -la dist/fusegen-"$version"-*.whl
