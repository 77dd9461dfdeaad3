#!/usr/bin/env bash
# A failed build names the generated file and line of the first compile error and the spec
# that made it, shows the end of the compiler's output and exits non-zero. Plants a syntax
# error in a freshly generated op's CPU kernel and builds it (CPU only, so no CUDA needed).
# Usage: check_build_failure.sh FUSEGEN   (run from the repository root; needs torch)
set -uo pipefail
FUSEGEN=$1
python3 -c "import torch" 2>/dev/null || { echo "torch is not installed"; exit 77; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$FUSEGEN" specs/sigmoid.yaml -o "$WORK/pkg" >/dev/null || exit 1
source="$WORK/pkg/sigmoid/sigmoid_cpu.cpp"
line=$(($(wc -l <"$source") + 1))
echo "this is not C++" >>"$source"
"$FUSEGEN" -o "$WORK/pkg" --build --cpu-only -j 2 >"$WORK/out" 2>&1
status=$?
cat "$WORK/out"
fail() { echo "check_build_failure.sh: $1" >&2; exit 1; }
[ "$status" -ne 0 ] || fail "the build succeeded"
grep -q "fusegen: error: the build failed after" "$WORK/out" || fail "no failure line"
grep -q "  | .*this is not C++" "$WORK/out" || fail "the compiler's output is not shown"
grep -qF "fusegen: the first compile error is in $WORK/pkg/sigmoid/sigmoid_cpu.cpp:$line (generated from specs/sigmoid.yaml)" "$WORK/out" ||
  fail "the first error's file, line $line and spec are not named"
grep -q "fusegen: full log: $WORK/pkg/build/fusegen-build.log" "$WORK/out" || fail "no log path"
echo "check_build_failure.sh: passed"
