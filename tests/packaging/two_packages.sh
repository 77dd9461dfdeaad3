#!/usr/bin/env bash
# Two fusegen-made packages installed side by side (issue #19): team_a_ops (torch.ops.team_a)
# and team_b_ops (torch.ops.team_b) both hold an op named bias_gelu. Each is generated with
# --package/--namespace, built as a wheel (CPU only) and installed into one site directory;
# one process imports both, calls both ops (eager, autograd, torch.compile), finds both
# DTensor rules, and runs both packages' generated tests. Also: a package's directory keeps
# its names (a later run without the flags adds an op to it; a run with other names is
# refused and changes nothing), and a built directory imports without installing.
# Usage: two_packages.sh FUSEGEN   (from the repository root; needs torch, else skipped)
set -uo pipefail
fusegen=$(realpath "$1")
root=$PWD
python3 -c "import torch" 2>/dev/null || { echo "torch is not installed"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: two_packages.sh: $*"; exit 1; }
run() { "$@" >"$dir/log" 2>&1 || { tail -30 "$dir/log"; fail "$*"; }; }
export FUSEGEN_TEMPLATES="$root/templates"

run "$fusegen" specs/bias_gelu.yaml -o "$dir/a" --package team_a_ops --namespace team_a
run "$fusegen" specs/rmsnorm.yaml -o "$dir/a"  # the names recorded in $dir/a
grep -q "^package: team_a_ops$" "$dir/a/fusegen-package.yaml" || fail "the names are not recorded"
[ -f "$dir/a/rmsnorm/__init__.py" ] && grep -q "torch.ops.team_a.rmsnorm" "$dir/a/rmsnorm/__init__.py" ||
  fail "the second run did not generate rmsnorm into team_a_ops"
run "$fusegen" specs/bias_gelu.yaml -o "$dir/b" --package team_b_ops --namespace team_b
before=$(cd "$dir/a" && find . -type f | sort | xargs md5sum)
"$fusegen" specs/mul.yaml -o "$dir/a" --package other_ops >"$dir/log" 2>&1 &&
  fail "regenerating team_a_ops as other_ops succeeded"
grep -q "fusegen: error: $dir/a holds the package 'team_a_ops' (torch.ops.team_a)" "$dir/log" ||
  fail "no error naming the recorded package: $(cat "$dir/log")"
[ "$before" = "$(cd "$dir/a" && find . -type f | sort | xargs md5sum)" ] || fail "the refused run changed $dir/a"

for p in a b; do
  run "$fusegen" -o "$dir/$p" --build --wheel --cpu-only -j "${FUSEGEN_JOBS:-2}"
  run python3 -m pip install -q --no-deps --no-index --target "$dir/site" "$dir/$p"/dist/*.whl
done
ls "$dir/site" | grep -q "^team_a_ops$" && ls "$dir/site" | grep -q "^team_b_ops$" ||
  fail "the wheels did not install both packages: $(ls "$dir/site")"

cd "$dir"
cat >check.py <<'PY'
import sys

import torch
import team_a_ops
import team_b_ops
from torch.distributed.tensor import DTensor

assert team_a_ops.__file__.startswith(sys.argv[1]), team_a_ops.__file__
x = torch.randn(4, 6, 8, dtype=torch.float64, requires_grad=True)
bias = torch.randn(8, dtype=torch.float64)
want = torch.nn.functional.gelu(x + bias, approximate="tanh")
(want_grad,) = torch.autograd.grad(want.sum(), x, retain_graph=True)
for pkg, ns in ((team_a_ops, "team_a"), (team_b_ops, "team_b")):
    op = getattr(torch.ops, ns).bias_gelu
    assert str(op.default._schema).startswith(f"{ns}::bias_gelu("), op.default._schema
    y = pkg.bias_gelu(x, bias)
    torch.testing.assert_close(y, want, rtol=1e-12, atol=1e-12)
    (g,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(g, want_grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(torch.compile(pkg.bias_gelu, backend="aot_eager")(x, bias), want,
                               rtol=1e-12, atol=1e-12)
assert hasattr(team_a_ops, "rmsnorm") and not hasattr(team_b_ops, "rmsnorm")
rules = {str(k) for k in DTensor._op_dispatcher.sharding_propagator.op_strategy_funcs}
for name in ("team_a.bias_gelu.default", "team_a.bias_gelu_backward.default",
             "team_a.rmsnorm.default", "team_b.bias_gelu.default"):
    assert name in rules, (name, sorted(r for r in rules if "team" in r))
print("both packages work side by side")
PY
PYTHONPATH="$dir/site" python3 check.py "$dir/site" || fail "the two installed packages"
PYTHONPATH="$dir/a" python3 -c "import team_a_ops, sys; assert team_a_ops.bias_gelu.__module__ == 'team_a_ops.bias_gelu'" ||
  fail "the built directory does not import without installing"
PYTHONPATH="$dir/site" python3 -m pytest --pyargs team_a_ops.bias_gelu team_b_ops.bias_gelu \
  team_a_ops.test_package team_b_ops.test_package -q -x -p no:cacheprovider -W ignore::DeprecationWarning \
  >"$dir/log" 2>&1 || { tail -40 "$dir/log"; fail "the generated tests of the two packages"; }
tail -1 "$dir/log"
echo "PASS: two fusegen packages side by side"
