"""Ops whose only [..., D] input holds integers or bools, their dtype given by a float input of
another shape: int8 activations with a per-token scale (`q: {shape: [..., D], dtype: int8}`,
`scale: [...]`), with a per-tensor one (`s: []`, the flat plan), a bool mask filled with a
per-row value. fusegen refused them ("needs at least one float input of shape [..., D]"). The
outputs take the shape of the integer input and the dtype of the float one. Lifting the refusal
first left the generated Python taking the op's dtype from the integer input in two places: the
reference converted the integers to float32 (float64 checks failed at float32's rounding) and the
second derivatives cast their cotangents to int8 or bool (all zero or one). The generated checks
run on the CPU here; test_cuda_compiles.py compiles such an op's kernels where nvcc is.
Then int8 keys of a KV cache rotated by tables of their positions (`kq: [..., S, H, D]` int8,
`cos: [S, D]`): the kernels took the shape of the outputs from cos, which has all of the
integer input's columns but not its leading dims, and refused every call."""
import importlib

import pytest
import torch

SPECS = {
    "dequant_rmsnorm": """
op: dequant_rmsnorm
inputs:
  q: {shape: [..., D], dtype: int8}
  scale: {shape: [...], range: [0.001, 0.1]}
  weight: [D]
attrs:
  eps: {type: float, default: 1.0e-6}
let:
  x: q * scale
outputs:
  y: x * rsqrt(mean(x * x) + eps) * weight
reference:
  y: "(lambda x: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * weight)(q.to(scale.dtype) * scale[..., None])"
""",
    "dequant_silu": """
op: dequant_silu
inputs:
  q: {shape: [..., D], dtype: int8}
  s: {shape: [], range: [0.01, 0.1]}
outputs:
  y: silu(q * s)
reference:
  y: "F.silu(q.to(s.dtype) * s)"
""",
    "int8_kv_rope": """
op: int8_kv_rope
inputs:
  kq: {shape: [..., S, H, D], dtype: int8}
  scale: {shape: [..., S, H], range: [0.01, 0.1]}
  cos: [S, D]
  sin: [S, D]
let:
  k: kq * scale
outputs:
  y: k * cos + rotate_pairs(k) * sin
reference:
  y: "(lambda k: k * cos[:, None, :] + torch.stack([-k[..., 1::2], k[..., ::2]], -1).flatten(-2) * sin[:, None, :])(kq.to(scale.dtype) * scale[..., None])"
""",
    "mask_fill": """
op: mask_fill
inputs:
  mask: {shape: [..., D], dtype: bool}
  value: [...]
outputs:
  y: where(mask, value, 0)
""",
}


@pytest.fixture(scope="module")
def package(load_specs):
    return load_specs(SPECS, "integer_full_ops")


def checks(package, op):
    return importlib.import_module(f"{package}.{op}.test_{op}").CHECKS


@pytest.mark.parametrize("op", list(SPECS))
def test_the_generated_checks_pass(package, op):
    c = checks(package, op)
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        c.forward_matches_reference("cpu", dtype)
        c.backward_matches_reference("cpu", dtype)
    if "reference:" in SPECS[op]:
        c.forward_matches_independent("cpu", torch.float32)
    c.gradcheck("cpu")
    c.gradgradcheck("cpu")
    c.second_derivatives_match_reference("cpu", "all")
    c.wrong_arguments("cpu")
    c.opcheck("cpu")
    c.empty("cpu")
    c.several_tensors("cpu")


def test_the_outputs_take_the_integer_inputs_shape_and_the_float_inputs_dtype(package):
    ops = importlib.import_module(package)
    q = torch.randint(-128, 128, (3, 4, 16), dtype=torch.int8)
    scale = torch.rand(3, 4, dtype=torch.bfloat16) / 10
    y = ops.dequant_rmsnorm(q, scale, torch.ones(16, dtype=torch.bfloat16))
    assert y.shape == q.shape and y.dtype == torch.bfloat16
    x = q.double() * scale.double()[..., None]
    torch.testing.assert_close(y.double(), x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6),
                               rtol=2e-2, atol=0)
    with pytest.raises(RuntimeError, match=r"argument 'weight' has dtype float32, but 'scale' has "
                                           r"dtype bfloat16; all tensor arguments must have the "
                                           r"same dtype"):
        ops.dequant_rmsnorm(q, scale, torch.ones(16))
    s = torch.tensor(0.05, dtype=torch.float64)
    y = ops.dequant_silu(q, s)
    assert y.shape == q.shape and y.dtype == torch.float64
    torch.testing.assert_close(y, torch.nn.functional.silu(q.double() * 0.05), rtol=1e-15,
                               atol=1e-15)
