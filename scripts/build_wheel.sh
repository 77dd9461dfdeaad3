#!/usr/bin/env bash
# Builds the fusegen wheel (`pip install` fusegen, issue #19) into dist/: the fusegen
# executable linked statically against Clang, LLVM and yaml-cpp (build-device/, as for the GPU
# machine), stripped, with its templates and the Python API of tools/fusegen/python
# (`fusegen` and `python -m fusegen` run it; `fusegen.load`, `fusegen.load_inline`). The wheel
# is py3-none-<platform>: any Python 3 on this platform (glibc as new as the build machine's).
# Usage: scripts/build_wheel.sh   (from anywhere; -j2, FUSEGEN_JOBS to change)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEGEN_STATIC_LLVM=ON \
  -DFUSEGEN_TESTS=OFF >/dev/null
ninja -C build-device -j "${FUSEGEN_JOBS:-2}" fusegen
stage=build-wheel/stage
rm -rf "$stage" && mkdir -p "$stage/fusegen/bin"
cp -r tools/fusegen/python/. "$stage/"
rm -rf "$stage"/fusegen/__pycache__
strip -o "$stage/fusegen/bin/fusegen" build-device/fusegen
cp -r templates "$stage/fusegen/templates"
cp README.md "$stage/README.md"
version=$("$stage/fusegen/bin/fusegen" --version | awk '{print $2}')
FUSEGEN_VERSION=$version python3 -m pip wheel -q --no-deps --no-build-isolation -w dist "$stage"
ls -la dist/fusegen-"$version"-*.whl
