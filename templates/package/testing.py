"""Checks shared by every generated op's tests (generated/<op>/test_<op>.py).

Each check takes the op's OpInfo, the op, its generated reference and the spec's
independent formula, builds random inputs of the right shape classes and asserts. Set
FUSEGEN_REQUIRE_CUDA=1 to make a missing GPU an error instead of a CPU-only run (the GPU
runner does), so a skipped GPU path is never reported as passed."""
import os
from typing import Callable, Dict, List, Sequence

import pytest
import torch

from fusegen_ops._support import COL, FULL, ROW, SCALAR, OpInfo

if os.environ.get("FUSEGEN_REQUIRE_CUDA") == "1" and not torch.cuda.is_available():
    raise RuntimeError("FUSEGEN_REQUIRE_CUDA=1 but torch sees no CUDA device")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
CUDA_DEVICES = ["cuda"] if torch.cuda.is_available() else []  # GPU-sized checks only

# Elementwise tolerances (rtol, atol) of an op's output against a float64 reference.
FORWARD_TOL = {torch.float64: (1e-10, 1e-12), torch.float32: (2e-5, 1e-5),
               torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.6e-2, 1.6e-2)}
# Normwise relative error ||got - want|| / ||want|| allowed for gradients.
GRAD_TOL = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _shape_of(cls: str, lead: Sequence[int], D: int) -> List[int]:
    return {FULL: [*lead, D], COL: [D], ROW: list(lead), SCALAR: []}[cls]


def _misaligned(t: torch.Tensor) -> torch.Tensor:
    """A copy of t whose data pointer is one element past a 16-byte boundary."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    return buf[1:].view(t.shape).copy_(t)


class OpChecks:
    def __init__(self, spec: OpInfo, op: Callable, reference: Callable, independent: Callable):
        self.spec, self.op, self.reference, self.independent = spec, op, reference, independent

    # ---- inputs ----------------------------------------------------------------------
    def inputs(self, lead, D, dtype, device, requires_grad=False, scale=1.0, generator=None):
        out = []
        for a in self.spec.inputs:
            t = torch.randn(_shape_of(a.shape, lead, D), dtype=torch.float64, generator=generator)
            t = (t * scale).to(device=device, dtype=dtype)
            out.append(t.requires_grad_(requires_grad))
        return out

    def attrs(self) -> Dict[str, object]:
        # Attrs without a default get a value of their type.
        return {a.name: (a.default if a.default is not None else {"float": 0.5, "int": 2,
                                                                   "bool": True}[a.type])
                for a in self.spec.attrs}

    def call(self, fn, tensors):
        out = fn(*tensors, **self.attrs())
        return out if isinstance(out, tuple) else (out,)

    def reference64(self, tensors):
        """The generated reference in float64 on the same values."""
        return self.call(self.reference, [t.detach().double() for t in tensors])

    @staticmethod
    def close(got, want, dtype, what):
        rtol, atol = FORWARD_TOL[dtype]
        torch.testing.assert_close(got.double(), want.double(), rtol=rtol, atol=atol,
                                   equal_nan=True, msg=lambda m: f"{what}: {m}")

    @staticmethod
    def close_normwise(got, want, dtype, what, scale=None):
        """||got - want|| <= GRAD_TOL * ||scale||, where scale is want unless given."""
        got, want = got.double(), want.double()
        scale = want if scale is None else scale.double()
        assert got.shape == want.shape, f"{what}: shape {list(got.shape)} != {list(want.shape)}"
        assert torch.isfinite(got).all(), f"{what}: non-finite values"
        err = (got - want).norm() / scale.norm().clamp_min(1e-30)
        assert err <= GRAD_TOL[dtype], f"{what}: relative error {err:.3e} > {GRAD_TOL[dtype]:.1e}"

    def close_grads(self, got, x, grad_outs, dtype, what, ref_dtype=torch.float64):
        """The op's input gradients `got` against the reference's at ref_dtype on the same
        values. The gradient of an input broadcast over rows ([D] or []) is a sum over rows
        whose terms can cancel: a correct sum in another order then differs from the
        reference by more than GRAD_TOL times the small result, so its error is measured
        against the sum of the terms' magnitudes. Those terms are the reference's gradient
        with respect to the input expanded to full size. An input the reference does not
        reach must get zeros or no gradient."""
        xs = [t.detach().to(ref_dtype) for t in x]
        gs = [None if g is None else g.to(ref_dtype) for g in grad_outs]
        want = self.grads(self.reference, xs, gs)
        reduced = [a.shape in (COL, SCALAR) for a in self.spec.inputs]
        full = next((t.shape for a, t in zip(self.spec.inputs, xs) if a.shape == FULL), None)
        scales = list(want)
        if full is not None and any(reduced):
            terms = self.grads(self.reference,
                               [t.expand(full).clone() if r else t for t, r in zip(xs, reduced)], gs)
            scales = [p.abs().sum_to_size(t.shape) if r and p is not None else w
                      for p, t, r, w in zip(terms, xs, reduced, want)]
        for a, g, w, sc in zip(self.spec.inputs, got, want, scales):
            name = f"grad of {a.name}{what}"
            if w is None:
                assert g is None or not g.any(), f"{name}: nonzero, the reference has none"
            else:
                assert g is not None, f"{name}: missing"
                assert g.dtype == x[0].dtype, f"{name}: dtype {g.dtype}"
                self.close_normwise(g, w, dtype, name, sc)

    def grads(self, fn, tensors, grad_outs):
        """Input gradients of fn at tensors; outputs whose grad_out is None are not used."""
        leaves = [t.detach().clone().requires_grad_(True) for t in tensors]
        used = [(o, g) for o, g in zip(self.call(fn, leaves), grad_outs) if g is not None]
        torch.autograd.backward([o for o, _ in used], [g for _, g in used])
        return [t.grad for t in leaves]

    # ---- checks ----------------------------------------------------------------------
    def forward_matches_reference(self, device, dtype):
        for lead, D, scale in [((64,), 96, 1.0), ((3, 5), 40, 3.0), ((17,), 7, 1.0)]:
            x = self.inputs(lead, D, dtype, device, scale=scale)
            got = self.call(self.op, x)
            for o, g, w in zip(self.spec.outputs, got, self.reference64(x)):
                assert g.dtype == dtype and g.device.type == device
                self.close(g, w, dtype, f"{self.spec.name}.{o.name} {dtype} lead={lead} D={D}")
        # Large magnitudes: stable forms must not overflow where the exact value is finite.
        x = self.inputs((4,), 64, torch.float64, device)
        extremes = torch.tensor([-1e5, -1e3, -88.0, -20.0, 0.0, 20.0, 88.0, 1e3, 1e5],
                                dtype=torch.float64)
        for t in x:
            if t.dim() and t.shape[-1] == 64:
                t.view(-1)[: extremes.numel()] = extremes.to(device)
        x = [t.to(dtype) for t in x]
        for o, g, w in zip(self.spec.outputs, self.call(self.op, x), self.reference64(x)):
            w = w.to(dtype)
            finite = torch.isfinite(w)
            assert torch.isfinite(g[finite]).all(), f"{self.spec.name}.{o.name}: overflow at large |x|"
            self.close(g[finite], w[finite], dtype, f"{self.spec.name}.{o.name} {dtype} large |x|")

    def forward_matches_independent(self, device, dtype):
        x = self.inputs((32, 3), 80, dtype, device)
        want = self.independent(*[t.double() for t in x], **self.attrs())
        if want is None:
            pytest.skip("the spec gives no independent `reference:` formula")
        want = want if isinstance(want, tuple) else (want,)
        for o, g, w in zip(self.spec.outputs, self.call(self.op, x), want):
            if w is not None:
                self.close(g, w, dtype, f"{self.spec.name}.{o.name} vs independent formula")

    def backward_matches_reference(self, device, dtype):
        x = self.inputs((48,), 72, dtype, device)
        gouts = [torch.randn_like(o) for o in self.call(self.op, x)]
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, dtype, f" ({dtype})")

    def gradcheck(self, device):
        x = self.inputs((3, 4), 5, torch.float64, device, requires_grad=True)
        attrs = self.attrs()
        assert torch.autograd.gradcheck(lambda *t: self.op(*t, **attrs), x, eps=1e-6, atol=1e-6)

    def partial_gradients(self, device):
        x = self.inputs((6,), 10, torch.float64, device)
        gouts = [torch.randn_like(o) for o in self.call(self.op, x)]
        full = self.grads(self.op, x, gouts)
        for i in range(len(x)):
            leaves = [t.detach().clone().requires_grad_(j == i) for j, t in enumerate(x)]
            torch.autograd.backward(self.call(self.op, leaves), gouts)
            for j, t in enumerate(leaves):
                if j == i:
                    torch.testing.assert_close(t.grad, full[i], rtol=1e-12, atol=1e-12)
                else:
                    assert t.grad is None

    def opcheck(self, device):
        x = self.inputs((4, 3), 16, torch.float32, device, requires_grad=True)
        args = tuple(x) + tuple(self.attrs().values())
        torch.library.opcheck(getattr(torch.ops.fusegen, self.spec.name).default, args)

    def compile_fullgraph(self, device):
        torch._dynamo.reset()
        attrs = self.attrs()

        def f(*t):
            out = self.op(*t, **attrs)
            out = out if isinstance(out, tuple) else (out,)
            return sum((o * 1.5).sum() for o in out)

        compiled = torch.compile(f, fullgraph=True)
        x = self.inputs((8, 4), 24, torch.float32, device)
        leaves_e = [t.clone().requires_grad_(True) for t in x]
        leaves_c = [t.clone().requires_grad_(True) for t in x]
        eager, got = f(*leaves_e), compiled(*leaves_c)
        torch.testing.assert_close(got, eager, rtol=1e-5, atol=1e-5)
        eager.backward()
        got.backward()
        for a, e, c in zip(self.spec.inputs, leaves_e, leaves_c):
            torch.testing.assert_close(c.grad, e.grad, rtol=1e-5, atol=1e-5,
                                       msg=lambda m: f"compiled grad of {a.name}: {m}")

    def leading_dims(self, device, rank):
        lead = [(), (3,), (2, 3), (2, 1, 3)][rank - 1]
        x = self.inputs(lead, 20, torch.float32, device)
        got = self.call(self.op, x)
        for g, w in zip(got, self.reference64(x)):
            assert list(g.shape) == list(w.shape)
            self.close(g, w, torch.float32, f"{self.spec.name} rank {rank}")
        gouts = [torch.randn_like(o) for o in got]
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, torch.float32, f", rank {rank}")

    def non_contiguous(self, device):
        lead, D = (12,), 18
        x = []
        for a, t in zip(self.spec.inputs, self.inputs(lead, D, torch.float32, device)):
            if a.shape == FULL:
                t = t.t().contiguous().t()  # same values, column-major strides
                assert not t.is_contiguous()
            elif a.shape == COL:
                t = torch.stack([t, t], dim=1)[:, 0]  # stride 2
                assert not t.is_contiguous()
            x.append(t)
        for g, w in zip(self.call(self.op, x), self.reference64(x)):
            self.close(g, w, torch.float32, f"{self.spec.name} non-contiguous")
        gouts = [torch.randn_like(o).t().contiguous().t() if o.dim() == 2 else torch.randn_like(o)
                 for o in self.call(self.op, x)]
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, torch.float32, ", non-contiguous")

    def empty(self, device):
        for lead, D in [((0,), 8), ((2, 0), 8), ((3,), 0)]:
            x = self.inputs(lead, D, torch.float32, device, requires_grad=True)
            outs = self.call(self.op, x)
            for o, spec_out in zip(outs, self.spec.outputs):
                want = list(lead) if spec_out.shape == ROW else [*lead, D]
                assert list(o.shape) == want, f"{spec_out.name}: shape {list(o.shape)} != {want}"
            if D > 0 or not self.spec.saved:  # torch's own max/amax reject empty rows
                for o, w in zip(outs, self.reference64(x)):
                    torch.testing.assert_close(o.double(), w, equal_nan=True)
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
            for t in x:
                assert t.grad.shape == t.shape
                assert (t.grad == 0).all()  # a sum over no elements

    def odd_sizes(self, device):
        # D not a multiple of the vector width, and views whose data pointer is misaligned,
        # take the scalar paths of the kernels.
        # up to D = 65536: rows that do not fit in registers take the re-reading row plan
        for lead, D in [((5,), 1), ((5,), 7), ((5,), 33), ((5,), 1023), ((2,), 65535), ((3,), 65536)]:
            x = self.inputs(lead, D, torch.float16, device)
            for g, w in zip(self.call(self.op, x), self.reference64(x)):
                self.close(g, w, torch.float16, f"{self.spec.name} D={D}")
        x = [_misaligned(t) for t in self.inputs((9,), 64, torch.bfloat16, device)]
        gouts = [torch.randn_like(o) for o in self.call(self.op, x)]
        for g, w in zip(self.call(self.op, x), self.reference64(x)):
            self.close(g, w, torch.bfloat16, f"{self.spec.name} misaligned")
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, torch.bfloat16, ", misaligned")
        # Aligned inputs, misaligned output gradients: the backward's vector width, and with
        # it the size of the [D] partial sums, follows the gradients too.
        x = self.inputs((300,), 64, torch.bfloat16, device)
        gouts = [_misaligned(torch.randn_like(o)) for o in self.call(self.op, x)]
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, torch.bfloat16,
                         ", misaligned output gradient")

    def wrong_arguments(self, device):
        name = self.spec.qualname
        good = self.inputs((4,), 8, torch.float32, device)
        for i, a in enumerate(self.spec.inputs):
            bad = list(good)
            bad[i] = good[i].to(torch.int32)
            with pytest.raises(RuntimeError, match=rf"{name}: argument '{a.name}' has dtype int32, "
                                                   "but this op supports"):
                self.call(self.op, bad)
            # A mismatch with the input that defines D is reported on the other argument.
            culprit = a.name if i != self.spec.full_input() else r"\w+"
            if len(good) > 1:
                bad[i] = good[i].double()
                with pytest.raises(RuntimeError, match=rf"argument '{culprit}' has dtype float\d+, "
                                                       "but .* must have the same dtype"):
                    self.call(self.op, bad)
            if a.shape in (FULL, COL):
                # One more column. Changing D of the input that defines it is a mismatch only
                # for the other inputs whose shape holds D ([..., D] and [D] ones); with none
                # (e.g. x [..., D] and s [...]) the op takes the new D.
                bad[i] = torch.cat([good[i], good[i][..., :1]], dim=-1)
                holds_D = [j for j, b in enumerate(self.spec.inputs) if j != i and b.shape in (FULL, COL)]
                if i != self.spec.full_input() or holds_D:
                    with pytest.raises(RuntimeError, match=rf"argument '{culprit}' must have"):
                        self.call(self.op, bad)
                else:
                    self.call(self.op, bad)  # accepted
            elif a.shape == ROW:  # one more row than the [..., D] inputs
                bad[i] = torch.cat([good[i], good[i][:1]])
                with pytest.raises(RuntimeError, match=rf"argument '{a.name}' must have shape"):
                    self.call(self.op, bad)
            elif a.shape == SCALAR:
                bad[i] = good[i].reshape(1)
                with pytest.raises(RuntimeError, match=rf"argument '{a.name}' must be a 0-dim"):
                    self.call(self.op, bad)
            if device == "cuda" and len(good) > 1:
                bad[i] = good[i].cpu()
                with pytest.raises(RuntimeError, match=r"argument '.*' is on .*; all tensor "
                                                       "arguments must be on the same device"):
                    self.call(self.op, bad)

    def benchmark_shape(self, device):
        """The benchmark's shape, (8, 4096, 4096) in bfloat16, against the reference in fp32."""
        self.bf16_against_fp32(self.inputs((8, 4096), 4096, torch.bfloat16, device),
                               "at 8x4096x4096")

    def bf16_against_fp32(self, x, where):
        """Outputs and gradients of bf16 inputs x against the reference run in fp32."""
        got = self.call(self.op, x)
        want = self.call(self.reference, [t.float() for t in x])
        for o, g, w in zip(self.spec.outputs, got, want):
            self.close_normwise(g, w, torch.bfloat16, f"{self.spec.name}.{o.name} {where}")
        gouts = [torch.randn_like(o) for o in got]
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, torch.bfloat16, f" {where}",
                         ref_dtype=torch.float32)

    def row_lengths(self, device):
        """bf16 rows of every length class the CUDA plans pick a different launch
        configuration for (vectors per thread, threads per row: 32 to 1024 threads, rows kept
        in registers or re-read), outputs and gradients against the reference in fp32."""
        for D in (256, 1024, 4096, 8192, 16384, 32768):
            self.bf16_against_fp32(self.inputs((3,), D, torch.bfloat16, device), f"at D={D}")

    def one_output_used(self, device):
        """Backward through each output alone (ops with several): the other outputs'
        gradients are undefined and must count as zeros. An input the reference does not
        reach from that output (no gradient there) must get zeros or no gradient."""
        x = self.inputs((5,), 12, torch.float32, device)
        outs = self.call(self.op, x)
        for m, out in enumerate(self.spec.outputs):
            gouts = [torch.ones_like(o) if i == m else None for i, o in enumerate(outs)]
            self.close_grads(self.grads(self.op, x, gouts), x, gouts, torch.float32,
                             f" through {out.name} alone")

    def index_beyond_2_31(self, device):
        """[..., D] tensors of 2^31 + 2 * 4096 bf16 elements, so element offsets need 64 bits:
        the outputs and the gradients of the first and last rows against the reference on
        those rows, and the [D] and [] gradients (sums over all rows) against the reference
        accumulated in float32 over chunks of rows."""
        D = 4096
        rows = 2**31 // D + 2
        lead = (rows,)
        dtype = torch.bfloat16
        shapes = [_shape_of(a.shape, lead, D) for a in self.spec.inputs]
        x = [torch.randn(s, dtype=dtype, device=device).requires_grad_(True) for s in shapes]
        outs = self.call(self.op, x)
        gouts = [torch.randn_like(o) for o in outs]
        torch.autograd.backward(outs, gouts)

        def rows_of(ts, a, b, args):
            return [t.detach()[a:b] if cls in (FULL, ROW) else t.detach()
                    for t, cls in zip(ts, args)]

        out_cls = [o.shape for o in self.spec.outputs]
        chunk = 1 << 15
        summed = [None] * len(x)  # reference [D] / [] gradients, float32
        for a in range(0, rows, chunk):
            b = min(a + chunk, rows)
            xs = [t.float() for t in rows_of(x, a, b, [i.shape for i in self.spec.inputs])]
            gs = [g.float() for g in rows_of(gouts, a, b, out_cls)]
            want_g = self.grads(self.reference, xs, gs)
            edge = a == 0 or b == rows
            if edge:
                got = [o.detach()[a:b] if cls in (FULL, ROW) else o
                       for o, cls in zip(outs, out_cls)]
                for o, g, w in zip(self.spec.outputs, got, self.call(self.reference, xs)):
                    self.close_normwise(g, w, dtype, f"{self.spec.name}.{o.name}, rows {a}:{b}")
            for i, (arg, w) in enumerate(zip(self.spec.inputs, want_g)):
                if arg.shape in (FULL, ROW):
                    if edge:
                        self.close_normwise(x[i].grad[a:b], w, dtype,
                                            f"grad of {arg.name}, rows {a}:{b}")
                else:
                    summed[i] = w if summed[i] is None else summed[i] + w
        for i, arg in enumerate(self.spec.inputs):
            if summed[i] is not None:
                self.close_normwise(x[i].grad, summed[i], dtype,
                                    f"grad of {arg.name} (sum over {rows} rows)")

    def deterministic_backward(self, device):
        lead, D = ((2048,), 512) if device == "cuda" else ((256,), 64)
        x = self.inputs(lead, D, torch.float32, device)
        gouts = [torch.randn_like(o) for o in self.call(self.op, x)]
        first = self.grads(self.op, x, gouts)
        second = self.grads(self.op, x, gouts)
        for a, f, s in zip(self.spec.inputs, first, second):
            assert torch.equal(f, s), f"grad of {a.name} differs between two identical runs"
