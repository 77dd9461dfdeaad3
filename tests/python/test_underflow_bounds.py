"""The error model below float32's smallest normal (templates/package/testing.py, Rounding):
a rounded result there is off by up to half the subnormal step, absolute, which (1 + d) does
not cover. A temperature softmax with a per-row temperature, the way a user writes it, has
float32 gradients y * (g - sum(g y)) / t whose product underflows before the division by a
small t scales its error up: its generated backward check failed on 9 of 10 random inputs
(26 steps off against a bound of one) until the model added the step."""
import importlib

import pytest
import torch

import fusegen

SPEC = """
op: temperature_softmax
doc: softmax of x / t with a per-row temperature t
inputs:
  x: [..., D]
  t: [...]
let:
  z: x / t
  m: detach(max(z))
  e: exp(z - m)
outputs:
  y: e / sum(e)
"""


@pytest.fixture(scope="module")
def package():
    module = fusegen.load_inline(SPEC, name="underflow_ops", cpu_only=True)
    return module.__name__


def test_generated_backward_check_passes_on_random_inputs(package):
    checks = importlib.import_module(f"{package}.temperature_softmax.test_temperature_softmax").CHECKS
    for seed in range(8):
        torch.manual_seed(seed)
        checks.backward_matches_reference("cpu", torch.float32)


def test_the_step_is_added_only_below_the_smallest_normal(package):
    testing = importlib.import_module(f"{package}.testing")
    r = testing.Rounding(torch.float32, [1, 4], "cpu")
    step = torch.finfo(torch.float32).smallest_normal * torch.finfo(torch.float32).eps
    tiny = r.exact(torch.tensor([0.0327])) * r.exact(torch.tensor([6.8e-44], dtype=torch.float64))
    assert tiny.e.item() == pytest.approx(step / 2 + r.u * tiny.v.item())
    scaled = tiny / r.exact(torch.tensor([0.0174], dtype=torch.float64))
    assert scaled.e.item() >= step / 2 / 0.0174  # the step's error, scaled by 1 / t
    normal = r.exact(torch.tensor([0.5])) * r.exact(torch.tensor([3.0]))
    assert normal.e.item() == r.u * 1.5  # (1 + d) alone above it
    zero = r.exact(torch.tensor([0.0])) * r.exact(torch.tensor([3.0]))
    assert zero.e.item() == 0.0  # an exact 0 stays exact


def test_a_masked_exp_stays_finite_on_the_fast_path(package):
    """The GPU's approximate exp (half types on CUDA) takes (4 + 2.35 |x|) units: infinitely
    many at a masked -inf, whose exp is an exact 0; the subnormal step must not make its bound
    0 * inf = NaN (every bound of a window softmax in float16 on the H100 was NaN so)."""
    testing = importlib.import_module(f"{package}.testing")
    r = testing.Rounding(torch.float16, [1, 3], "cpu")
    r.fast = True  # (the CUDA path's model, on this machine's tensors)
    e = r.exp(r.exact(torch.tensor([-float("inf"), -103.0, 0.0])))
    assert torch.isfinite(e.e).all(), e.e
    assert e.e[0].item() == 2.0**-126  # the fast exp's flushed subnormals, nothing more
