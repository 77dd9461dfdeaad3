"""int8 and uint8 inputs: quantized values dequantized in a formula, a uint8 attention mask, int8
per-row offsets. Their sums and differences are exact, not wrapped in the input's type as
torch's own int8 and uint8 arithmetic would wrap them (uint8 3 - 128 is 131 in torch): the
kernels compute integers in the compute type, and the generated references widen such inputs
to int64. Each op runs its generated checks and is held against PyTorch written here in
float64, on values at the types' ends (-128, 127, 255). Where the CUDA toolkit is, the package
is built with its kernels too (compiled, run on the CPU here). Run by ctest (python.load)."""
import importlib
import shutil

import pytest
import torch
from torch.utils.cpp_extension import CUDA_HOME


SPECS = {
    "int8_dequant_add": """
op: int8_dequant_add
doc: x plus int8 values dequantized per column about a uint8 zero point
inputs:
  x: [..., D]
  q: {shape: [..., D], dtype: int8}
  zero: {shape: [D], dtype: uint8}
  scale: [D]
outputs:
  y: x + (q - zero) * scale
""",
    "uint8_mask_softmax": """
op: uint8_mask_softmax
doc: softmax of the scores where a uint8 [S, D] mask is nonzero, as some checkpoints store it
inputs:
  x: [..., S, D]
  mask: {shape: [S, D], dtype: uint8}
let:
  z: where(mask == 0, -inf, x)
  m: detach(max(z))
  e: exp(z - m)
outputs:
  y: e / sum(e)
""",
    "int8_row_offset": """
op: int8_row_offset
doc: x times the difference of two int8 offsets per row, plus its square
inputs:
  x: [..., D]
  a: {shape: [...], dtype: int8}
  b: {shape: [...], dtype: int8}
outputs:
  y: x * (a - b) + (a - b) * (a - b)
""",
}

HAS_NVCC = CUDA_HOME is not None and shutil.which("nvcc", path=f"{CUDA_HOME}/bin") is not None


@pytest.fixture(scope="module")
def package(load_specs):
    return load_specs(SPECS, "small_integer_ops", cpu_only=not HAS_NVCC)


def op_of(package, name):
    return getattr(importlib.import_module(f"{package}.{name}"), name)


@pytest.mark.parametrize("name", list(SPECS))
def test_generated_checks(package, name):
    c = importlib.import_module(f"{package}.{name}.test_{name}").CHECKS
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        c.forward_matches_reference("cpu", dtype)
        c.backward_matches_reference("cpu", dtype)
    c.wrong_arguments("cpu")


def test_dequantized_values_are_exact_at_the_types_ends(package):
    f = op_of(package, "int8_dequant_add")
    q = torch.tensor([[-128, 127, 0, -1], [127, -128, 5, 3]], dtype=torch.int8)
    zero = torch.tensor([255, 0, 128, 3], dtype=torch.uint8)
    scale = torch.tensor([0.5, 0.25, 2.0, -1.0], dtype=torch.float64, requires_grad=True)
    x = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    got = f(x, q, zero, scale)
    want = x + (q.double() - zero.double()) * scale  # -128 - 255 = -383: no wrap
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    g = torch.randn_like(got)
    torch.testing.assert_close(torch.autograd.grad(got, (x, scale), g),
                               torch.autograd.grad(want, (x, scale), g), rtol=1e-15, atol=0)
    with pytest.raises(RuntimeError, match=r"argument 'q' has dtype uint8, but must have dtype int8"):
        f(x, q.to(torch.uint8), zero, scale)


def test_a_uint8_mask_hides_the_keys_it_zeroes(package):
    f = op_of(package, "uint8_mask_softmax")
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64, requires_grad=True)  # [B, H, S, D]
    mask = torch.randint(0, 256, (5, 8), dtype=torch.uint8)
    mask[:, 0] = 255  # every query sees a key
    mask[1, 1:] = 0
    got = f(x, mask)
    want = torch.softmax(x.masked_fill(mask == 0, float("-inf")), -1)
    torch.testing.assert_close(got, want, rtol=1e-14, atol=0)
    assert (got[..., 1, 1:] == 0).all()
    g = torch.randn_like(got)
    torch.testing.assert_close(torch.autograd.grad(got, x, g), torch.autograd.grad(want, x, g),
                               rtol=1e-12, atol=1e-14)


def test_int8_differences_per_row_do_not_wrap(package):
    f = op_of(package, "int8_row_offset")
    a = torch.tensor([127, -128, 3], dtype=torch.int8)
    b = torch.tensor([-128, 127, 3], dtype=torch.int8)
    x = torch.randn(3, 6, dtype=torch.float64)
    d = (a.double() - b.double()).unsqueeze(-1)  # 255, -255, 0
    torch.testing.assert_close(f(x, a, b), x * d + d * d, rtol=0, atol=0)
