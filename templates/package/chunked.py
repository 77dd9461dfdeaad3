"""The chunked plan: a per-row loss op over the output of a linear layer, logits = x W^T + b,
computed a chunk of rows at a time, so the [rows, V] logits (and their gradient) never exist
whole: for a language model's vocabulary (V = 128256) they are 2 GiB in bf16 at 8192 rows,
against the hidden states' 64 MiB.

Every op whose spec has one [..., D] input (the logits), one per-row output and its other inputs
per row or 0-dim gets it (the emitter decides: linearPlan in emit/Emitters.cpp), as
`linear_<op>(hidden, weight, <its other inputs>, *, <attrs>, bias=None, reduction="mean",
normalizer=None, rows_per_chunk=None)` in its module: the loss reduced over rows (a sum, or the sum divided by the
number of rows or by `normalizer`). Per chunk, the logits come from ATen's matmul (cuBLAS),
the op's forward kernel gives the chunk's losses and the statistics its backward needs, and
the op's backward kernel at once gives the chunk's logit gradients for the reduction's
(known) output gradient; they go into the gradients of x, weight and bias (matmuls again)
before the next chunk. The autograd backward then only scales them by the incoming gradient
of the reduced loss (as Liger-Kernel's fused linear cross-entropy does). The weight's and the
bias's gradients accumulate in their own dtype, chunk by chunk, in row order.

Chunks: as many rows as make the chunk's logits about as large as the hidden states
(rows * H / V, rounded down to a power of 2, at least 1): the plan's peak memory beyond its
inputs and gradients is then about two chunks of logits (the logits and their gradient)."""
import math
from typing import Dict, Optional, Sequence

import torch

from ._support import ROW, OpInfo, op_namespace


def chunk_rows(rows: int, hidden: int, vocab: int) -> int:
    """Rows per chunk: the chunk's logits about the size of the hidden states."""
    target = max(1, (rows * hidden) // max(vocab, 1))
    return min(rows, 1 << int(math.floor(math.log2(target)))) if rows else 1


class _LinearLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, spec, attrs, reduction, normalizer, rows_per_chunk, x, weight, bias,
                *others):
        ops = op_namespace()
        forward_op = getattr(ops, spec.name).default
        backward_op = getattr(ops, spec.name + "_backward").default
        hidden, vocab = x.shape[-1], weight.shape[0]
        lead = x.shape[:-1]
        rows = math.prod(lead)
        x2 = x.reshape(rows, hidden)
        full = spec.full_input()
        rest = iter(others)  # the op's other inputs, in its order; per-row ones flattened
        flat = [None if k == full else next(rest) for k in range(len(spec.inputs))]
        flat = [t.reshape(rows) if t is not None and a.shape == ROW else t
                for a, t in zip(spec.inputs, flat)]
        chunk = rows_per_chunk or chunk_rows(rows, hidden, vocab)
        if reduction == "sum":
            scale = 1.0
        elif normalizer is not None:
            scale = 1.0 / float(normalizer)
        else:
            scale = 1.0 / max(rows, 1)
        # The sum over rows in the compute type (float64 for float64 inputs).
        total = torch.zeros((), dtype=torch.float64 if x.dtype == torch.float64 else torch.float32,
                            device=x.device)
        grad_x = torch.empty_like(x2) if x.requires_grad else None
        grad_w = torch.zeros_like(weight) if weight.requires_grad else None
        grad_b = torch.zeros_like(bias) if bias is not None and bias.requires_grad else None
        n_in = len(spec.inputs)
        mask = [k == full for k in range(n_in)]
        for a in range(0, rows, chunk):
            b = min(a + chunk, rows)
            xc = x2[a:b]
            logits = xc @ weight.t() if bias is None else torch.addmm(bias, xc, weight.t())
            args = [logits if k == full else (t[a:b] if spec.inputs[k].shape == ROW else t)
                    for k, t in enumerate(flat)]
            results = forward_op(*args, **attrs)
            results = results if isinstance(results, tuple) else (results,)
            loss, saved = results[0], results[1:]
            total += loss.to(total.dtype).sum()
            if grad_x is None and grad_w is None and grad_b is None:
                logits = results = loss = saved = None
                continue
            seed = torch.full_like(loss, scale)
            grads = backward_op(seed, *args, *saved, *attrs.values(), mask)
            grad_logits = (grads if isinstance(grads, tuple) else (grads,))[full]
            if grad_x is not None:
                torch.mm(grad_logits, weight, out=grad_x[a:b])
            if grad_w is not None:
                grad_w.addmm_(grad_logits.t(), xc)
            if grad_b is not None:
                grad_b += grad_logits.sum(0).to(grad_b.dtype)
            # Freed before the next chunk's logits exist: two chunks of logits at a time, not
            # three (the names would hold this chunk's until they are bound again). (Rebound
            # to None, not deleted: torch.compile does not trace `del` of these.)
            logits = results = loss = saved = grads = grad_logits = None
        ctx.save_for_backward(
            grad_x.reshape(x.shape) if grad_x is not None else None, grad_w, grad_b)
        ctx.n_others = len(others)
        return total * scale

    @staticmethod
    def backward(ctx, grad):
        grad_x, grad_w, grad_b = ctx.saved_tensors
        # loss.backward(): the gradients as computed, no copy of the weight's. (Under
        # torch.compile the backward is traced ahead, without the value: always scaled.)
        if not torch.compiler.is_compiling() and bool(grad == 1):
            return (None, None, None, None, None, grad_x, grad_w, grad_b,
                    *([None] * ctx.n_others))
        scaled = [None if g is None else g * grad.to(g.dtype) for g in (grad_x, grad_w, grad_b)]
        return (None, None, None, None, None, *scaled, *([None] * ctx.n_others))


def linear_loss(spec: OpInfo, x: torch.Tensor, weight: torch.Tensor,
                others: Sequence[torch.Tensor], attrs: Dict[str, object],
                bias: Optional[torch.Tensor] = None, reduction: str = "mean",
                normalizer=None, rows_per_chunk: Optional[int] = None) -> torch.Tensor:
    """The op's per-row loss of logits = x @ weight.T (+ bias), reduced over rows ("sum", or
    "mean": the sum divided by `normalizer` when given, else by the number of rows), as a
    0-dim tensor in the compute type (float32; float64 for float64 inputs), computed chunk by
    chunk (the module docstring)."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"linear_{spec.name}: reduction must be 'mean' or 'sum', "
                         f"not {reduction!r}")
    if x.dim() < 1 or weight.dim() != 2 or weight.shape[1] != x.shape[-1]:
        raise RuntimeError(f"linear_{spec.name}: argument 'weight' must have shape [V, H] with "
                           f"H = {x.shape[-1] if x.dim() else '?'} (the last dim of 'x'), but "
                           f"has shape {list(weight.shape)}")
    if bias is not None and list(bias.shape) != [weight.shape[0]]:
        raise RuntimeError(f"linear_{spec.name}: argument 'bias' must have shape "
                           f"[{weight.shape[0]}], but has shape {list(bias.shape)}")
    if any(t.requires_grad for t in others):
        raise RuntimeError(f"linear_{spec.name}: the chunked plan gives gradients to x, weight "
                           "and bias only; detach the op's other inputs")
    if rows_per_chunk is not None and rows_per_chunk < 1:
        raise ValueError(f"linear_{spec.name}: rows_per_chunk must be at least 1")
    return _LinearLoss.apply(spec, attrs, reduction, normalizer, rows_per_chunk, x, weight,
                             bias, *others)
