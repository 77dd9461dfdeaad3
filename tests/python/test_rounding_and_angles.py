"""Fusions that need sin, cos, rounding, sign and clamp (templates/primitives.yaml), written as
a user would: RoPE with its angles computed in the kernel from the position along S and a
per-column frequency (no cos/sin tables in memory, the frequencies' gradient derived through
sin and cos), int8 fake quantization with a per-row absmax scale and a straight-through
gradient, int8 quantization to outputs of integer types (rounded, saturated, NaN as 0) and a
dropout returning its keep mask as a bool tensor, stochastic rounding to a grid (floor of x plus a uniform draw), and hardswish and
ReLU6 through clamp (torch.clamp's gradient at the bounds). Each checked against PyTorch written
here in float64, forward and gradients, and float32 within a few roundoffs; then the generated
tests' checks of each op (fusegen_ops.testing: every dtype against the reference within the
error model's bounds, which now bounds sin, cos and the roundings; gradients, second
derivatives, opcheck). Compiled with the CUDA kernels where the CUDA toolkit is, run on the CPU
(and on CUDA where there is a GPU). Run by ctest (python.load)."""
import importlib
import shutil

import pytest
import torch
from torch.utils.cpp_extension import CUDA_HOME

import fusegen

HAVE_NVCC = CUDA_HOME is not None and shutil.which("nvcc", path=f"{CUDA_HOME}/bin") is not None
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and HAVE_NVCC else [])

SPECS = """
op: rope_angles
doc: RoPE with the angle pos(S) * freq computed per element (no tables)
inputs:
  x: [..., S, H, D]
  freq: [D]
let:
  theta: pos(S) * freq
outputs:
  y: x * cos(theta) + rotate_half(x) * sin(theta)
---
op: fake_quant_int8
doc: x through int8 with a per-row absmax scale; straight-through gradient
inputs:
  x: [..., D]
let:
  s: detach(max(abs(x))) / 127 + 1e-12
  q: clamp(round(x / s), -127, 127)
outputs:
  y: with_surrogate_grad(q * s, x, 1)
  code: q
---
op: stochastic_round
doc: x rounded to a grid of step 1/scale, up with the probability of its fraction
inputs:
  x: [..., D]
attrs:
  scale: {type: float, default: 8.0}
outputs:
  y: with_surrogate_grad(floor(x * scale + rand()) / scale, x, 1)
---
op: hard_acts
doc: hardswish and relu6 of x + b, and the sign of x
inputs:
  x: [..., D]
  b: [D]
let:
  z: x + b
outputs:
  hs: z * clamp(z + 3, 0, 6) / 6
  r6: clamp(z, 0, 6)
  sg: sign(x) * 1.0
  rd: round(x)
  fc: floor(x) * 4 + ceil(x) * 2 + trunc(x)
  cb: clamp(b, -x, 2)
---
op: quantize_rowwise
doc: per-row symmetric int8 quantization, its float32 scale, and uint8, int32 and int64 codes
inputs:
  x: [..., D]
let:
  s: max(abs(x)) / 127
  c: x / where(s > 0, s, 1)
outputs:
  q: {value: c, dtype: int8}
  scale: {value: s, dtype: float32}
  u: {value: c + 128, dtype: uint8}
  w: {value: c * 2e7, dtype: int32}
  l: {value: c * 1e17, dtype: int64}
---
op: dropout_keep
doc: dropout of x, returning its keep mask as bool
inputs:
  x: [..., D]
attrs:
  p: {type: float, default: 0.1}
let:
  d: dropout(1, p)
outputs:
  y: x * d
  keep: {value: d, dtype: bool}
"""


def rotate_half(t):
    h = t.shape[-1] // 2
    return torch.cat([-t[..., h:], t[..., :h]], -1)


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    folder, paths, names = tmp_path_factory.mktemp("specs"), [], []
    for text in SPECS.split("\n---\n"):
        names.append(text.split("op: ")[1].split()[0])
        paths.append(folder / f"{names[-1]}.yaml")
        paths[-1].write_text(text)
    module = fusegen.load(paths, name="rounding_angle_ops", cpu_only=not HAVE_NVCC)
    return {n: getattr(module, n) for n in names} | {"_package": module.__name__}


@pytest.mark.parametrize("device", DEVICES)
def test_rope_with_angles_from_positions(ops, device):
    B, S, H, D = 2, 37, 3, 64
    x = torch.randn(B, S, H, D, dtype=torch.float64, device=device, requires_grad=True)
    inv = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64, device=device) / D)
    freq = torch.cat([inv, inv]).requires_grad_()
    theta = torch.arange(S, dtype=torch.float64, device=device)[:, None] * freq  # [S, D]
    want = x * theta.cos()[:, None] + rotate_half(x) * theta.sin()[:, None]
    y = ops["rope_angles"](x, freq)
    torch.testing.assert_close(y, want, rtol=1e-13, atol=1e-13)
    g = torch.randn_like(y)
    got = torch.autograd.grad(y, [x, freq], g)
    exp = torch.autograd.grad(want, [x, freq], g)
    for a, b in zip(got, exp):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-11)
    # float32: the angles reach S * 1 = 36 radians; sin and cos of them within a few ulp
    y32 = ops["rope_angles"](x.detach().float(), freq.detach().float())
    torch.testing.assert_close(y32.double(), want.detach(), rtol=0, atol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_fake_quant_int8(ops, device):
    x = torch.randn(33, 200, dtype=torch.float64, device=device, requires_grad=True)
    y, code = ops["fake_quant_int8"](x)
    s = x.detach().abs().amax(-1, keepdim=True) / 127 + 1e-12
    q = torch.clamp(torch.round(x.detach() / s), -127, 127)
    torch.testing.assert_close(code, q, rtol=0, atol=0)
    torch.testing.assert_close(y, q * s, rtol=1e-15, atol=0)
    assert code.abs().amax().item() == 127 and (code == code.round()).all()
    g = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, g)
    torch.testing.assert_close(gx, g, rtol=0, atol=0)  # straight through


@pytest.mark.parametrize("device", DEVICES)
def test_stochastic_round(ops, device):
    x = torch.rand(64, 4096, dtype=torch.float64, device=device) * 10 - 5
    torch.manual_seed(3)
    y = ops["stochastic_round"](x, scale=4.0)
    lo = torch.floor(x * 4) / 4
    assert ((y == lo) | (y == lo + 0.25)).all()
    # up with the probability of the fraction: over 262144 elements the mean moves by
    # about 0.25 * 0.29 / 512 = 1.4e-4 (one sigma) from the unbiased x
    assert abs((y - x).mean().item()) < 1e-3
    frac = x * 4 - torch.floor(x * 4)
    up = y != lo
    assert abs(up.double().mean().item() - frac.mean().item()) < 5e-3
    torch.manual_seed(3)
    torch.testing.assert_close(ops["stochastic_round"](x, scale=4.0), y, rtol=0, atol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_hard_activations_and_sign(ops, device):
    x = torch.randn(16, 96, dtype=torch.float64, device=device) * 4
    b = torch.randn(96, dtype=torch.float64, device=device)
    # values at the clamps' bounds and at 0: the gradient conventions are torch.clamp's
    x[0, :6] = torch.tensor([-3.0, 3.0, 0.0, 6.0, -2.5, 2.5], dtype=torch.float64,
                            device=device) - b[:6]
    x[1, :1] = 0.0
    x[2, :8] = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -1.5, 4.0])  # halves to even
    x.requires_grad_()
    b.requires_grad_()
    hs, r6, sg, rd, fc, cb = ops["hard_acts"](x, b)
    z = x + b
    xd = x.detach()
    want = (z * torch.clamp(z + 3, 0, 6) / 6, torch.clamp(z, 0, 6), torch.sign(x),
            torch.round(xd), torch.floor(xd) * 4 + torch.ceil(xd) * 2 + torch.trunc(xd),
            torch.clamp(b.expand_as(x), -x, torch.tensor(2.0, dtype=x.dtype, device=device)))
    for got, w in zip((hs, r6, sg, rd, fc, cb), want):
        torch.testing.assert_close(got, w, rtol=1e-15, atol=1e-15)
    assert rd[2, :8].tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 4.0, -2.0, 4.0]
    for t in (torch.float32, torch.bfloat16):  # (the float kernels' rint)
        rd_t = ops["hard_acts"](xd.to(t), b.detach().to(t))[3]
        assert rd_t[2, :8].tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 4.0, -2.0, 4.0]
    gs = [torch.randn_like(t) for t in (hs, r6, cb)]
    got = torch.autograd.grad([hs, r6, cb], [x, b], gs)
    exp = torch.autograd.grad([want[0], want[1], want[5]], [x, b], gs)
    for a, e in zip(got, exp):
        torch.testing.assert_close(a, e, rtol=1e-13, atol=1e-13)
    # NaN: clamp keeps it, sign gives 0 (torch.sign)
    n = torch.full((1, 96), float("nan"), dtype=torch.float64, device=device)
    hs, r6, sg, _, _, _ = ops["hard_acts"](n, b.detach())
    assert hs.isnan().all() and r6.isnan().all() and (sg == 0).all()


def saturated(v, t):
    """v (float64) rounded to integers of type t, halves to even, saturated, NaN as 0: written
    here from the docs, not from fusegen's _support."""
    info = torch.iinfo(t)
    r = torch.nan_to_num(torch.round(v), nan=0.0)
    out = torch.clamp(r, info.min, info.max).to(t)
    return torch.where(r >= 2.0 ** (info.bits - (info.min < 0)), info.max, out)


@pytest.mark.parametrize("device", DEVICES)
def test_integer_outputs(ops, device):
    x = torch.randn(6, 300, dtype=torch.float64, device=device)
    x[1] = 0.0  # scale 0: codes 0
    x[2, 7] = float("nan")  # a NaN scale (where(s > 0, s, 1) takes 1): its NaN code 0
    x[3, :5] = torch.tensor([127.0, -63.5, 0.5, 1.5, -2.5], dtype=torch.float64)  # halves
    q, scale, u, w, l = ops["quantize_rowwise"](x)
    assert (q.dtype, scale.dtype, u.dtype, w.dtype, l.dtype) == (
        torch.int8, torch.float32, torch.uint8, torch.int32, torch.int64)
    s = x.abs().amax(-1) / 127
    c = x / torch.where(s > 0, s, 1.0)[:, None]
    torch.testing.assert_close(scale, s.float(), equal_nan=True)
    assert torch.equal(q, saturated(c, torch.int8))
    assert torch.equal(u, saturated(c + 128, torch.uint8))
    assert torch.equal(w, saturated(c * 2e7, torch.int32))  # beyond 2^31: saturated
    assert (w == 2**31 - 1).any() and (w == -2**31).any()
    # int64: c * 1e17 computed in float64 here as in the kernels; past 2^63 saturated
    assert torch.equal(l, saturated(c * 1e17, torch.int64))
    assert (l == 2**63 - 1).any() and (q[1] == 0).all() and q[2, 7] == 0 and q[2].any()
    assert q[3, :5].tolist() == [127, -64, 0, 2, -2]  # (x / 1 with scale 1: halves to even)
    # float32 and bfloat16: within one step of the float64 codes (the scale rounds)
    for t in (torch.float32, torch.bfloat16):
        q_t = ops["quantize_rowwise"](x[:1].to(t))[0]
        assert (q_t.int() - saturated(c[:1], torch.int8).int()).abs().max() <= 1


@pytest.mark.parametrize("device", DEVICES)
def test_bool_keep_mask(ops, device):
    x = torch.randn(64, 1000, dtype=torch.float64, device=device) + 5  # (no zeros)
    torch.manual_seed(5)
    y, keep = ops["dropout_keep"](x, p=0.25)
    assert keep.dtype == torch.bool and keep.shape == x.shape
    assert torch.equal(keep, y != 0)
    torch.testing.assert_close(y, torch.where(keep, x / 0.75, 0.0), rtol=1e-15, atol=0)
    assert abs(keep.double().mean().item() - 0.75) < 0.01
    g = torch.randn_like(y)
    xr = x.clone().requires_grad_()
    torch.manual_seed(5)
    (gx,) = torch.autograd.grad(ops["dropout_keep"](xr, p=0.25)[0], xr, g)
    torch.testing.assert_close(gx, torch.where(keep, g / 0.75, 0.0), rtol=1e-15, atol=0)


# The generated tests' checks, called through each op's CHECKS (its test module's OpChecks).
GENERATED = {
    "forward": lambda c, t, dev: [c.forward_matches_reference(dev, d) for d in c.spec.torch_dtypes()],
    "backward": lambda c, t, dev: [c.backward_matches_reference(dev, d) for d in c.spec.torch_dtypes()],
    "extremes": lambda c, t, dev: [c.extreme_magnitudes(dev, d) for d in t.wide_dtypes(c.spec)],
    "gradcheck": lambda c, t, dev: c.gradcheck(dev),
    "gradgradcheck": lambda c, t, dev: c.gradgradcheck(dev),
    "partial": lambda c, t, dev: c.partial_gradients(dev),
    "odd_sizes": lambda c, t, dev: c.odd_sizes(dev),
    "opcheck": lambda c, t, dev: c.opcheck(dev),
}
GRADIENT_CHECKS = {"backward", "gradcheck", "gradgradcheck", "partial"}
OPS = ["rope_angles", "fake_quant_int8", "stochastic_round", "hard_acts", "quantize_rowwise",
       "dropout_keep"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("check", GENERATED)
@pytest.mark.parametrize("op", OPS)
def test_generated_checks(ops, op, check, device):
    package = ops["_package"]
    checks = importlib.import_module(f"{package}.{op}.test_{op}").CHECKS
    if check in GRADIENT_CHECKS and not checks.spec.differentiable_outputs():
        pytest.skip("every output has a type of its own: no gradient (its generated tests "
                    "have no gradient checks)")
    GENERATED[check](checks, importlib.import_module(f"{package}.testing"), device)
