"""Shared Python runtime of the generated ops: op metadata (OpInfo), the fake (meta)
implementations used by torch.compile and opcheck, and the argument checks they share
with the C++ glue (templates/runtime/fusegen_torch.h) -- same rules, same messages, so a
mistake is reported the same way in eager mode and while tracing."""
import dataclasses
from typing import List, Sequence, Tuple

import torch

FULL, COL, ROW, SCALAR = "[..., D]", "[D]", "[...]", "[]"


@dataclasses.dataclass(frozen=True)
class Arg:
    name: str
    shape: str  # one of FULL, COL, ROW, SCALAR


@dataclasses.dataclass(frozen=True)
class Attr:
    name: str
    type: str  # float, int or bool
    default: object


@dataclasses.dataclass(frozen=True)
class OpInfo:
    name: str
    doc: str
    inputs: List[Arg]
    attrs: List[Attr]
    outputs: List[Arg]
    dtypes: List[str]
    saved: List[str] = dataclasses.field(default_factory=list)  # per-row stats for backward

    @property
    def qualname(self) -> str:
        return f"fusegen::{self.name}"

    def torch_dtypes(self) -> List[torch.dtype]:
        return [getattr(torch, d) for d in self.dtypes]

    def full_input(self) -> int:
        return next(i for i, a in enumerate(self.inputs) if a.shape == FULL)

    def attr_defaults(self) -> dict:
        return {a.name: a.default for a in self.attrs if a.default is not None}


_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                torch.float64: "float64"}


def _dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype).replace("torch.", ""))


def _shape(s: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in s) + "]"


def check_arguments(spec: OpInfo, op: str, named: Sequence[Tuple[str, str, torch.Tensor]]
                    ) -> Tuple[List[int], int]:
    """Checks (name, shape class, tensor) triples like fg::glue::prepare; returns the full
    shape and D. Raises RuntimeError naming the argument."""
    full = spec.full_input()
    ref_name, _, ref = named[full]
    has_col = any(cls == COL for _, cls, _ in named)
    for name, _, t in named:
        if t.dtype not in spec.torch_dtypes():
            raise RuntimeError(f"{op}: argument '{name}' has dtype {_dtype_name(t.dtype)}, but this "
                               f"op supports {', '.join(spec.dtypes)}")
        if t.dtype != ref.dtype:
            raise RuntimeError(f"{op}: argument '{name}' has dtype {_dtype_name(t.dtype)}, but "
                               f"'{ref_name}' has dtype {_dtype_name(ref.dtype)}; all tensor "
                               "arguments must have the same dtype")
        if t.device != ref.device:
            raise RuntimeError(f"{op}: argument '{name}' is on {t.device}, but '{ref_name}' is on "
                               f"{ref.device}; all tensor arguments must be on the same device")
    if has_col and ref.dim() == 0:
        raise RuntimeError(f"{op}: argument '{ref_name}' must have at least 1 dim (its last dim is "
                           "D), but is 0-dim")
    D = ref.shape[-1] if ref.dim() else 1
    for name, cls, t in named:
        if cls == FULL and list(t.shape) != list(ref.shape):
            raise RuntimeError(f"{op}: argument '{name}' must have the same shape as '{ref_name}' "
                               f"{_shape(ref.shape)}, but has shape {_shape(t.shape)}")
        if cls == COL and (t.dim() != 1 or t.shape[0] != D):
            raise RuntimeError(f"{op}: argument '{name}' must have shape [D] with D = {D} (the last "
                               f"dim of '{ref_name}'), but has shape {_shape(t.shape)}")
        if cls == ROW and list(t.shape) != list(ref.shape[:-1]):
            raise RuntimeError(f"{op}: argument '{name}' must have shape {_shape(ref.shape[:-1])} "
                               f"(the leading dims of '{ref_name}'), but has shape {_shape(t.shape)}")
        if cls == SCALAR and t.dim() != 0:
            raise RuntimeError(f"{op}: argument '{name}' must be a 0-dim tensor, but has shape "
                               f"{_shape(t.shape)}")
    return list(ref.shape), D


def broadcast(value, *others):
    """`value` broadcast against the tensors among `others`: the reference's with_grad, which is
    as wide as its arguments (docs/spec-language.md). Numbers take no part in the shape."""
    tensors = [t for t in (value, *others) if isinstance(t, torch.Tensor)]
    if not tensors:
        return value
    if not isinstance(value, torch.Tensor):
        value = tensors[0].new_tensor(value)
    return value.expand(torch.broadcast_shapes(*(t.shape for t in tensors)))


def _outputs(spec: OpInfo, ref: torch.Tensor, full_shape: List[int]):
    outs = []
    for o in spec.outputs:
        shape = full_shape[:-1] if o.shape == ROW else full_shape
        outs.append(ref.new_empty(shape))
    outs += [ref.new_empty(full_shape[:-1]) for _ in spec.saved]
    return outs[0] if len(outs) == 1 else tuple(outs)


def fake_forward(spec: OpInfo, tensors: Sequence[torch.Tensor]):
    named = [(a.name, a.shape, t) for a, t in zip(spec.inputs, tensors)]
    full_shape, _ = check_arguments(spec, spec.qualname, named)
    return _outputs(spec, tensors[spec.full_input()], full_shape)


def fake_backward(spec: OpInfo, tensors: Sequence[torch.Tensor], saved: Sequence[torch.Tensor],
                  grads: Sequence[torch.Tensor], output_mask: Sequence[bool]):
    named = [(a.name, a.shape, t) for a, t in zip(spec.inputs, tensors)]
    named += [(f"_saved_{n}", ROW, t) for n, t in zip(spec.saved, saved)]
    named += [(f"_grad_{o.name}", o.shape, g) for o, g in zip(spec.outputs, grads)]
    check_arguments(spec, spec.qualname + "_backward", named)
    out = tuple(t.new_empty(t.shape) if m else t.new_empty(0) for t, m in zip(tensors, output_mask))
    return out[0] if len(out) == 1 else out

