#!/usr/bin/env bash
# Builds the fusegen that travels to the GPU machine (the device tool): Clang, LLVM and
# yaml-cpp linked statically (that machine has none of their shared libraries), stripped and
# xz-compressed into .device/fusegen.xz (an ignored folder: name it in the tool's `carry`).
# There: `xz -dc .device/fusegen.xz > /tmp/fusegen && chmod +x /tmp/fusegen`, then
# `FUSEGEN=/tmp/fusegen FUSEGEN_TEMPLATES=$PWD/templates bash tests/gpu/run.sh`. Only fusegen
# itself is built (-j2).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEGEN_STATIC_LLVM=ON \
  -DFUSEGEN_TESTS=OFF >/dev/null
ninja -C build-device -j "${FUSEGEN_JOBS:-2}" fusegen
mkdir -p .device
strip -o .device/fusegen build-device/fusegen
xz -T2 -6 -f .device/fusegen
ls -la .device/fusegen.xz
