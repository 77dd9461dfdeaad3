#!/usr/bin/env bash
# One wheel under two torch versions (issue #19, the LibTorch stable ABI): ops covering every
# kind of non-random spec (a row reduction, named dims with a move, reductions over rows, an
# integer target with the chunked plan, an FP8 output) are built into a wheel (CPU) under torch
# $FUSEGEN_STABLE_TORCH (default 2.10.0, the first with a stable operator ABI; a virtual
# environment in build-torch/ gets it with pip, idempotently); the wheel must be a stable ABI
# build whose library references none of torch's C++ symbols (only the stable C shim's), and it
# is installed, unchanged, into a virtual environment over this machine's torch (a later one)
# where the ops' generated tests and the package's tests run.
# Usage: tests/packaging/stable_abi.sh FUSEGEN   (from the repository root)
set -euo pipefail
fusegen=$(realpath "$1")
version=${FUSEGEN_STABLE_TORCH:-2.10.0}
source "$(dirname "$0")/torch_venv.sh"
torch_venv "$version"
later=$(python3 -c "import torch; print(torch.__version__)")
if [ "$(python3 -c "import torch; print(torch.__version__.split('+')[0])")" = "$version" ]; then
  echo "stable_abi: this machine's torch is $later, not later than $version: nothing to check" >&2
  exit 1
fi
out=build-torch/ops-stable-$version
rm -rf "$out"
"$fusegen" specs/{rmsnorm,rope,batchnorm_train,cross_entropy,bias_gelu_fp8}.yaml -o "$out" >/dev/null
"$fusegen" -o "$out" --build --wheel --cpu-only --python "$venv/bin/python" -j "${FUSEGEN_JOBS:-2}" \
  >"$out/build.log" || { cat "$out/build.log"; exit 1; }
grep -q ", stable ABI)" "$out/build.log" || {
  cat "$out/build.log"
  echo "stable_abi: the build under torch $version was not a stable ABI build" >&2
  exit 1
}
wheel=$(ls "$out"/dist/*.whl)
# The library's undefined symbols: torch's only through the stable C shim (aoti_torch_*,
# torch_*), no C++ symbol of c10, ATen or torch (which tie a library to one torch build).
if nm -D --undefined-only "$out"/build/ninja/_C.abi3.so | c++filt | grep -E ' (c10|at|torch|caffe2)::'; then
  echo "stable_abi: the library references torch's C++ symbols (above)" >&2
  exit 1
fi
# Installed, unchanged, over the later torch (a venv that sees this machine's packages).
runner=build-torch/venv-later
if [ ! -x "$runner/bin/python" ]; then python3 -m venv --system-site-packages "$runner"; fi
"$runner/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-index --force-reinstall "$wheel"
cd /tmp # the installed package
"$OLDPWD/$runner/bin/python" -c "
import fusegen_ops._build_info as b, torch
assert b.STABLE_ABI and b.TORCH_VERSION.startswith('$version'), (b.STABLE_ABI, b.TORCH_VERSION)
print(f'stable_abi: built under torch {b.TORCH_VERSION}, testing under torch {torch.__version__}')"
"$OLDPWD/$runner/bin/python" -m pytest --pyargs fusegen_ops -q -p no:cacheprovider -W ignore::DeprecationWarning |
  tail -1
