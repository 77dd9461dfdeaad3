#!/usr/bin/env bash
# The generated ops built against and tested under a second torch (issue #19: any torch from
# 2.9): a virtual environment in build-torch/ gets torch $FUSEGEN_OTHER_TORCH (default 2.9.1,
# the oldest supported) with pip, idempotently; ops covering every kind of spec (elementwise
# with a [D] input, a row reduction, named dims with a move, reductions over rows, random
# numbers, an integer target with the chunked plan) are generated, built (CPU) and installed
# there, and their generated tests run under that torch.
# Usage: tests/packaging/other_torch.sh FUSEGEN   (from the repository root)
set -euo pipefail
fusegen=$(realpath "$1")
version=${FUSEGEN_OTHER_TORCH:-2.9.1}
source "$(dirname "$0")/torch_venv.sh"
torch_venv "$version"
out=build-torch/ops-$version
rm -rf "$out"
"$fusegen" specs/{bias_gelu,rmsnorm,rope,batchnorm_train,bias_dropout_add,cross_entropy}.yaml -o "$out" >/dev/null
"$fusegen" -o "$out" --build --install --cpu-only --python "$venv/bin/python" -j "${FUSEGEN_JOBS:-2}" | tail -1
cd /tmp  # the installed package
"$OLDPWD/$venv/bin/python" -m pytest --pyargs fusegen_ops -q -p no:cacheprovider -W ignore::DeprecationWarning |
  tail -1
