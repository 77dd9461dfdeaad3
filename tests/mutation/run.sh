#!/usr/bin/env bash
# Planted bugs that the generated tests must catch, so that their tolerances (the error model
# in templates/package/testing.py) are shown to be tight enough, not only loose enough.
#
# Each mutant is a copy of templates/ with one deliberate defect: a derivative rule off by a
# small factor, or a CPU kernel reading one element past the row end. fusegen generates the
# shipped specs the defect reaches from that copy (--templates), builds them for the CPU and
# runs their generated tests, which must fail; the script prints the tests that caught it.
# The unmutated templates are built and tested first: those tests must pass (otherwise a
# failure would prove nothing).
#
# Usage: tests/mutation/run.sh [FUSEGEN]   (default: build/fusegen; FUSEGEN_JOBS=2 compile
# jobs). Exit status 0 when every mutant is caught and the baseline passes. Not part of CI:
# 4 to 7 minutes on 2 cores (five CPU builds of one op or three, then their tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
fusegen=$(realpath "${1:-$root/build/fusegen}")
jobs=${FUSEGEN_JOBS:-2}
work=$(mktemp -d "${TMPDIR:-/tmp}/fusegen-mutation.XXXXXX")
trap 'rm -rf "$work"' EXIT

# mutate NAME FILE OLD NEW: a copy of templates/ in $work/NAME/templates with the one
# occurrence of OLD in FILE replaced by NEW (an error when OLD is not there exactly once).
mutate() {
  local dir=$work/$1/templates
  mkdir -p "$work/$1" && cp -r "$root/templates" "$dir"
  python3 - "$dir/$2" "$3" "$4" <<'PY'
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"mutation.sh: {path}: the text to mutate occurs {text.count(old)} times: {old!r}")
open(path, "w").write(text.replace(old, new))
PY
}

# check NAME EXPECT SPECS...: generate, build and test SPECS with $work/NAME/templates;
# EXPECT is pass (the baseline) or fail (a mutant). Prints the failed tests.
status=0
check() {
  local name=$1 expect=$2 t0=$SECONDS
  shift 2
  local dir=$work/$name specs=() ops=()
  for s in "$@"; do specs+=("$root/specs/$s.yaml"); ops+=("fusegen_ops.$s"); done
  "$fusegen" --templates "$dir/templates" -o "$dir/pkg" "${specs[@]}" >/dev/null
  if ! "$fusegen" --build -o "$dir/pkg" --cpu-only -j "$jobs" >"$dir/build.log" 2>&1; then
    echo "$name: the build failed (see below)"; tail -20 "$dir/build.log"; status=1; return
  fi
  # The package imports its ops as fusegen_ops.<op>: a folder of links, as an install has.
  mkdir -p "$dir/run/fusegen_ops"
  ln -s "$dir"/pkg/fusegen_ops/* "$dir/run/fusegen_ops/"
  for s in "$@"; do ln -s "$dir/pkg/$s" "$dir/run/fusegen_ops/$s"; done
  (cd "$dir" && PYTHONPATH="$dir/run" python3 -m pytest --pyargs "${ops[@]}" -q -rf \
     -p no:cacheprovider -W ignore::DeprecationWarning >"$dir/pytest.log" 2>&1) || true
  local summary failed
  summary=$(tail -1 "$dir/pytest.log")
  failed=$(grep '^FAILED' "$dir/pytest.log" | sed -e 's/^FAILED [^:]*::/    /' -e 's/ - .*//' || true)
  echo "== $name ($((SECONDS - t0)) s): $summary"
  [ -n "$failed" ] && echo "$failed"
  if [ "$expect" = pass ] && [ -n "$failed" ]; then echo "   UNEXPECTED: the baseline fails"; status=1; fi
  if [ "$expect" = fail ] && [ -z "$failed" ]; then echo "   NOT CAUGHT: every test passed"; status=1; fi
  if ! grep -qE '[0-9]+ (passed|failed)' <<<"$summary"; then echo "   no tests ran"; status=1; fi
}

mkdir -p "$work/baseline" && cp -r "$root/templates" "$work/baseline/templates"
check baseline pass sigmoid rmsnorm bias_gelu

# Derivative rules off by a small factor (the unit tests' finite differences catch these as
# well; here the generated tests must).
mutate sigmoid_grad primitives.yaml \
  'grad: {x: grad * result * (1 - result)}   # s'"'"' = s (1 - s)' \
  'grad: {x: 1.001 * grad * result * (1 - result)}'
check sigmoid_grad fail sigmoid

mutate rsqrt_grad primitives.yaml \
  'grad: {x: -0.5 * grad * result * result * result}' \
  'grad: {x: -0.5001 * grad * result * result * result}'
check rsqrt_grad fail rmsnorm

# Off by one in the CPU kernels: the last column of each row reads the next row's first
# element (every row but the last, which would read past the tensor).
mutate row_plan_reads_past_row_end runtime/fusegen_cpu.h \
  'in[k] = toCompute(static_cast<const S*>(a.in[k])[row * a.D + c]);' \
  'in[k] = toCompute(static_cast<const S*>(a.in[k])[row * a.D + c + (c == a.D - 1 && row + 1 < a.rows)]);'
check row_plan_reads_past_row_end fail rmsnorm

mutate pointwise_plan_reads_past_row_end runtime/fusegen_cpu.h \
  '            in[k] = toCompute(static_cast<const S*>(a.in[k])[i]);
        Op::template forward' \
  '            in[k] = toCompute(static_cast<const S*>(a.in[k])[i + (c == D - 1 && r + 1 < a.rows)]);
        Op::template forward'
check pointwise_plan_reads_past_row_end fail bias_gelu

[ $status = 0 ] && echo "mutation: every planted bug was caught" || echo "mutation: FAILED"
exit $status
