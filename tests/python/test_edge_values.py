"""Values at the edges of a shipped spec's domain, as torch gives them (found by calling the
ops at inputs their generated tests do not draw): logsumexp of a row holding +inf is +inf
(its shift by the row max had made it inf - inf = NaN), of a row of -inf alone -inf, and a
NaN stays NaN."""
import os

import torch

import fusegen

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_logsumexp_of_infinite_rows_is_torchs():
    ops = fusegen.load(os.path.join(ROOT, "specs", "logsumexp.yaml"), name="edge_value_ops",
                       cpu_only=True)
    inf, nan = float("inf"), float("nan")
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        x = torch.tensor([[1.0, inf, 2.0], [-inf, -inf, -inf], [1.0, 2.0, 3.0], [nan, 1.0, 2.0],
                          [-inf, 0.5, -inf]], dtype=dtype)
        torch.testing.assert_close(ops.logsumexp(x), torch.logsumexp(x, -1), equal_nan=True)
