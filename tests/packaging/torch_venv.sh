# Sourced by the packaging tests that build under another torch (other_torch.sh, stable_abi.sh):
# torch_venv VERSION makes build-torch/venv-VERSION hold torch VERSION and what the generated
# ops' build and tests need, idempotently (pip only when the venv lacks it), and sets $venv.
torch_venv() {
  venv=build-torch/venv-$1
  if ! "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$1'); import wheel" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "torch==$1" pytest numpy ninja expecttest wheel setuptools
  fi
}
