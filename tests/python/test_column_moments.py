"""Variances over rows in one pass (plan/ColumnPasses.h, OutKind::ColM2): a sum of squared
deviations from a column mean, colsum(square(e - colmean(e))), is computed in the pass of the
mean (Welford per thread over shifted values, Chan's merge in a fixed order). Checked against
float64 on the float32-rounded input, at offsets where an unshifted Welford mean stalls (values
near 1e4 with a spread of 0.01: its variance came out 18% high), where shifting each thread by
its own first value left the merges 2% off on CUDA, and where summing first and subtracting
after cancels: within 1e-5 of the variance at every offset (the shift is the column's row 0); every spelling of the square, row counts around the plan's chunks,
and the same bits on every call. CPU here (ctest python.load); the CUDA case runs where a GPU is.
Run by ctest with FUSEGEN, FUSEGEN_TEMPLATES and PYTHONPATH set (conftest.py)."""
import subprocess

import pytest
import torch

import fusegen

SPEC = """
op: column_moments
doc: per-column mean and biased variance over the rows of (x + b), and x normalized by them
inputs: {{x: [..., D], b: [D]}}
let:
  e: x + b
  m: colmean(e)
  v: colmean({square})
outputs:
  y: (e - m) * rsqrt(v + 1.0e-5)
  mean: {{value: m, dtype: float32}}
  var: {{value: v, dtype: float32}}
"""

SQUARES = {"square": "square(e - m)", "mul": "(e - m) * (e - m)", "pow": "pow(m - e, 2)"}


@pytest.fixture(scope="module", params=sorted(SQUARES))
def ops(request):
    spelling = SQUARES[request.param]
    return fusegen.load_inline(SPEC.format(square=spelling), name=f"moments_{request.param}",
                               cpu_only=not torch.cuda.is_available())


def _devices():
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _reference(x, b):
    e = x.double() + b.double()
    return e.mean(0), e.var(0, unbiased=False)


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("offset", [0.0, 1.0e3, 1.0e4, 1.0e5])
def test_variance_at_an_offset(ops, device, offset):
    # (torch's own float32 batch_norm statistics: 1e-3 off at 1e3 and 1e4 on the CPU)
    bound = 1e-5
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(4099, 37, generator=g, dtype=torch.float64) * 0.01 + offset).float()
    b = torch.zeros(37)
    _, mean, var = ops.column_moments(x.to(device), b.to(device))
    want_mean, want_var = _reference(x, b)
    err = ((var.double().cpu() - want_var).abs() / want_var).max().item()
    assert err <= bound, f"relative error of the variance {err} > {bound}"
    torch.testing.assert_close(mean.double().cpu(), want_mean, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("rows", [1, 2, 3, 31, 257, 1000, 20011])
def test_rows_around_the_chunks_float64(ops, device, rows):
    g = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 24, generator=g, dtype=torch.float64) * 3 + 5
    b = torch.randn(24, generator=g, dtype=torch.float64)
    y, mean, var = ops.column_moments(x.to(device), b.to(device))
    want_mean, want_var = _reference(x, b)
    # (float32 outputs of float64 sums: their rounding)
    torch.testing.assert_close(var.double().cpu(), want_var, rtol=2e-7, atol=1e-12)
    torch.testing.assert_close(mean.double().cpu(), want_mean, rtol=2e-7, atol=1e-12)
    e = x + b
    want_y = (e - want_mean) * torch.rsqrt(want_var + 1e-5)
    torch.testing.assert_close(y.cpu(), want_y, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", _devices())
def test_same_bits_on_every_call(ops, device):
    x = torch.randn(65537, 40, dtype=torch.float32, device=device) + 100
    b = torch.randn(40, device=device)
    first = ops.column_moments(x, b)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        again = ops.column_moments(x, b)
    finally:
        torch.set_num_threads(threads)
    for a, c in zip(first, again):
        assert torch.equal(a, c)


@pytest.mark.parametrize("spelling", sorted(SQUARES))
def test_the_variance_runs_in_the_pass_of_its_mean(tmp_path, spelling):
    spec = tmp_path / "column_moments.yaml"
    spec.write_text(SPEC.format(square=SQUARES[spelling]))
    plan = subprocess.run([fusegen.binary(), "dump", "plan", str(spec)], capture_output=True,
                          text=True, check=True).stdout
    forward = plan.split("backward program 0")[0]
    assert "forward program 0" in forward and "squared deviations" in forward, plan
    # one pass over the rows (the sums), one over the columns, then the forward: x read twice
    assert "forward program 2" not in forward, plan
