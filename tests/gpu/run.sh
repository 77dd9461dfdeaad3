#!/usr/bin/env bash
# The GPU part of the tests, run on a machine with an NVIDIA GPU (the lab's H100 through the
# device tool): builds and installs the generated ops of every shipped spec for the GPU
# present with `fusegen --build --install`, runs every op's CUDA and device-independent tests
# with CUDA required (FUSEGEN_REQUIRE_CUDA=1: a missing GPU fails instead of skipping; the CPU
# ones too with FUSEGEN_GPU_CPU_TESTS=1), and writes
#   RESULTS/gpu-tests.json, RESULTS/gpu-tests.md   counts per op and device, GPU, torch, date
#   RESULTS/build.log, RESULTS/pytest.log
# Usage: tests/gpu/run.sh [RESULTS_DIR]   (default: $OUT, else bench/results/gpu)
# FUSEGEN (default build/fusegen) is the fusegen binary; the sources in generated/ are used
# as they are (generate them on the development machine).
set -uo pipefail
cd "$(dirname "$0")/../.."
RESULTS=${1:-${OUT:-bench/results/gpu}}
FUSEGEN=${FUSEGEN:-build/fusegen}
mkdir -p "$RESULTS"
export FUSEGEN_REQUIRE_CUDA=1 PYTHONUNBUFFERED=1

start=$(date +%s.%N)
"$FUSEGEN" --build --install -o generated -j "$(nproc)" 2>&1 | tee "$RESULTS/build.log"
build_status=${PIPESTATUS[0]}
build_seconds=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
echo "fusegen --build --install: exit $build_status in $build_seconds s" | tee -a "$RESULTS/build.log"
[ "$build_status" -eq 0 ] || exit 1

# Parallel workers when pytest-xdist is there (the GPU machine has 16 cores).
parallel=""
python3 -c "import xdist" 2>/dev/null && parallel="-n ${FUSEGEN_TEST_WORKERS:-8}"
# The tests with tensors beyond 2^31 elements take tens of GB each, and the benchmark-shape
# tests several GB: they run afterwards, one at a time, when the parallel workers have given
# their memory back (12 workers running the benchmark-shape tests at once ran out of 80 GB).
pytest_args=(--pyargs fusegen_ops -q -p no:cacheprovider -W ignore::DeprecationWarning)
# The CPU-parametrized tests run in CI; here they are left out unless FUSEGEN_GPU_CPU_TESTS=1
# (with row lengths up to 262144 they took the suite past the device tool's 10 minutes).
cpu_filter="not cpu and "
[ "${FUSEGEN_GPU_CPU_TESTS:-0}" = 1 ] && cpu_filter=""
(cd /tmp && python3 -m pytest "${pytest_args[@]}" $parallel -k "${cpu_filter}not index_beyond_2_31 and not benchmark_shape" \
   --junitxml="$RESULTS/junit.xml") 2>&1 | tee "$RESULTS/pytest.log"
test_status=${PIPESTATUS[0]}
(cd /tmp && python3 -m pytest "${pytest_args[@]}" -k "index_beyond_2_31 or benchmark_shape" \
   --junitxml="$RESULTS/junit-large.xml") 2>&1 | tee -a "$RESULTS/pytest.log"
large_status=${PIPESTATUS[0]}
python3 tests/gpu/summarize.py "$RESULTS/junit.xml,$RESULTS/junit-large.xml" "$RESULTS" \
  --build-seconds "$build_seconds"
[ "$test_status" -eq 0 ] && [ "$large_status" -eq 0 ]
