#!/usr/bin/env bash
# Configures and builds fusegen and its tests into build/ (2 parallel jobs: CI has 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build -j "${FUSEGEN_JOBS:-2}"
