#!/usr/bin/env bash
# The fusegen wheel as a user meets it (issue #19): installed with pip into a fresh virtual
# environment (which sees the system's torch: --system-site-packages), away from the source
# tree, it runs the main job (generate bias_gelu, build and install it, call it) through the
# `fusegen` command, then `python -m fusegen check` and fusegen.load, all from the wheel (its
# executable finds its own templates); then the golden check and the error catalog with it.
# Usage: tests/packaging/wheel.sh WHEEL   (needs torch, else skipped)
set -uo pipefail
wheel=$(realpath "$1")
root=$PWD
python3 -c "import torch" 2>/dev/null || { echo "torch is not installed"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: wheel.sh: $*"; exit 1; }
run() { "$@" >"$dir/log" 2>&1 || { tail -30 "$dir/log"; fail "$*"; }; }
run python3 -m venv --system-site-packages "$dir/venv"
source "$dir/venv/bin/activate"
run python -m pip install -q --no-deps --no-index "$wheel"
unset FUSEGEN FUSEGEN_TEMPLATES
export FUSEGEN_CACHE_DIR="$dir/cache"
cp "$root/specs/bias_gelu.yaml" "$dir/"
cd "$dir"
[ "$(command -v fusegen)" = "$dir/venv/bin/fusegen" ] || fail "fusegen is not the wheel's: $(command -v fusegen)"
run fusegen bias_gelu.yaml -o pkg --package wheel_ops --namespace wheel_ops
run fusegen --build --install -o pkg --cpu-only -j "${FUSEGEN_JOBS:-2}"
python - <<'PY' || fail "the op built and installed by the wheel's fusegen"
import os, torch, wheel_ops
assert wheel_ops.__file__.startswith(os.environ["VIRTUAL_ENV"]), wheel_ops.__file__
x, bias = torch.randn(4, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
torch.testing.assert_close(wheel_ops.bias_gelu(x, bias),
                           torch.nn.functional.gelu(x + bias, approximate="tanh"), rtol=1e-12, atol=1e-12)
PY
out=$(python -m fusegen check bias_gelu.yaml 2>&1) || fail "python -m fusegen check: $out"
sed 's/gelu_tanh(x + bias)/gelu_tanh(x + biass)/' bias_gelu.yaml >bad.yaml
out=$(fusegen check bad.yaml 2>&1) && fail "check of a bad spec succeeded"
echo "$out" | grep -q "^bad.yaml:[0-9]*:[0-9]*: error: unknown name 'biass'" || fail "no located error: $out"
python - <<'PY' || fail "fusegen.load from the wheel"
import fusegen, torch
ops = fusegen.load("bias_gelu.yaml", name="loaded_ops", cpu_only=True)
assert fusegen.binary().startswith(fusegen.__path__[0]), fusegen.binary()
x, bias = torch.randn(4, 8), torch.randn(8)
torch.testing.assert_close(ops.bias_gelu(x, bias), torch.nn.functional.gelu(x + bias, approximate="tanh"))
PY
# The wheel's fusegen (linked with another LLVM than build/'s, in CI) formats the generated
# C++ as the committed files are and reports every catalogued error alike.
binary=$(python -c "import fusegen; print(fusegen.binary())")
(cd "$root" && "$binary" golden --specs specs -o generated) >"$dir/log" 2>&1 || { tail -5 "$dir/log"; fail "golden from the wheel"; }
tail -1 "$dir/log"
(cd "$root" && python3 tests/errors/check_errors.py "$binary") >"$dir/log" 2>&1 || { grep -A5 FAIL "$dir/log" | head -30; fail "the error catalog from the wheel"; }
tail -1 "$dir/log"
echo "PASS: the fusegen wheel ($(basename "$wheel")) in a fresh virtual environment"
