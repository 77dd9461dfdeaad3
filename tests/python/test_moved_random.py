"""Random draws read at moved columns (docs/spec-language.md, Randomness: moved draws): a move
of a value with dropout in it reads the dropout's stream at the moved elements, in the forward
(a roll and a pair swap of a dropped value, pushed to the leaves) and in the derived backward
(RoPE after dropout: its gradient moves the dropout's). Checked against PyTorch written here,
with the dropout's mask taken from the op's own output, so a draw at the wrong element fails
in float64 (and float32 at a row the GPU's row plan reads in vectors). Compiled with the CUDA
kernels where the CUDA toolkit is (their row plan's moved draws), run on the CPU, and on CUDA
where there is a GPU. Run by ctest (python.load)."""
import shutil

import pytest
import torch
from torch.utils.cpp_extension import CUDA_HOME

import fusegen

HAVE_NVCC = CUDA_HOME is not None and shutil.which("nvcc", path=f"{CUDA_HOME}/bin") is not None
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and HAVE_NVCC else [])
# (dtype, D, tolerance): odd rows element by element, and 128 columns in 16-byte vectors
CASES = [(torch.float64, 22, 1e-13), (torch.float32, 128, 2e-6)]

MOVED_FORWARD = """
op: moved_dropout
doc: a dropped value and its roll and pair swap (the forward draws at moved columns)
inputs: {x: [..., D]}
attrs:
  p: {type: float, default: 0.3}
  shift: {type: int, default: 3}
let:
  dropped: dropout(x, p)
outputs:
  d: dropped
  y: roll(dropped, shift) + swap_pairs(dropped) * 0.5
"""

ROPE_DROPOUT = """
op: rope_dropout
doc: dropout of rotary-embedded x (the backward draws at the exchanged columns)
inputs:
  x: [..., S, H, D]
  cos: [S, D]
  sin: [S, D]
attrs:
  p: {type: float, default: 0.3}
outputs:
  y: dropout(x * cos + rotate_half(x) * sin, p)
"""


def pair_swap(t):
    return t.reshape(*t.shape[:-1], -1, 2).flip(-1).reshape(t.shape)


def rotate_half(t):
    h = t.shape[-1] // 2
    return torch.cat([-t[..., h:], t[..., :h]], -1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,D,tol", CASES)
def test_forward_draws_at_moved_columns(device, dtype, D, tol):
    ops = fusegen.load_inline(MOVED_FORWARD, name="moved_dropout_ops", cpu_only=not HAVE_NVCC)
    x = torch.randn(6, 5, D, dtype=dtype, device=device, requires_grad=True)
    torch.manual_seed(1)
    d, y = ops.moved_dropout(x, p=0.3, shift=-5)
    keep = d.detach() != 0
    assert 0.5 < keep.double().mean().item() < 0.9  # about 1 - p kept
    torch.testing.assert_close(d, torch.where(keep, x / 0.7, 0.0), rtol=tol, atol=0)
    want = torch.roll(d.detach(), -5, -1) + pair_swap(d.detach()) * 0.5
    torch.testing.assert_close(y, want, rtol=tol, atol=tol)
    gd, gy = torch.randn_like(d), torch.randn_like(y)
    (gx,) = torch.autograd.grad([d, y], [x], [gd, gy])
    through = gd + torch.roll(gy, 5, -1) + pair_swap(gy) * 0.5
    torch.testing.assert_close(gx, torch.where(keep, through / 0.7, 0.0), rtol=tol, atol=tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,D,tol", CASES)
def test_backward_draws_at_exchanged_columns(device, dtype, D, tol):
    ops = fusegen.load_inline(ROPE_DROPOUT, name="rope_dropout_ops", cpu_only=not HAVE_NVCC)
    B, S, H = 2, 7, 3
    x = torch.randn(B, S, H, D, dtype=dtype, device=device, requires_grad=True)
    angle = torch.arange(S, dtype=dtype, device=device)[:, None] * torch.rand(
        D // 2, dtype=dtype, device=device)
    angle = torch.cat([angle, angle], -1)
    cos, sin = angle.cos(), angle.sin()
    torch.manual_seed(2)
    y = ops.rope_dropout(x, cos, sin, p=0.3)
    rot = x.detach() * cos[:, None] + rotate_half(x.detach()) * sin[:, None]
    keep = y.detach() != 0
    assert 0.5 < keep.double().mean().item() < 0.9
    torch.testing.assert_close(y, torch.where(keep, rot / 0.7, 0.0), rtol=tol, atol=tol)
    gy = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, gy)
    xr = x.detach().clone().requires_grad_(True)
    want_y = (xr * cos[:, None] + rotate_half(xr) * sin[:, None]) * keep / 0.7
    (want,) = torch.autograd.grad(want_y, xr, gy)
    torch.testing.assert_close(gx, want, rtol=tol, atol=tol)
