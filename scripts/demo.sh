#!/usr/bin/env bash
# The main job, from a fresh machine: install the dependencies, build fusegen, generate the
# bias_gelu op from specs/bias_gelu.yaml, build and install it into the active Python, and
# call it on a tensor (on the GPU too, when there is one).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build_fusegen.sh
./build/fusegen specs/bias_gelu.yaml -o build/demo
./build/fusegen --build --install -o build/demo -j "${FUSEGEN_JOBS:-2}"
cd /tmp  # import the installed package, not a source folder
python3 - <<'PY'
import torch
import torch.nn.functional as F
import fusegen_ops

x, bias = torch.randn(4, 8), torch.randn(8)
y = fusegen_ops.bias_gelu(x, bias)
print("torch.ops.fusegen.bias_gelu(x, bias) =")
print(torch.ops.fusegen.bias_gelu(x, bias))
err = (y - F.gelu(x + bias, approximate="tanh")).abs().max().item()
print(f"max |fusegen - F.gelu(x + bias, approximate='tanh')| = {err:.2e}")
if torch.cuda.is_available():
    yc = fusegen_ops.bias_gelu(x.cuda(), bias.cuda())
    print(f"on {torch.cuda.get_device_name()}: max |cuda - cpu| = {(yc.cpu() - y).abs().max().item():.2e}")
PY
