#!/usr/bin/env bash
# Every test, from a fresh machine: fusegen's unit tests, error catalog, golden check, CLI,
# packaging and Python API tests (ctest); the fusegen wheel built and used from a fresh
# virtual environment (linked with a second LLVM, 19); the same again under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan,
# clang-14), with a 60 s seeded run of the fuzz target (tests/fuzz); then the generated ops
# of every shipped spec built and installed (their CUDA kernels compiled too when a CUDA
# toolkit is present) and tested on CPU (pytest; on a GPU machine also on CUDA), and 6 of
# them under a second torch (2.9.1); 5 built under torch 2.10.0 on the stable ABI and tested
# under this machine's later torch (one wheel, two torch versions); then a
# differential fuzzer's kept findings with the hand-written specs, and a bounded seeded batch
# (tests/difffuzz, README "CI": 12 random specs built into one package and checked against the
# fuzzer's own reference). Prints each runner's closing line; exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bash scripts/install_deps.sh
bash scripts/build_fusegen.sh

echo "== ctest: unit tests, error catalog, golden files"
(cd build && ctest --output-on-failure -j 2)

echo "== the fusegen wheel (scripts/build_wheel.sh, linked with LLVM 19), installed in a fresh virtual environment: the main job, golden files and error catalog from it"
FUSEGEN_LLVM_VERSION=19 bash scripts/build_wheel.sh
bash tests/packaging/wheel.sh "$(ls -t dist/fusegen-*.whl | head -1)"

echo "== ctest under ASan + UBSan (build-asan): unit tests, error catalog, golden files, fuzz seeds"
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFUSEGEN_SANITIZE=ON -DFUSEGEN_FUZZ=ON >/dev/null
ninja -C build-asan -j "${FUSEGEN_JOBS:-2}"
(cd build-asan && ctest --output-on-failure -j 2 -R '^(unit|errors|golden|fuzz)\.')

echo "== fuzz: tests/fuzz/fuzz_spec for 60 s from the seed corpus (scripts/fuzz.sh --ci)"
bash scripts/fuzz.sh --ci 60

echo "== building the generated ops of every shipped spec"
./build/fusegen --build --install -o generated -j "${FUSEGEN_JOBS:-2}"

echo "== pytest: the generated ops"
cd /tmp  # test the installed package
python3 -m pytest --pyargs fusegen_ops -q -p no:cacheprovider -W ignore::DeprecationWarning

echo "== a second torch (tests/packaging/other_torch.sh): the generated ops of 6 specs built and tested under torch 2.9.1"
(cd "$ROOT" && bash tests/packaging/other_torch.sh build/fusegen)

echo "== the stable ABI (tests/packaging/stable_abi.sh): 5 specs built into a wheel under torch 2.10.0, installed unchanged and tested under this machine's torch"
(cd "$ROOT" && bash tests/packaging/stable_abi.sh build/fusegen)

echo "== difffuzz: every kept finding (tests/difffuzz/regressions) and the hand-written specs"
echo "   (tests/difffuzz/handwritten), then seed 1, 12 random specs"
python3 "$ROOT/tests/difffuzz/run.py" --regressions --jobs "${FUSEGEN_JOBS:-2}" \
  --fusegen "$ROOT/build/fusegen" --out /tmp/difffuzz-regressions \
  "$ROOT"/tests/difffuzz/handwritten/*.yaml
python3 "$ROOT/tests/difffuzz/run.py" --seed 1 --count 12 --jobs "${FUSEGEN_JOBS:-2}" \
  --fusegen "$ROOT/build/fusegen" --out /tmp/difffuzz-ci
