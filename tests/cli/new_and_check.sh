#!/usr/bin/env bash
# `fusegen new` and `fusegen check` as a new user meets them: the starter spec is written,
# passes check, is not written over; a bad name is refused with the located error and writes
# nothing; check reports a bad spec's error and exits 1, writing nothing.
# Usage: tests/cli/new_and_check.sh FUSEGEN   (from the repository root)
set -uo pipefail
fusegen=$(realpath "$1")
root=$PWD
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$dir"
out=$("$fusegen" new my_op --templates "$root/templates" 2>&1) || fail "new my_op: $out"
[ -f my_op.yaml ] || fail "new my_op wrote no my_op.yaml"
grep -q "^op: my_op$" my_op.yaml || fail "my_op.yaml does not name the op"
out=$("$fusegen" check my_op.yaml --templates "$root/templates" 2>&1) || fail "check of the starter: $out"
[ -z "$(ls -A | grep -v '^my_op.yaml$')" ] || fail "check wrote files: $(ls -A)"
before=$(cat my_op.yaml)
"$fusegen" new my_op --templates "$root/templates" > /dev/null 2>&1 && fail "new over an existing file succeeded"
[ "$(cat my_op.yaml)" = "$before" ] || fail "new changed an existing file"
out=$("$fusegen" new 9bad --templates "$root/templates" 2>&1) && fail "new 9bad succeeded"
echo "$out" | grep -q "9bad.yaml:[0-9]*:[0-9]*: error: op name '9bad' must be an identifier" ||
  fail "new 9bad: no located error: $out"
[ ! -e 9bad.yaml ] || fail "new 9bad wrote 9bad.yaml"
out=$(cd "$root" && "$fusegen" check tests/errors/colsum_of_col.yaml 2>&1) && fail "check of a bad spec exited 0"
echo "$out" | grep -q "colsum_of_col.yaml:8:19: error:" || fail "check: no located error: $out"
echo "PASS: fusegen new and check"
