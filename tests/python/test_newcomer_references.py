"""What the generated tests got wrong on specs written as a newcomer would (their ops were
right: each matched PyTorch written by hand in float64):

- An integer (pos(S), j, an int input) turned into a float by an attr, as `pos(S) / base`: the
  kernels convert it to the compute type, the generated reference let torch make it float32
  (its default dtype), and the float64 checks failed on a correct op (2.99e-08 off against a
  bound of 1.3e-15).
- silu of w * x in the rows of mean 1000: torch's float64 silu is 0 where exp(-x) overflows
  (x < -709.78), the kernel keeps the exact value (up to 4e-306), and the check held it to one
  subnormal step.
- A `reference:` formula calling a torch op with no second derivative (F.multi_margin_loss):
  the second-derivative check raised instead of checking reference() alone and saying so.
- A mean squared error over the whole tensor, `sum_all((x - t) * (x - t)) / (rows * D)`: its
  backward reads the row count, and torch.vmap over x alone ran the backward once over the
  batch, so `rows` was the batch's and every gradient 1/B of what it is (the vmap rules called
  an op per sample only for column statistics). The same for a per-element `x / rows`.
- A softmax with a per-head attention sink (`sink: [H]`, added to the denominator as
  exp(sink - m)): the backward reads exp(sink - m) saved per row, not sink, so the forward
  saved a placeholder for sink; the second derivatives (printed from `fusegen dump grad2`)
  read sink and got the placeholder's garbage (every second derivative wrong, sink's missing).
  An input that only the second derivatives read is saved now.
- An int8 tensor as the first input (`q: {shape: [..., D], dtype: int8}` dequantized as
  `q * scale + ref`): the gradient checks held every gradient to the first input's dtype,
  int8, and failed a correct op in every dtype; each gradient is held to its own input's.
- A KL divergence of probabilities, `sum(p * (log(p) - log(q)))`: the tests drew p and q from
  N(0, 1), half of them negative, and every check compared NaNs. A float input may declare the
  values it takes (`p: {shape: [..., D], range: [0.01, 1.0]}`); the tests draw it inside.
- A packed output (`y: cat(...)`, [..., 2*D], rope_qk's): the large-tensor check compared
  the rows of [..., D] and [...] outputs with each chunk's reference, and the packed one whole
  (a shape mismatch on the H100, whose traceback then held 2^31-element tensors).
- A `[]` input inside a reduction's argument, `x / sqrt(mean(x * x * t * t) + eps)`: its
  backward uses t per element and per row, and reverse mode added the two adjoints as one
  full-shaped value, whose sum over the elements counted the per-row one D times (the second
  derivative in t 183.0 against -12.96). The full-shaped one is summed over its row first.
  With that, a forward may use a `[]` input both ways too (`x * shift - mean(x) * shift`, refused
  before): its gradient is the per-row adjoint summed over the rows.
- A fake quantization with a straight-through gradient, `with_surrogate_grad(q * s, x, 1)`,
  whose `reference:` formula is the plain `clamp(round(x / s), ...) * s`: the second-derivative
  check held the op's derivatives to torch's of that formula (0 through the rounding), which
  the spec says are not the op's. The first derivatives were compared with reference() alone;
  the second ones are now too.
- A softmax masked by per-sequence lengths, `where(j >= lengths, -inf, x)`: a length of 0
  masks a row whole, whose softmax is NaN in the op and in torch alike, and torch.vmap's
  checks (op against a loop of the op) failed on NaN == NaN. They compare NaNs as equal.
- A weighted mean over the rows per column (`colsum(w * x) / colsum(w)`, a [D] output) at
  the GPU's sizes: the bounds, computed in chunks of rows there, cut the [D] output's gradient
  as if it were per row (a shape error on the H100).
- Gaussian noise by Box-Muller, `sqrt(-2 * log(1 - rand()))`: where rand() is 0 the sqrt is
  of -0.0 and its bound 0.5 / -0.0 * e was -inf; the report of the failure then named an
  element within its bound. sqrt's bound at 0 is sqrt(e), and the report ranks a bound <= 0
  first.
- A softmax masked by per-sequence lengths drew lengths of 0 (integers are drawn in [0, D)),
  rows masked whole, and its float64 gradchecks failed on NaN; an integer input may declare
  its values too (`lengths: {shape: [B], dtype: int64, range: [1, 2048]}`).
- A partial `reference:` (formulas for some outputs): the second-derivative check passed the
  missing outputs' None to torch.autograd.grad and raised.
- An unbiased variance over one row (`/ (rows - 1)`) is NaN in torch and in the op, gradients
  too; the gradient check refused any non-finite gradient before comparing it with the
  reference's, which it equals.
- A ReLU of a normalized value (`relu(x - mean(x))`, BatchNorm + ReLU): in rows of mean 1000
  and spread 0.01 the centred value is off by ~1e-4 in float32, and the kernel's ReLU took the
  other branch than the float64 reference's for a few elements near 0, which the error model
  (each select held to its taken branch's bound) did not allow. An order comparison within
  its operands' bounds may now flip: the select there is held to both branches.
- Column parity written as Python writes it, `j % 2`: `%` was an unexpected character. It
  is an operator now, `mod(a, b)` (torch.remainder's sign: b's), a formula in primitives.yaml.
- Int attrs ran at their defaults only (kept as possible sentinels such as ignore_index):
  a chunked causal softmax's chunk size and query offset never ran at other values. They
  run 1 more, unless an integer input of the op may hold the value.
- Llama's complex RoPE (a `swap_pairs` of a [S, D] table): its second derivatives with the
  table needing no gradient moved a 0-dim zero cotangent (torch.func.jacrev failed on the
  H100); the printed moves take a 0-dim value as it is.
- Mamba's step-size limits, `clamp(softplus(dt + dt_bias), dt_min, dt_max)` with dt_max's
  default `inf` (float("inf") in Mamba): "not a valid float". A float attr's default may be
  infinite (YAML's `.inf` or `inf`); torch's schema parser reads no infinity, so the schema
  leaves that default out (the attr is keyword-only) and the Python function has it.
- A loss over the whole tensor used again in its own backward per element (`1 / sum_all(x)`,
  a weighted mean `sum_all(w * x) / sum_all(w)`): the second derivatives gave each element its
  own share of the total's adjoint instead of the sum of all of them (gradgradcheck's Jacobian
  diagonal where it is full). A whole-tensor value's adjoint is totaled where it flows into
  what it combines.
- A mean squared error over the positions a length mask keeps, `sum_all(x * x) /
  sum_all(where(lengths > 0, 1, 0))` with `lengths: [S]` against x [..., S, D]: the op was
  right, but the generated reference summed the mask's S values once, not once per batch
  and head (torch's sum of a tensor of S rows), and the second derivatives with it; the
  bounds counted them D times. Reductions over rows broadcast their argument over the op's
  rows first (`_support.over_rows`).
- Binary cross-entropy with a `pos_weight [D]` checked against
  `F.binary_cross_entropy_with_logits(..., pos_weight=pos_weight)`: torch has no derivative of
  that function in pos_weight, and the second-derivative check raised instead of saying it
  compared reference() alone (as it did for functions without a second derivative).
- A multi-class hinge `pow(relu(h), p)` with p = 1: its backward's pow(relu(h), 0), where a
  flipping relu hands it 0 with a nonzero bound, had the bound 0 * 0^-1 = NaN, and correct
  float16 gradients failed against it.
- A time dim named T, as GPT code names it (`x: [..., T, D]`): refused as "not a dim name",
  since T is the generated C++'s compute type, which a dim's name never meets (it is printed
  as a string, or after a prefix). Dims take any name but the formulas' own (j, rows, inf).
- xIELU's `min(x, eps)` with a float attr eps: the generated reference spelled
  `torch.minimum(torch.as_tensor(x), torch.as_tensor(eps))`, a float32 eps (1e-6 rounded), and
  the float64 checks failed on a correct op (3e-15 against a bound of 7e-21). Numbers reach
  torch.minimum and torch.maximum as 0-dim float64 tensors (`_support.exact_operands`).
- Snake with a log-scale frequency, `x + sin(x * exp(a))` with `a: {shape: [D], range: [-2,
  2]}`: the large-magnitude check put -1e5 ... 1e5 into every float input with 64 columns, a
  declared range or not, and exp(88) overflowed in float32 where float64 is finite. It leaves
  ranged (and integer) inputs in their values now.
- A straight-through rounding scaled by a learnable `[]` input, `with_surrogate_grad(round(x),
  x, 1) * w`: w's gradient reads round(x), whose stated derivative in x is 1 and whose finite
  differences are 0, so gradgradcheck failed an op that agreed with the reference's second
  derivatives. It is skipped for surrogate gradients, saying why, as gradcheck was.
- RWKV's token shift either way, `roll(x, where(reverse, -1, 1))`: the bounds handed the
  shift to torch.roll as a bounded value (TypeError); and `roll(x, 1 - 2 * reverse)` was
  refused, a bool attr being a float. A bool attr is the integer 0 or 1, as torch promotes it.
- Angles from int64 position ids, `x * cos(p * inv_freq) * p`: inv_freq's float16 gradient
  (a sum over rows of terms up to 4096) is beyond float16's range, inf as it rounds, and the
  check asserted it finite wherever the float64 reference is.
And a message: an odd last dim for a spec that wrote rotate_half was told "this op moves
columns (swap_halves, swap_pairs)", naming a move it does not make and not the one it wrote."""
import importlib

import pytest
import torch


SPECS = {
    "pos_scale": """
op: pos_scale
inputs:
  x: [..., S, D]
  t: {shape: [...], dtype: int64}
attrs:
  base: {type: float, default: 3.0}
outputs:
  y: x * (pos(S) / base) + x * (j / base) + t * base
""",
    "scaled_silu": """
op: scaled_silu
inputs:
  x: [..., D]
  w: [D]
outputs:
  y: silu(w * x)
""",
    "multi_margin": """
op: multi_margin
inputs:
  x: [..., D]
  target: {shape: [...], dtype: int64}
attrs:
  margin: {type: float, default: 1.0}
let:
  xt: sum(where(j == target, x, 0))
  h: where(j == target, 0, relu(margin - xt + x))
outputs:
  loss: sum(h) / D
reference:
  loss: "F.multi_margin_loss(x.reshape(-1, x.shape[-1]), target.reshape(-1), margin=margin, reduction='none').reshape(target.shape)"
""",
    "mse_mean": """
op: mse_mean
inputs:
  x: [..., D]
  t: [..., D]
outputs:
  r: x - t
  loss: sum_all((x - t) * (x - t)) / (rows * D)
""",
    "per_row_share": """
op: per_row_share
inputs:
  x: [..., D]
outputs:
  y: x / rows
""",
    "sink_softmax": """
op: sink_softmax
inputs:
  x: [..., H, S, D]
  sink: [H]
let:
  m: detach(max(max(x), sink))
  e: exp(x - m)
outputs:
  y: e / (sum(e) + exp(sink - m))
""",
    "dequant_rmsnorm": """
op: dequant_rmsnorm
inputs:
  q: {shape: [..., D], dtype: int8}
  ref: [..., D]
  scale: [...]
  w: [D]
let:
  x: q * scale + ref
outputs:
  y: x * rsqrt(mean(x * x) + 1e-6) * w
""",
    "prob_kl": """
op: prob_kl
inputs:
  p: {shape: [..., D], range: [0.01, 1.0]}
  q: {shape: [..., D], range: [0.01, 1.0]}
outputs:
  kl: sum(p * (log(p) - log(q)))
reference:
  kl: "(p * (p.log() - q.log())).sum(-1)"
""",
    "packed_pair": """
op: packed_pair
inputs:
  x: [..., S, D]
outputs:
  y: cat(x * pos(S), x * x)
""",
    "scalar_in_reduction": """
op: scalar_in_reduction
inputs:
  x: [..., D]
  t: []
outputs:
  y: x / sqrt(mean(x * x * t * t) + 1e-6)
""",
    "shifted_center": """
op: shifted_center
inputs:
  x: [..., D]
  shift: []
  w: [D]
outputs:
  y: (x * shift - mean(x) * shift) * rsqrt(mean(x * x) * shift * shift + 1e-5) * w
""",
    "half_rotation": """
op: half_rotation
inputs:
  x: [..., D]
  w: [D]
outputs:
  y: rotate_half(x) * w
""",
    "fake_quant": """
op: fake_quant
inputs:
  x: [..., D]
  s: {shape: [D], range: [0.01, 0.1]}
let:
  q: clamp(round(x / s), -128, 127)
outputs:
  y: with_surrogate_grad(q * s, x, 1)
reference:
  y: "torch.clamp(torch.round(x / s), -128, 127) * s"
""",
    "length_masked_softmax": """
op: length_masked_softmax
inputs:
  x: [..., B, H, S, D]
  lengths: {shape: [B], dtype: int64}
let:
  z: where(j >= lengths, -inf, x)
  m: detach(max(z))
  e: exp(z - m)
outputs:
  y: e / sum(e)
""",
    "weighted_colmean": """
op: weighted_colmean
inputs:
  x: [..., D]
  w: {shape: [...], range: [0.1, 1.0]}
let:
  pm: colsum(w * x) / colsum(w + 0 * x)
outputs:
  pooled: pm
  centered: x - pm
reference:
  pooled: "(w[..., None] * x).reshape(-1, x.shape[-1]).sum(0) / w.sum()"
  centered: "x - (w[..., None] * x).reshape(-1, x.shape[-1]).sum(0) / w.sum()"
""",
    "ranged_length_softmax": """
op: ranged_length_softmax
inputs:
  x: [..., B, H, S, D]
  lengths: {shape: [B], dtype: int64, range: [1, 6]}
attrs:
  whole: {type: int, default: -1}
let:
  z: where(lengths == whole, x, where(j >= lengths, -inf, x))
  m: detach(max(z))
  e: exp(z - m)
outputs:
  y: e / sum(e)
""",
    "partial_reference": """
op: partial_reference
inputs:
  x: [..., D]
outputs:
  s: sum(x)
  q: sum(x * x)
reference:
  s: "x.sum(-1)"
""",
    "unbiased_std_hinge": """
op: unbiased_std_hinge
inputs:
  z: [..., D]
attrs:
  gamma: {type: float, default: 1.0}
  eps: {type: float, default: 1.0e-4}
let:
  m: colmean(z)
  var: colsum((z - m) * (z - m)) / (rows - 1)
outputs:
  hinge: relu(gamma - sqrt(var + eps))
reference:
  hinge: "F.relu(gamma - torch.sqrt(z.reshape(-1, z.shape[-1]).var(0) + eps))"
""",
    "centered_relu": """
op: centered_relu
inputs:
  x: [..., D]
  w: [D]
outputs:
  y: relu(x - mean(x)) * w
""",
    "batchnorm_relu": """
op: batchnorm_relu
inputs:
  x: [..., D]
  weight: [D]
  bias: [D]
let:
  m: colmean(x)
  xc: x - m
  yn: xc * rsqrt(colmean(xc * xc) + 1.0e-5) * weight + bias
outputs:
  y: max(yn, 0)
reference:
  y: "F.relu(F.batch_norm(x.reshape(-1, x.shape[-1]), None, None, weight, bias, True, 0.0, 1e-5).reshape(x.shape))"
""",
    "column_parity": """
op: column_parity
inputs:
  x: [..., S, D]
attrs:
  window: {type: int, default: 3}
outputs:
  y: where(j % 2 == 0, x, -x) + x * (pos(S) % window) + x % 0.75
reference:
  y: "torch.where(torch.arange(x.shape[-1]) % 2 == 0, x, -x) + x * (torch.arange(x.shape[-2])[:, None] % window) + torch.remainder(x, 0.75)"
""",
    "chunked_causal_softmax": """
op: chunked_causal_softmax
doc: softmax(x * scale) over keys j <= s in the same attention chunk as query s = pos(S) + q_offset
inputs:
  x: [..., S, D]
attrs:
  chunk: {type: int, default: 4}
  q_offset: {type: int, default: 0}
  scale: {type: float, default: 1.0}
let:
  s: pos(S) + q_offset
  z: where(j > s, -inf, where(floor(j / chunk) != floor(s / chunk), -inf, x * scale))
  m: detach(max(z))
  e: exp(z - m)
outputs:
  y: e / sum(e)
reference:
  y: "(lambda s, k: torch.softmax((x * scale).masked_fill((k > s) | (torch.div(k, chunk, rounding_mode='floor') != torch.div(s, chunk, rounding_mode='floor')), float('-inf')), -1))(torch.arange(x.shape[-2], device=x.device)[:, None] + q_offset, torch.arange(x.shape[-1], device=x.device)[None, :])"
""",
    "rope_complex": """
op: rope_complex
doc: complex product x * f of interleaved (re, im) pairs, f [S, D] = view_as_real(freqs_cis)
inputs:
  x: [..., S, H, D]
  f: [S, D]
let:
  even: j - 2 * floor(j / 2)
  fr: where(even == 0, f, swap_pairs(f))
  fi: where(even == 0, swap_pairs(f), f)
outputs:
  y: x * fr + rotate_pairs(x) * fi
reference:
  y: "(lambda xr, xi, fr, fi: torch.stack([xr * fr - xi * fi, xr * fi + xi * fr], -1).flatten(-2))(x[..., 0::2], x[..., 1::2], f[:, None, 0::2], f[:, None, 1::2])"
""",
    "dt_limits": """
op: dt_limits
inputs:
  dt: [..., D]
  dt_bias: [D]
attrs:
  dt_min: {type: float, default: -.inf}
  dt_max: {type: float, default: inf}
outputs:
  y: clamp(softplus(dt + dt_bias), dt_min, dt_max)
reference:
  y: "torch.clamp(F.softplus(dt + dt_bias), dt_min, dt_max)"
""",
    "whole_weighted_mean": """
op: whole_weighted_mean
inputs:
  x: [..., D]
  s: [...]
outputs:
  inverse: 1 / sum_all(x)
  mean: sum_all(s * x) / sum_all(s)
""",
    "length_masked_total": """
op: length_masked_total
inputs:
  x: [..., S, D]
  m: [S, D]
  lengths: {shape: [S], dtype: int64, range: [0, 3]}
outputs:
  loss: sum_all(x * x) / sum_all(where(lengths > 1, 2, 1))
  table: colsum(m * m)
""",
    "bce_pos_weight": """
op: bce_pos_weight
inputs:
  x: [..., D]
  t: {shape: [..., D], range: [0.0, 1.0]}
  pos_weight: {shape: [D], range: [0.5, 2.0]}
outputs:
  loss: mean((1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x))
reference:
  loss: "F.binary_cross_entropy_with_logits(x, t, pos_weight=pos_weight, reduction='none').mean(-1)"
""",
    "time_gate": """
op: time_gate
inputs:
  x: [..., T, D]
  g: [T, D]
outputs:
  y: x * g + pos(T)
reference:
  y: "x * g + torch.arange(x.shape[-2], dtype=x.dtype)[:, None]"
""",
    "min_max_attr": """
op: min_max_attr
inputs:
  x: [..., D]
attrs:
  eps: {type: float, default: 1.0e-6}
outputs:
  y: min(x, eps) + max(x, 0.1)
""",
    "log_scale_snake": """
op: log_scale_snake
inputs:
  x: [..., D]
  a: {shape: [D], range: [-2.0, 2.0]}
outputs:
  y: x + sin(x * exp(a)) * sin(x * exp(a)) / exp(a)
""",
    "scaled_straight_through": """
op: scaled_straight_through
inputs:
  x: [..., D]
  w: []
outputs:
  y: with_surrogate_grad(round(x), x, 1) * w
reference:
  y: "(x + (torch.round(x) - x).detach()) * w"
""",
    "either_way_shift": """
op: either_way_shift
inputs:
  x: [..., D]
attrs:
  reverse: {type: bool, default: false}
outputs:
  y: roll(x, where(reverse, -1, 1)) + 2 * roll(x, 1 - 2 * reverse)
""",
    "position_id_angles": """
op: position_id_angles
inputs:
  x: [..., D]
  p: {shape: [...], dtype: int64, range: [0, 4096]}
  inv_freq: {shape: [D], range: [0.0, 1.0]}
outputs:
  y: x * cos(p * inv_freq) * p
""",
    "box_muller_radius": """
op: box_muller_radius
inputs:
  x: {shape: [..., D], range: [0.0, 0.9]}
outputs:
  r: sqrt(-2 * log(1 - x))
""",
}


@pytest.fixture(scope="module")
def package(load_specs):
    return load_specs(SPECS, "newcomer_reference_ops")


def checks(package, op):
    return importlib.import_module(f"{package}.{op}.test_{op}").CHECKS


def test_an_integer_made_float_by_an_attr_is_float64_in_a_float64_reference(package):
    c = checks(package, "pos_scale")
    c.forward_matches_reference("cpu", torch.float64)
    c.backward_matches_reference("cpu", torch.float64)
    c.other_attrs_match_reference("cpu", torch.float64)  # base = 3 +- ...: not exact in float32


def test_a_silu_torch_flushes_to_zero_is_not_held_to_a_subnormal_step(package):
    c = checks(package, "scaled_silu")
    for seed in range(3):
        torch.manual_seed(seed)
        c.extreme_magnitudes("cpu", torch.float64)


def test_a_flush_is_forgiven_only_against_a_zero_and_only_in_float64(package):
    testing = importlib.import_module(f"{package}.testing")
    got = torch.tensor([-2.0e-308], dtype=torch.float64)
    testing.OpChecks.close(got, torch.tensor([-0.0], dtype=torch.float64), 0.0, "flushed")
    with pytest.raises(AssertionError):  # against a nonzero reference: held to the bound
        testing.OpChecks.close(got, torch.tensor([-1.0e-308], dtype=torch.float64), 0.0, "x")
    with pytest.raises(AssertionError):  # a float32 result: its reference is float64, exact
        testing.OpChecks.close(torch.tensor([1e-30]), torch.tensor([0.0], dtype=torch.float64),
                               0.0, "float32")


def test_an_independent_formula_without_second_derivatives_skips_saying_why(package):
    c = checks(package, "multi_margin")
    with pytest.raises(pytest.skip.Exception, match="no second derivative"):
        c.second_derivatives_match_reference("cpu", "all")


def test_an_odd_last_dim_is_told_the_move_the_spec_makes(package):
    op = getattr(importlib.import_module(f"{package}.half_rotation"), "half_rotation")
    with pytest.raises(RuntimeError, match=r"the last dim of 'x' is 5; this op exchanges the "
                       r"halves of each row \(rotate_half, swap_halves\), which needs an even "
                       r"last dim") as raised:
        op(torch.randn(3, 5), torch.randn(5))
    assert "swap_pairs" not in str(raised.value)


@pytest.mark.parametrize("op", ["mse_mean", "per_row_share"])
def test_an_op_reading_the_row_count_is_mapped_per_sample(package, op):
    c = checks(package, op)
    c.vmap_forward("cpu", torch.float64)
    c.vmap_backward("cpu", torch.float64)
    f = getattr(importlib.import_module(f"{package}.{op}"), op)
    x = torch.randn(3, 4, 5, dtype=torch.float64)
    if op == "mse_mean":  # the loss per sample, and its gradient through jacrev (vmap of vjp)
        t = torch.randn(4, 5, dtype=torch.float64)
        got = torch.vmap(lambda v: f(v, t)[1])(x)
        want = torch.stack([((v - t) ** 2).mean() for v in x])
        torch.testing.assert_close(torch.func.jacrev(lambda v: f(v, t)[1])(x[0]),
                                   2 * (x[0] - t) / t.numel())
    else:
        got, want = torch.vmap(f)(x), x / x.shape[1]
    torch.testing.assert_close(got, want)


def test_an_input_only_the_second_derivatives_read_is_saved(package):
    c = checks(package, "sink_softmax")
    c.gradgradcheck("cpu")
    c.second_derivatives_match_reference("cpu", "all")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients_are_held_to_their_own_inputs_dtype(package, dtype):
    checks(package, "dequant_rmsnorm").backward_matches_reference("cpu", dtype)


def test_a_float_input_is_drawn_from_its_declared_range(package):
    c = checks(package, "prob_kl")
    for t in c.inputs((6, 5), 33, torch.float64, "cpu", scale=4.0):
        assert 0.01 <= float(t.min()) and float(t.max()) <= 1.0
    c.forward_matches_reference("cpu", torch.float32)
    c.backward_matches_reference("cpu", torch.bfloat16)
    c.gradcheck("cpu")
    c.extreme_magnitudes("cpu", torch.float32)


def test_the_rows_check_takes_rows_of_a_packed_output(package):
    # index_beyond_2_31's comparison by chunks of rows, at a size the CPU runs
    checks(package, "packed_pair").index_beyond_2_31("cpu", D=64, rows=4000, chunk=512)



def test_a_scalar_used_per_row_and_per_element_gets_one_sum_of_each(package):
    c = checks(package, "scalar_in_reduction")
    c.gradgradcheck("cpu")
    c.second_derivatives_match_reference("cpu", "all")



@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_scalar_input_used_per_element_and_per_row(package, dtype):
    c = checks(package, "shifted_center")
    c.backward_matches_reference("cpu", dtype)
    if dtype == torch.float32:
        c.gradcheck("cpu")
        c.second_derivatives_match_reference("cpu", "all")


def test_a_surrogate_gradient_is_not_held_to_torchs_derivatives_of_the_formula(package):
    c = checks(package, "fake_quant")
    c.forward_matches_independent("cpu", torch.float32)
    c.second_derivatives_match_reference("cpu", "all")


def test_vmap_agrees_with_the_loop_on_a_row_masked_whole(package):
    c = checks(package, "length_masked_softmax")
    x, lengths = c.inputs((2, 3), 5, torch.float64, "cpu")
    lengths = torch.arange(lengths.numel()) % 2  # rows masked whole: NaN in op and loop
    fn = lambda *t: (c.op(*t),)  # noqa: E731
    for dims, args in c._vmap_cases([x, lengths]):
        c._compare_vmap(fn, dims, args, "vmap(length_masked_softmax)")
    assert c.op(x, lengths).isnan().any()  # (the case it is about)


def test_an_integer_input_is_drawn_from_its_declared_range(package):
    # Lengths of 0 (drawn in [0, D) by their type) masked rows whole: NaN softmaxes, and the
    # float64 gradchecks failed on the GPU. `range: [1, 6]`: both ends drawn, nothing outside,
    # the int attr's value (-1, outside) never put in as a sentinel.
    c = checks(package, "ranged_length_softmax")
    drawn = torch.cat([c.inputs((2, 3), 8, torch.float64, "cpu")[1] for _ in range(40)])
    assert drawn.dtype == torch.int64 and set(drawn.tolist()) == set(range(1, 7))
    c.forward_matches_reference("cpu", torch.float32)
    c.gradcheck("cpu")
    c.gradgradcheck("cpu")


def test_bounds_in_chunks_of_rows_take_a_column_outputs_gradient_whole(package):
    # The GPU's row_lengths sizes (700 x 16384) bound in chunks of rows; the [D] output's
    # gradient was cut as if per row ("size 512 must match 16384"). Small chunks here.
    c = checks(package, "weighted_colmean")
    c.BOUND_CHUNK = 8 * 48
    try:
        c.bf16_against_fp32(c.inputs((37,), 48, c.bf16, "cpu"), "in chunks of 8 rows")
        c.backward_matches_reference("cpu", torch.float32)
    finally:
        del c.BOUND_CHUNK


def test_the_bound_of_a_sqrt_at_minus_zero_is_not_negative(package):
    # sqrt(-2 log(1 - x)) at x = 0 is sqrt(-0.0) = -0.0: the bound 0.5 / v * e was -inf, and
    # the report named element [0, 0] (its ratio 0 / -inf = -0 the largest). One in 2^24 of a
    # Box-Muller's uniform draws is 0 (1 of 19.7 M elements failed on the H100).
    c = checks(package, "box_muller_radius")
    x, = c.inputs((5,), 16, torch.float32, "cpu")
    x[:, ::3] = 0.0
    tols, _ = c.tolerances([x], torch.float32)
    assert (tols[0] >= 0).all() and torch.isfinite(tols[0]).all()
    c.close(c.call(c.op, [x])[0], c.reference64([x])[0], tols[0], "box_muller_radius.r")


def test_the_report_names_an_element_over_a_bound_that_is_not_positive(package):
    testing = importlib.import_module(f"{package}.testing")
    got = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    want = torch.tensor([0.5, 1.0, 2.0 + 1e-3], dtype=torch.float64)
    with pytest.raises(AssertionError, match=r"2 of 3 elements .* worst at \[1\]"):
        testing.OpChecks.close(got, want, torch.tensor([1.0, -1.0, 1e-6], dtype=torch.float64),
                               "a negative bound")


def test_second_derivatives_against_a_reference_of_some_outputs(package):
    # `reference:` for s only: q's None went to torch.autograd.grad ("Expected output to be a
    # torch.Tensor"); q's output gradient is 0 in both sides of that comparison now.
    c = checks(package, "partial_reference")
    c.second_derivatives_match_reference("cpu", "all")
    c.second_derivatives_match_reference("cpu", "first")


def test_a_gradient_the_reference_has_not_finite_is_compared_not_refused(package):
    # An unbiased variance over one row is 0 / 0 (NaN) in torch and in the op, gradients too;
    # the gradient check refused any non-finite value before comparing with the reference's.
    c = checks(package, "unbiased_std_hinge")
    c.leading_dims("cpu", 1)
    z = torch.randn(2, 6, dtype=torch.float64)  # two rows: torch's gradient is finite
    with pytest.raises(AssertionError, match="grad of z of two rows: non-finite values"):
        c.close_grads([torch.full_like(z, float("nan"))], [z], [torch.ones(6, dtype=torch.float64)],
                      torch.float64, " of two rows")


@pytest.mark.parametrize("op", ["centered_relu", "batchnorm_relu"])
def test_a_relu_of_a_centred_value_may_flip_where_its_bound_reaches_zero(package, op):
    # In rows of mean 1000 and spread 0.01, x - mean(x) is off by up to ~1e-4 in float32, so
    # the kernel's relu may take the other branch near 0 than the float64 reference's (6 of
    # 16384 elements, against a bound of 1e-45); batchnorm's gradients the same at D = 65536.
    c = checks(package, op)
    for dtype in (torch.float32, torch.bfloat16):
        c.extreme_magnitudes("cpu", dtype)
    c.bf16_against_fp32(c.inputs((3,), 65536, c.bf16, "cpu"), "at D=65536")
    c.forward_matches_reference("cpu", torch.float32)
    c.backward_matches_reference("cpu", torch.bfloat16)


def test_a_remainder_as_python_writes_it(package):
    # `%` was "unexpected character": column parity (interleaved layouts, sinusoidal tables)
    # and positions modulo a window. a % b is torch.remainder's (the sign of b).
    c = checks(package, "column_parity")
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        c.forward_matches_reference("cpu", dtype)
        c.backward_matches_reference("cpu", dtype)
    c.forward_matches_independent("cpu", torch.float32)
    c.gradcheck("cpu")
    op = getattr(importlib.import_module(f"{package}.column_parity"), "column_parity")
    x = torch.tensor([[[-1.0, 1.0, -0.25, 2.0]]], dtype=torch.float64)
    want = torch.tensor([[[-1.0 + 0.5, -1.0 + 0.25, -0.25 + 0.5, -2.0 + 0.5]]],
                        dtype=torch.float64)
    torch.testing.assert_close(op(x), want, rtol=0, atol=0)


def test_int_attrs_that_are_not_sentinels_run_away_from_their_defaults(package):
    # other_attrs kept every int attr at its default (ignore_index-like sentinels), so a
    # chunk size and a query offset never ran at another value in the generated tests; an
    # int attr an integer input may hold is still kept.
    c = checks(package, "chunked_causal_softmax")
    assert c.other_attrs() == {"chunk": 5, "q_offset": 1, "scale": 1.25}
    for dtype in (torch.float64, torch.float32):
        c.other_attrs_match_reference("cpu", dtype)
    assert checks(package, "ranged_length_softmax").other_attrs() == {"whole": 0}  # not in [1, 6]
    assert checks(package, "pos_scale").other_attrs()["base"] == 3.25


def test_second_derivatives_through_a_move_of_an_input_not_differentiated(package):
    # Llama's complex RoPE with tables f that need no gradient: the double backward's cotangent
    # of f's gradient is a 0-dim zero, and its swap_pairs (unflatten of the last dim) raised
    # (torch.func.jacrev on the H100). Moves take a 0-dim value as it is.
    mod = importlib.import_module(f"{package}.rope_complex")
    for needs_f in (False, True):
        x = torch.randn(2, 3, 4, 6, dtype=torch.float64, requires_grad=True)
        f = torch.randn(3, 6, dtype=torch.float64, requires_grad=needs_f)
        v = torch.randn(2, 3, 4, 6, dtype=torch.float64)
        got, want = [], []
        for fn, out in ((mod.rope_complex, got), (mod.reference, want)):
            g = torch.autograd.grad(fn(x, f), [x, f][:1 + needs_f], v, create_graph=True)
            # (+ 0 x: the reference's gradient of x does not depend on x when f is constant)
            out.extend(torch.autograd.grad(sum((t * t).sum() for t in g) + 0 * x.sum(),
                                           [x, f][:1 + needs_f],
                                           allow_unused=True, materialize_grads=True))
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    checks(package, "rope_complex").func_transforms("cpu")


def test_a_float_attr_may_default_to_infinity(package):
    # Mamba's dt_max defaults to float("inf"): refused as "not a valid float". The schema has
    # no spelling for it (torch's parser reads no inf), the Python function has the default.
    import inspect
    import math
    mod = importlib.import_module(f"{package}.dt_limits")
    params = inspect.signature(mod.dt_limits).parameters
    assert params["dt_max"].default == math.inf and params["dt_min"].default == -math.inf
    schema = str(torch.ops.newcomer_reference_ops.dt_limits.default._schema)
    assert "float dt_min, float dt_max)" in schema, schema
    x = torch.tensor([[-50.0, 0.0, 30.0]], dtype=torch.float64)
    b = torch.zeros(3, dtype=torch.float64)
    torch.testing.assert_close(mod.dt_limits(x, b), torch.nn.functional.softplus(x))
    torch.testing.assert_close(mod.dt_limits(x, b, dt_min=0.5, dt_max=2.0),
                               torch.nn.functional.softplus(x).clamp(0.5, 2.0))
    c = checks(package, "dt_limits")
    for dtype in (torch.float64, torch.bfloat16):
        c.forward_matches_reference("cpu", dtype)
        c.backward_matches_reference("cpu", dtype)
    c.other_attrs_match_reference("cpu", torch.float32)


def test_second_derivatives_through_a_total_used_per_element(package):
    # 1 / sum_all(x) has the backward -g / sum_all(x)^2 for every element: its derivative in x
    # reaches every element through the total, which reverse mode gave one element's share.
    c = checks(package, "whole_weighted_mean")
    c.gradgradcheck("cpu")
    mod = importlib.import_module(f"{package}.whole_weighted_mean")
    x = torch.rand(3, 4, dtype=torch.float64, requires_grad=True) + 0.5
    s = torch.rand(3, dtype=torch.float64, requires_grad=True) + 0.5
    h = [torch.autograd.functional.hessian(lambda x, s: sum(fn(x, s)), (x, s))
         for fn in (mod.whole_weighted_mean, mod.reference)]
    for a, b in zip(torch.utils._pytree.tree_leaves(h[0]), torch.utils._pytree.tree_leaves(h[1])):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_a_total_of_a_value_of_some_named_dims_counts_every_row(package):
    # sum_all and colsum of a value of S alone (from lengths [S], a table m [S, D]) run over
    # every row of the op, [B, S]: the reference summed the S values once.
    mod = importlib.import_module(f"{package}.length_masked_total")
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    m = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([0, 2, 3])
    w = torch.where(lengths > 1, 2.0, 1.0).double()  # 1, 2, 2: per position, twice per batch
    want = ((x * x).sum() / (2 * w.sum()), 2 * (m * m).sum(0))
    for got in (mod.length_masked_total(x, m, lengths), mod.reference(x, m, lengths)):
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    c = checks(package, "length_masked_total")
    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        c.forward_matches_reference("cpu", dtype)
        c.backward_matches_reference("cpu", dtype)
    c.gradgradcheck("cpu")
    c.second_derivatives_match_reference("cpu", "all")


def test_second_derivatives_skip_an_independent_formula_torch_cannot_differentiate(package):
    # torch differentiates F.binary_cross_entropy_with_logits in neither pos_weight nor twice:
    # the check compares reference() and says why it leaves the spec's formula out.
    c = checks(package, "bce_pos_weight")
    c.forward_matches_independent("cpu", torch.float64)
    with pytest.raises(pytest.skip.Exception, match="is not differentiable with"):
        c.second_derivatives_match_reference("cpu", "all")
    c.gradgradcheck("cpu")


def test_the_bound_of_a_zeroth_power_of_an_uncertain_zero_is_zero(package):
    testing = importlib.import_module(f"{package}.testing")
    r = testing.Rounding(torch.float16, [1, 3], "cpu")
    v = torch.tensor([0.0, 0.5, 2.0], dtype=torch.float64)
    a = testing.Bounded(v, torch.full_like(v, 1e-3), r)
    zeroth = r.pow(a, 0.0)  # 1, off by the pow's own rounding alone (8 units), wherever a is
    assert torch.equal(zeroth.v, torch.ones_like(v))
    assert torch.equal(zeroth.e, torch.full_like(v, 8 * r.u)), zeroth.e
    first = r.pow(a, 1.0)  # (slope 1: the argument's bound, and the pow's rounding)
    assert torch.isfinite(first.e).all() and (first.e >= 1e-3).all(), first.e


def test_a_dim_may_be_named_T(package):
    c = checks(package, "time_gate")
    for dtype in (torch.float64, torch.bfloat16):
        c.forward_matches_reference("cpu", dtype)
        c.backward_matches_reference("cpu", dtype)
    c.forward_matches_independent("cpu", torch.float32)
    mod = importlib.import_module(f"{package}.time_gate")
    with pytest.raises(RuntimeError, match="T = 3"):
        mod.time_gate(torch.randn(2, 4, 5), torch.randn(3, 5))


def test_numbers_in_min_and_max_are_not_rounded_to_float32(package):
    mod = importlib.import_module(f"{package}.min_max_attr")
    x = torch.tensor([[-1.0, 5e-7, 1e-6, 0.05, 0.2]], dtype=torch.float64)
    want = torch.minimum(x, torch.tensor(1e-6, dtype=torch.float64)) + torch.maximum(
        x, torch.tensor(0.1, dtype=torch.float64))
    torch.testing.assert_close(mod.reference(x), want, rtol=0, atol=0)
    torch.testing.assert_close(mod.min_max_attr(x), want, rtol=0, atol=0)
    checks(package, "min_max_attr").forward_matches_reference("cpu", torch.float64)


def test_large_magnitudes_leave_a_ranged_input_in_its_range(package):
    c = checks(package, "log_scale_snake")
    for dtype in (torch.float32, torch.bfloat16):
        c.forward_matches_reference("cpu", dtype)


def test_gradgradcheck_skips_a_surrogate_gradient_saying_why(package):
    c = checks(package, "scaled_straight_through")
    with pytest.raises(pytest.skip.Exception, match="finite differences of the backward"):
        c.gradgradcheck("cpu")
    c.second_derivatives_match_reference("cpu", "all")


def test_a_roll_either_way_by_a_bool_attr(package):
    mod = importlib.import_module(f"{package}.either_way_shift")
    x = torch.randn(3, 8, dtype=torch.float64)
    for reverse, k in ((False, 1), (True, -1)):
        want = 3 * torch.roll(x, k, -1)
        torch.testing.assert_close(mod.either_way_shift(x, reverse=reverse), want)
        torch.testing.assert_close(mod.reference(x, reverse=reverse), want)
    c = checks(package, "either_way_shift")
    c.forward_matches_reference("cpu", torch.float32)
    c.backward_matches_reference("cpu", torch.float32)
    c.other_attrs_match_reference("cpu", torch.float32)


def test_a_gradient_beyond_the_dtypes_range_is_held_to_inf(package):
    checks(package, "position_id_angles").backward_matches_reference("cpu", torch.float16)
