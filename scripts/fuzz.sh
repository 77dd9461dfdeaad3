#!/usr/bin/env bash
# Fuzzes the generator: tests/fuzz/fuzz_spec (libFuzzer, ASan + UBSan) feeds mutated specs
# through every stage before files are written. Builds build-asan (clang-14) if needed.
#
#   bash scripts/fuzz.sh [DURATION] [JOBS]      a long run; DURATION default 600
#     DURATION  seconds (600, 600s) or a number of runs (100000r)
#     JOBS      parallel fuzzing processes (default 1; libFuzzer's -fork=JOBS above 1, which
#               keeps going after a crash, timeout or OOM and collects every artifact)
#   bash scripts/fuzz.sh --ci [SECONDS]         the short seeded run of scripts/test.sh
#                                               (default 60 s, fixed -seed, fresh corpus);
#                                               fails on any crash, hang or sanitizer report
#
# Long runs keep their corpus in build-asan/fuzz-corpus/ (it grows from run to run; the
# seeds are specs/*.yaml and tests/errors/*.yaml), crash/timeout/OOM inputs in
# build-asan/fuzz-artifacts/ and the log in build-asan/fuzz-logs/. Reproduce an artifact:
#   build-asan/fuzz_spec build-asan/fuzz-artifacts/crash-...
# Shrink it: build-asan/fuzz_spec -minimize_crash=1 -runs=10000 build-asan/fuzz-artifacts/crash-...
# Prints the executions, exec/s, the corpus size and the coverage reached (cov: edges,
# ft: features) and ends with the line `fuzz: N runs, M crashes`.
# FUSEGEN_FUZZ_FORMAT=1 fuzzes with the real clang-format style (tests/fuzz/fuzz_spec.cpp:
# about 100x slower on specs that reach emission; the timeout is raised to 10 s).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
B=build-asan

ci=0
if [ "${1:-}" = "--ci" ]; then
  ci=1
  shift
  duration=${1:-60}
  jobs=1
else
  duration=${1:-600}
  jobs=${2:-1}
fi
case "$duration" in
  *r) limit=(-runs="${duration%r}") ;;
  *s) limit=(-max_total_time="${duration%s}") ;;
  *) limit=(-max_total_time="$duration") ;;
esac

if [ ! -f "$B/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFUSEGEN_SANITIZE=ON -DFUSEGEN_FUZZ=ON >/dev/null
fi
ninja -C "$B" -j "${FUSEGEN_JOBS:-2}" fuzz_spec >/dev/null

timeout_s=1 # a spec that takes more than a second is a hang (valid ones take ~50 ms)
[ "${FUSEGEN_FUZZ_FORMAT:-0}" = 1 ] && timeout_s=10
mkdir -p "$B/fuzz-artifacts" "$B/fuzz-logs"
if [ $ci = 1 ]; then
  corpus=$B/fuzz-ci-corpus # fresh each time: the CI run starts from the seeds only
  rm -rf "$corpus"
  artifacts=$B/fuzz-ci-artifacts
  rm -rf "$artifacts"
  log=$B/fuzz-logs/ci.log
  extra=(-seed=1)
else
  corpus=$B/fuzz-corpus
  artifacts=$B/fuzz-artifacts
  log=$B/fuzz-logs/fuzz-$(date +%Y%m%d-%H%M%S).log
  extra=()
  [ "$jobs" -gt 1 ] && extra=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi
mkdir -p "$corpus" "$artifacts"

# libFuzzer writes new inputs into the first corpus directory; the others are read-only seeds.
cmd=("$ROOT/$B/fuzz_spec" "${limit[@]}" "${extra[@]}" -timeout="$timeout_s" -max_len=4096
     -rss_limit_mb=2048 -dict="$ROOT/tests/fuzz/spec.dict" -artifact_prefix="$ROOT/$artifacts/"
     -print_final_stats=1 "$ROOT/$corpus" "$ROOT/specs" "$ROOT/tests/errors")
echo "fuzz: ${cmd[*]}"
echo "fuzz: log in $log"
start=$(date +%s)
set +e
if [ $ci = 1 ]; then
  (cd "$B/fuzz-logs" && "${cmd[@]}") >"$log" 2>&1
else
  # Progress lines as they come (libFuzzer doubles its status interval), the rest to the log.
  (cd "$B/fuzz-logs" && "${cmd[@]}") 2>&1 | tee "$log" | grep --line-buffered -aE "INITED|pulse|DONE|^#[0-9]+: cov|ERROR|SUMMARY|INFO: fuzzed|fuzz: "
  test "${PIPESTATUS[0]}" -eq 0
fi
rc=$?
set -e
elapsed=$(($(date +%s) - start))

# The numbers of the last status line: `#RUNS DONE cov: N ft: N corp: N/SIZE ... exec/s: N`,
# or with -fork `#RUNS: cov: N ft: N corp: N exec/s N ...`.
last=$(grep -aE '^#[0-9]+[:[:space:]].*cov: ' "$log" | tail -1 || true)
runs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")
cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<<"$last")
ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
corp=$(sed -nE 's/.*corp: ([0-9]+).*/\1/p' <<<"$last")
execs=$(sed -nE 's/.*exec\/s:? ([0-9]+).*/\1/p' <<<"$last")
# After a crash, the final stats (-print_final_stats) may be all there is.
[ -z "$runs" ] && runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
[ -z "$execs" ] && execs=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -1)
shopt -s nullglob
found=("$artifacts"/crash-* "$artifacts"/timeout-* "$artifacts"/oom-* "$artifacts"/leak-* "$artifacts"/slow-unit-*)
shopt -u nullglob
crashes=0
for f in "${found[@]}"; do [[ $(basename "$f") == slow-unit-* ]] || crashes=$((crashes + 1)); done

grep -aE "^(Done [0-9]+ runs|INFO: fuzzed for|INFO: exiting)" "$log" | tail -2 || true
echo "fuzz: ${runs:-0} runs in ${elapsed} s (${execs:-?} exec/s), corpus ${corp:-?} inputs, cov: ${cov:-?} edges, ft: ${ft:-?} features"
if [ $rc -ne 0 ] || [ $crashes -ne 0 ]; then
  if [ $ci = 1 ]; then
    echo "fuzz: the end of the log ($log):"
    tail -n 60 "$log"
  fi
  for f in "${found[@]}"; do echo "fuzz: artifact $f"; done
  echo "fuzz: ${runs:-0} runs, $crashes crash(es) (libFuzzer exit code $rc)"
  exit 1
fi
echo "fuzz: ${runs:-0} runs, 0 crashes"
