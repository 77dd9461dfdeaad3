"""Specs a newcomer writes, compiled with their CUDA kernels wherever the CUDA toolkit is (CI has
nvcc and no GPU: the shipped specs' kernels compile there, but a program shape none of them has
is compiled nowhere else). The first random batch of difffuzz on a GPU found one: a program
reading the column index j without [D] inputs, where(j >= 3, x, -1), did not compile (the
colwise launcher instantiated the flat kernel, which refuses j). The ops then run on the CPU
against their formulas. Run by ctest (python.load) with FUSEGEN, FUSEGEN_TEMPLATES and
PYTHONPATH set (conftest.py)."""
import shutil

import pytest
import torch
from torch.utils.cpp_extension import CUDA_HOME

import fusegen

COLUMN_ONLY = """
op: column_only
doc: x where the column index is at least 3, else -1 (j read with no [D] input)
inputs: {x: [..., D]}
outputs:
  y: where(j >= 3, x, -1) * x
"""

MOVED_COLUMN = """
op: moved_column
doc: the column index moved (the other half's) in a condition
inputs: {x: [..., D]}
outputs:
  y: where(swap_halves(j) >= 3, x, -1)
"""

DEQUANT_RMSNORM = """
op: dequant_rmsnorm
doc: int8 values times a per-row float scale, RMS-normalized (no float [..., D] input)
inputs:
  q: {shape: [..., D], dtype: int8}
  scale: [...]
outputs:
  y: q * scale * rsqrt(mean(q * scale * q * scale) + 1e-6)
"""


NO_NVCC = pytest.mark.skipif(
    CUDA_HOME is None or shutil.which("nvcc", path=f"{CUDA_HOME}/bin") is None,
    reason="no CUDA toolkit: nothing to compile the kernels with")


@NO_NVCC
@pytest.mark.parametrize("name,spec", [("column_only", COLUMN_ONLY), ("moved_column", MOVED_COLUMN)])
def test_compiles_for_cuda_and_runs(name, spec):
    ops = fusegen.load_inline(spec, name=f"cuda_{name}", cpu_only=False)
    x = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
    j = torch.arange(8, dtype=torch.float64)
    if name == "column_only":
        want = torch.where(j >= 3, x, torch.tensor(-1.0, dtype=torch.float64)) * x
    else:
        moved = torch.cat([j[4:], j[:4]])
        want = torch.where(moved >= 3, x, torch.tensor(-1.0, dtype=torch.float64))
    got = getattr(ops, name)(x)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    (g,) = torch.autograd.grad(got.sum(), x)
    (w,) = torch.autograd.grad(want.sum(), x)
    torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


@NO_NVCC
def test_an_op_without_float_full_inputs_compiles_for_cuda_and_runs():
    # (the plans' programs read the one [..., D] input in its own type, int8)
    ops = fusegen.load_inline(DEQUANT_RMSNORM, name="cuda_dequant_rmsnorm", cpu_only=False)
    q = torch.randint(-128, 128, (5, 8), dtype=torch.int8)
    scale = torch.rand(5, dtype=torch.float64, requires_grad=True)
    got = ops.dequant_rmsnorm(q, scale)
    x = q.double() * scale[:, None]
    want = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)
    assert got.dtype == torch.float64 and got.shape == q.shape
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    (g,) = torch.autograd.grad(got.sum(), scale)
    (w,) = torch.autograd.grad(want.sum(), scale)
    torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-12)
