"""Shared Python runtime of the generated ops: op metadata (OpInfo), the fake (meta)
implementations used by torch.compile and opcheck, and the argument checks they share
with the C++ glue (templates/runtime/fusegen_run.h) -- same rules, same messages, so a
mistake is reported the same way in eager mode and while tracing -- the batching rules
of torch.vmap (register_vmap) and the sharding rules of DTensor (register_sharding)."""
import dataclasses
import functools
import importlib.abc
import math
import sys
import warnings
from typing import List, Optional, Sequence, Tuple

import torch

from ._names import NAMESPACE, PACKAGE  # noqa: F401  (PACKAGE: for the package's modules)


def op_namespace():
    """torch.ops.<the package's namespace>: the ops this package registers."""
    return getattr(torch.ops, NAMESPACE)


FULL, COL, ROW, SCALAR = "[..., D]", "[D]", "[...]", "[]"
STAT = "stat"  # a per-row statistic the forward saves for the backward: ROW, in the compute type
TOTAL = "total"  # a whole-tensor value the forward saves for the backward: SCALAR, compute type
COLSTAT = "colstat"  # a [D] statistic the forward saves for the backward: COL, compute type


# Named leading dims (a spec's `x: [..., S, H, D]`): an input may omit some of the op's dims
# (`cos: [S, D]`) and is broadcast over them. Its shape is spelled as the spec writes it, a
# class of its own ("mapped"); the op's dims are OpInfo.dims.
def parse_shape(cls: str) -> Tuple[bool, List[str], bool]:
    """(has the batch '...', the named dims, has D) of a shape spelling."""
    parts = [p.replace(" ", "") for p in cls.strip("[]").split(",") if p.strip()]
    has_d = bool(parts) and (parts[-1] == "D" or parts[-1].endswith("*D"))
    return parts[:1] == ["..."], [p for p in parts if p != "..." and not p.endswith("D")], has_d


def chunks_of(cls: str) -> int:
    """A packed input's chunks (its shape [..., n*D]: n); 1 for every other shape."""
    last = cls.strip("[]").split(",")[-1].replace(" ", "")
    return int(last[:-2]) if last.endswith("*D") else 1


def full_like(cls: str) -> bool:
    """Whether cls is per element of the op's rows: [..., D], or packed [..., n*D]."""
    return cls == FULL or chunks_of(cls) > 1


def is_mapped(cls: str) -> bool:
    """Whether cls is the shape of an input that omits some of the op's leading dims."""
    return cls not in (FULL, COL, ROW, SCALAR, STAT, TOTAL, COLSTAT, "rng") and chunks_of(cls) == 1


def mapped_shape(cls: str, sizes: Sequence[int], dims: Sequence[str], D: int) -> List[int]:
    """The shape of a mapped input, from the named dims' sizes and D."""
    _, named, has_d = parse_shape(cls)
    return [int(sizes[i]) for i, d in enumerate(dims) if d in named] + ([int(D)] if has_d else [])


def align(t: torch.Tensor, cls: str, dims: Sequence[str]) -> torch.Tensor:
    """A mapped input as a view broadcasting against the op's [..., *dims, D] (per-row ones
    against [..., *dims, 1], as the references hold per-row values)."""
    _, named, has_d = parse_shape(cls)
    if not has_d:
        t = t.unsqueeze(-1)
    k = len(dims)
    for i in reversed(range(k)):
        if dims[i] not in named:
            t = t.unsqueeze(-(k - 1 - i) - 2)
    return t


def position(like: torch.Tensor, dims: Sequence[str], i: int) -> torch.Tensor:
    """pos(dims[i]): the index along named dim i, as int64 broadcasting against the op's
    [..., *dims, D] (like: a tensor of that shape)."""
    k = len(dims)
    n = like.shape[like.dim() - 1 - k + i]
    return torch.arange(n, device=like.device).view([n] + [1] * (k - i))


def reduce_to(g: torch.Tensor, cls: str, full: Sequence[int], dims: Sequence[str]) -> torch.Tensor:
    """A value broadcast against the op's full shape (per-row: [..., 1]) summed over the
    leading dims a mapped input omits: its gradient, in its shape."""
    _, named, has_d = parse_shape(cls)
    k = len(dims)
    shape = list(full) if has_d else list(full[:-1]) + [1]
    g = torch.broadcast_to(g, shape)
    lead = len(full) - 1 - k
    sums = list(range(lead)) + [lead + i for i in range(k) if dims[i] not in named]
    if sums:  # (sum over an empty list of dims would sum everything)
        g = g.sum(dim=sums)
    return g if has_d else g.squeeze(-1)


@dataclasses.dataclass(frozen=True)
class Arg:
    name: str
    shape: str  # one of FULL, COL, ROW, SCALAR, or a mapped input's spelling ("[S, D]")
    # An integer or bool input's dtype (int64, int32, int8, uint8, bool), or an output's own
    # type (float32, float8_e4m3fn, float8_e5m2: no gradient flows through it); None: the op's
    # dtype.
    dtype: str = None
    # An input's declared values (the spec's `range: [lo, hi]`), which the tests and
    # benchmarks draw it from (an integer input's from lo to hi, both included); None: N(0, 1)
    # for a float input, by its type for an integer one (random_typed).
    range: Tuple[float, float] = None

    @property
    def differentiable(self) -> bool:
        return self.dtype is None

    def torch_dtype(self, op_dtype: torch.dtype) -> torch.dtype:
        return op_dtype if self.dtype is None else getattr(torch, self.dtype)


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
    saved_totals: List[str] = dataclasses.field(default_factory=list)  # whole-tensor values
    saved_columns: List[str] = dataclasses.field(default_factory=list)  # [D] batch statistics
    over_rows: bool = False  # reduces over the rows, per column (colsum): values of the batch
    # A value depends on every row of the call (a column statistic, a whole-tensor value, the
    # row count): vmap calls it per sample, DTensor shards no leading dim.
    reads_all_rows: bool = False
    # Every column computed from its own (no reduction over the row, move, column index or
    # packed chunks): the last dim may be sharded (DTensor).
    columns_independent: bool = False
    positions: List[str] = dataclasses.field(default_factory=list)  # named dims pos() reads
    schema: str = ""  # the op's and its backward's schemas, as fusegen spelled them
    backward_schema: str = ""
    column: bool = False  # a program reads the column index j (D <= 2^24 in float32)
    even_d: str = ""  # what it moves that needs an even D (swap_halves, swap_pairs), or ""
    # A with_surrogate_grad states a gradient that is not the forward's derivative (a
    # straight-through estimator): no finite differences of the forward check it.
    surrogate_gradient: bool = False
    # It rolls columns (roll(x, k)): the int attrs its shifts read (empty: literal shifts); None:
    # it does not roll.
    rolls: Optional[List[str]] = None
    dims: List[str] = dataclasses.field(default_factory=list)  # named leading dims, outermost first
    random: int = 0  # random streams drawn (rand, dropout): a generator argument, rng state
    # Autograd (register_forward_autograd, a stable ABI build): per input, whether the backward
    # reads it (else a placeholder of its shape is saved), and the differentiable output whose
    # incoming gradient is its gradient unchanged (-1: none).
    save_inputs: List[bool] = dataclasses.field(default_factory=list)
    passthrough: List[int] = dataclasses.field(default_factory=list)

    @property
    def qualname(self) -> str:
        return f"{NAMESPACE}::{self.name}"

    def torch_dtypes(self) -> List[torch.dtype]:
        return [getattr(torch, d) for d in self.dtypes]

    def full_input(self) -> int:
        """The input whose shape is the outputs': the first float [..., D] input, else the
        first [..., D] one (int8 values scaled by a float [...] input)."""
        fulls = [i for i, a in enumerate(self.inputs) if full_like(a.shape)]
        return next((i for i in fulls if self.inputs[i].dtype is None), fulls[0])

    def dtype_input(self) -> int:
        """The input whose dtype is the op's: the full input where it is float, else the first
        float input."""
        full = self.full_input()
        if self.inputs[full].dtype is None:
            return full
        return next(i for i, a in enumerate(self.inputs) if a.dtype is None)

    def differentiable_outputs(self) -> List[Arg]:
        """The outputs the backward takes gradients of, in order."""
        return [o for o in self.outputs if o.differentiable]

    def attr_defaults(self) -> dict:
        return {a.name: a.default for a in self.attrs if a.default is not None}


_DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
                torch.float64: "float64"}


def random_typed(a: Arg, shape: Sequence[int], D: int, device="cpu", generator=None
                 ) -> torch.Tensor:
    """Random values of an integer or bool input (the tests' and benchmarks' inputs): integers
    in its declared range (lo to hi, both included), else in [0, D) (class indices, positions
    along the last dim) within the type's range, int8 ones of either sign (quantized values:
    [-min(D, 128), min(D, 128))); bools fair coin flips."""
    if a.dtype == "bool":
        return (torch.rand(shape, generator=generator) < 0.5).to(device)
    dtype = getattr(torch, a.dtype)
    if a.range is not None:
        low, high = int(a.range[0]), int(a.range[1]) + 1
    else:
        high = min(max(D, 1), torch.iinfo(dtype).max + 1)
        low = -high if dtype == torch.int8 else 0
    return torch.randint(low, high, list(shape), generator=generator, dtype=dtype).to(device)


def random_float(a: Arg, shape: Sequence[int], dtype=torch.float64, device="cpu", generator=None,
                 scale: float = 1.0) -> torch.Tensor:
    """Random values of a float input (the tests' and benchmarks' inputs): uniform inside its
    declared range, else N(0, 1) times scale. With a (CPU) generator drawn in float64 and then
    rounded to dtype; without, on the device in dtype (tensors of 2^31 elements)."""
    where = {"dtype": torch.float64} if generator is not None else {"dtype": dtype,
                                                                      "device": device}
    if a.range is not None:
        lo, hi = a.range
        t = torch.rand(list(shape), generator=generator, **where).mul_(hi - lo).add_(lo)
    else:
        t = torch.randn(list(shape), generator=generator, **where)
        if scale != 1.0:
            t.mul_(scale)
    return t.to(device=device, dtype=dtype)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the kernels compute in and store the saved statistics in (computeType in
    fusegen_run.h): float32 for the half types."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _dtype_name(dtype: torch.dtype) -> str:
    return _DTYPE_NAMES.get(dtype, str(dtype).replace("torch.", ""))


def _shape(s: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in s) + "]"


def check_arguments(spec: OpInfo, op: str, named: Sequence[Tuple[str, str, torch.Tensor]]
                    ) -> Tuple[List[int], int]:
    """Checks (name, shape class, tensor) triples like fg::glue::prepare; returns the full
    shape and D. Raises RuntimeError naming the argument."""
    full = spec.full_input()
    ref_name, _, ref = named[full][:3]
    type_name, _, type_ref = named[spec.dtype_input()][:3]
    has_col = any(n[1] in (COL, COLSTAT) for n in named)
    for name, cls, t, *fixed in named:
        if fixed and fixed[0] is not None:  # an integer or bool input: its own dtype
            if t.dtype != getattr(torch, fixed[0]):
                raise RuntimeError(f"{op}: argument '{name}' has dtype {_dtype_name(t.dtype)}, but "
                                   f"must have dtype {fixed[0]}")
        elif cls in (STAT, TOTAL, COLSTAT):
            if t.dtype != compute_dtype(type_ref.dtype):
                raise RuntimeError(f"{op}: argument '{name}' has dtype {_dtype_name(t.dtype)}, but "
                                   f"must have dtype {_dtype_name(compute_dtype(type_ref.dtype))} "
                                   f"(the compute type of '{type_name}', "
                                   f"{_dtype_name(type_ref.dtype)})")
        elif t.dtype not in spec.torch_dtypes():
            raise RuntimeError(f"{op}: argument '{name}' has dtype {_dtype_name(t.dtype)}, but this "
                               f"op supports {', '.join(spec.dtypes)}")
        elif t.dtype != type_ref.dtype:
            raise RuntimeError(f"{op}: argument '{name}' has dtype {_dtype_name(t.dtype)}, but "
                               f"'{type_name}' has dtype {_dtype_name(type_ref.dtype)}; all tensor "
                               "arguments must have the same dtype")
        if t.device != ref.device:
            raise RuntimeError(f"{op}: argument '{name}' is on {t.device}, but '{ref_name}' is on "
                               f"{ref.device}; all tensor arguments must be on the same device")
    if has_col and ref.dim() == 0:
        raise RuntimeError(f"{op}: argument '{ref_name}' must have at least 1 dim (its last dim is "
                           "D), but is 0-dim")
    D = ref.shape[-1] if ref.dim() else 1
    n = chunks_of(spec.inputs[full].shape)
    if n > 1:  # a packed full input: [..., n*D]
        if ref.dim() == 0 or D % n:
            raise RuntimeError(f"{op}: argument '{ref_name}' is packed ([..., {n}*D]): its last dim "
                               f"must be a multiple of {n}, but its shape is {_shape(ref.shape)}")
        D //= n
    if spec.even_d and D % 2:
        raise RuntimeError(f"{op}: the last dim of '{ref_name}' is {D}; this op "
                           f"{spec.even_d}, which needs an even last dim")
    k = len(spec.dims)
    if k and ref.dim() < k + 1:
        raise RuntimeError(f"{op}: argument '{ref_name}' must have at least {k + 1} dims "
                           f"[..., {', '.join(spec.dims)}, D], but has shape {_shape(ref.shape)}")
    sizes = list(ref.shape[ref.dim() - 1 - k:-1]) if k else []
    for name, cls, t, *_ in named:
        if is_mapped(cls):
            _, dims_of, has_d = parse_shape(cls)
            want = mapped_shape(cls, sizes, spec.dims, D)
            if t.dim() != len(want):
                raise RuntimeError(f"{op}: argument '{name}' must have shape {cls} = {_shape(want)} "
                                   f"(from '{ref_name}' {_shape(ref.shape)}), but has shape "
                                   f"{_shape(t.shape)}")
            for j, d in enumerate(dims_of):
                if t.shape[j] != want[j]:
                    raise RuntimeError(f"{op}: argument '{name}' has {d} = {t.shape[j]} (dim {j} of "
                                       f"{_shape(t.shape)}) where '{ref_name}' has {d} = {want[j]}")
            if has_d and t.shape[-1] != D:
                raise RuntimeError(f"{op}: argument '{name}' has D = {t.shape[-1]} (its last dim) "
                                   f"where '{ref_name}' has D = {D}")
        if full_like(cls) and (chunks_of(cls) > 1 or n > 1):
            want = list(ref.shape[:-1]) + [chunks_of(cls) * D]
            if list(t.shape) != want:
                times = f"{chunks_of(cls)} x " if chunks_of(cls) > 1 else ""
                raise RuntimeError(f"{op}: argument '{name}' must have shape {_shape(want)} (the "
                                   f"leading dims of '{ref_name}' and {times}D = {D}), but has "
                                   f"shape {_shape(t.shape)}")
            continue
        if cls == FULL and list(t.shape) != list(ref.shape):
            raise RuntimeError(f"{op}: argument '{name}' must have the same shape as '{ref_name}' "
                               f"{_shape(ref.shape)}, but has shape {_shape(t.shape)}")
        if cls in (COL, COLSTAT) and (t.dim() != 1 or t.shape[0] != D):
            raise RuntimeError(f"{op}: argument '{name}' must have shape [D] with D = {D} (the last "
                               f"dim of '{ref_name}'), but has shape {_shape(t.shape)}")
        if cls in (ROW, STAT) and list(t.shape) != list(ref.shape[:-1]):
            raise RuntimeError(f"{op}: argument '{name}' must have shape {_shape(ref.shape[:-1])} "
                               f"(the leading dims of '{ref_name}'), but has shape {_shape(t.shape)}")
        if cls in (SCALAR, TOTAL) and t.dim() != 0:
            raise RuntimeError(f"{op}: argument '{name}' must be a 0-dim tensor, but has shape "
                               f"{_shape(t.shape)}")
    return list(ref.shape[:-1]) + [D] if ref.dim() else [], D


# What the Python function of an op takes for its first [..., D] input to run the op on each of
# several tensors (a name of its own: a spec's input may be named `list`).
SEVERAL = (list, tuple)


def colsum(value: torch.Tensor) -> torch.Tensor:
    """colsum: the sum over the rows of a [..., D] value, per column ([D])."""
    return value.reshape(-1, value.shape[-1]).sum(0) if value.dim() else value


def over_rows(value, like: torch.Tensor, per_row: bool = False) -> torch.Tensor:
    """The argument of a reduction over rows (sum_all, max_all, colsum, ...) broadcast over
    every row of the op (like: its full input): a value of some of its named dims alone (a
    mask from lengths [S] against x [..., S, D]) is the same in each batch and head, and a sum
    over the op's rows counts it once per row, as the kernels do. per_row: a per-row value
    ([..., 1]); else one per element ([..., D])."""
    value = torch.as_tensor(value, device=like.device)
    last = 1 if per_row else (value.shape[-1] if value.dim() else like.shape[-1])
    return value.expand(list(like.shape[:-1]) + [last])


def rows_of(t: torch.Tensor) -> int:
    """The number of rows of an op's [..., D] input (`rows` in formulas): the product of its
    leading dims."""
    return math.prod(t.shape[:-1]) if t.dim() else 1


def where_uniform(cond, a, b):
    """torch.where(cond, a, b) for a condition of numbers alone (a test of D or of an attr), by
    Python's own test, which torch.compile guards on: the branch taken, as a tensor broadcast
    against the other branch's shape where either is one (a number stays a number if both are)."""
    pick, other = (a, b) if cond else (b, a)
    if not isinstance(pick, torch.Tensor) and not isinstance(other, torch.Tensor):
        return pick
    if not isinstance(pick, torch.Tensor):
        pick = other.new_tensor(pick)
    shape = torch.broadcast_shapes(pick.shape, other.shape if isinstance(other, torch.Tensor)
                                   else ())
    return pick.expand(shape)


def broadcast(value, *others):
    """`value` broadcast against the tensors among `others`: the reference's with_grad, which is
    as wide as its arguments (docs/spec-language.md). Numbers take no part in the shape."""
    tensors = [t for t in (value, *others) if isinstance(t, torch.Tensor)]
    if not tensors:
        return value
    if not isinstance(value, torch.Tensor):
        value = tensors[0].new_tensor(value)
    return value.expand(torch.broadcast_shapes(*(t.shape for t in tensors)))


def clamp(x, lo, hi):
    """The reference's clamp: torch.clamp with x broadcast against the bounds first (its result
    has x's shape) and number bounds as 0-dim float64 tensors on x's device (its Tensor
    overload takes no CPU scalars on CUDA; 0-dim, they do not change x's dtype)."""
    t = torch.as_tensor(broadcast(x, lo, hi))
    return torch.clamp(t, *(_exact(v, t.device) for v in (lo, hi)))


def _exact(v, device):
    """A tensor, on device; a number, as a 0-dim float64 tensor there: exact, and 0-dim so
    that it does not change the other operands' dtype (torch.as_tensor(0.1) is float32: 0.1
    rounded, which the kernels do not)."""
    return v.to(device) if isinstance(v, torch.Tensor) else torch.tensor(
        v, dtype=torch.float64, device=device)


def exact_operands(a, b):
    """Two operands of a torch function that takes tensors (torch.minimum, torch.maximum),
    either of them a number (_exact, on the other's device)."""
    device = next((t.device for t in (a, b) if isinstance(t, torch.Tensor)), None)
    return _exact(a, device), _exact(b, device)


class _Surrogate(torch.autograd.Function):
    """with_surrogate_grad(value, x, dx): value broadcast with x and dx, whose gradient in x is
    dx (summed to x's shape) and none in value or dx, as the derived backward's rule says. dx
    keeps its history, so the second derivatives go through it as fusegen's do."""
    generate_vmap_rule = True

    @staticmethod
    def forward(value, x, dx):
        return torch.as_tensor(broadcast(value, x, dx)).clone()

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, x, dx = inputs
        ctx.x_shape = x.shape if isinstance(x, torch.Tensor) else None
        ctx.dx_number = None if isinstance(dx, torch.Tensor) else dx
        ctx.save_for_backward(dx if isinstance(dx, torch.Tensor) else None)

    @staticmethod
    def backward(ctx, grad):
        if ctx.x_shape is None:
            return None, None, None
        (dx,) = ctx.saved_tensors
        gx = grad * (ctx.dx_number if dx is None else dx)
        return None, gx.sum_to_size(ctx.x_shape), None


def surrogate(value, x, dx):
    """The reference's with_surrogate_grad (docs/spec-language.md)."""
    return _Surrogate.apply(value, x, dx)


def integer_values(value: torch.Tensor, t: torch.dtype) -> torch.Tensor:
    """value as an integer output of type t takes it, still floating: rounded to the nearest
    integer (halves to even), saturated to t's range, NaN as 0 (fusegen_runtime.h toInteger)."""
    info = torch.iinfo(t)
    top = float(info.max) + 1  # (2^(bits-1), or 256 for uint8: exact)
    r = torch.round(value)
    r = torch.where(r.isnan(), 0.0, r).clamp(min=float(info.min))
    return torch.where(r >= top, float(info.max), r)


def to_output(value: torch.Tensor, dtype: str) -> torch.Tensor:
    """value stored as an output of its own type, as the kernels store it: float32, FP8
    saturated (beyond the largest finite value, the largest of its sign; NaN stays NaN), an
    integer type (integer_values) or bool (value != 0, NaN true)."""
    t = getattr(torch, dtype)
    if t == torch.bool:
        return value != 0
    if not t.is_floating_point:
        r = integer_values(value.double(), t)
        big = r >= float(torch.iinfo(t).max)  # (int64's largest is not a float64)
        return torch.where(big, torch.iinfo(t).max, torch.where(big, 0.0, r).to(t))
    if t.is_floating_point and torch.finfo(t).bits == 8:
        top = torch.finfo(t).max
        value = torch.where(value.isnan(), value, value.clamp(-top, top))
    return value.to(t)


def _outputs(spec: OpInfo, ref: torch.Tensor, full_shape: List[int]):
    outs = []
    for o in spec.outputs:
        shape = (full_shape[:-1] if o.shape == ROW else [] if o.shape == SCALAR
                 else full_shape[-1:] if o.shape == COL else full_shape)
        if chunks_of(o.shape) > 1:  # cat(...): [..., n*D]
            shape = full_shape[:-1] + [chunks_of(o.shape) * full_shape[-1]]
        outs.append(ref.new_empty(shape, dtype=o.torch_dtype(ref.dtype)))
    outs += [ref.new_empty(full_shape[:-1], dtype=compute_dtype(ref.dtype)) for _ in spec.saved]
    outs += [ref.new_empty([], dtype=compute_dtype(ref.dtype)) for _ in spec.saved_totals]
    outs += [ref.new_empty(full_shape[-1:], dtype=compute_dtype(ref.dtype))
             for _ in spec.saved_columns]
    if spec.random:
        outs.append(ref.new_empty(2, dtype=torch.int64))  # the seed and offset drawn with
    return outs[0] if len(outs) == 1 else tuple(outs)


# ---- random numbers: the kernels' Philox stream (fusegen_runtime.h), in PyTorch ---------
# The generated references draw what the kernels draw, so a test compares a dropout's output
# and gradient element by element: draw_rng takes (seed, offset) from the generator as the
# C++ glue does (fusegen_torch.h drawRng), uniform computes Philox 4x32-10 of each element.
_M0, _M1, _W0, _W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85
_MASK32 = 0xFFFFFFFF


def draw_rng(spec: OpInfo, like: torch.Tensor, generator=None) -> torch.Tensor:
    """(seed, offset) as int64 [2] on like's device, taken from `generator` (else the device's
    default) exactly as the op's forward takes them, advancing the generator the same way."""
    if like.device.type == "cuda":
        g = generator if generator is not None else \
            torch.cuda.default_generators[like.device.index or 0]
        seed, offset = g.initial_seed(), g.get_offset()
        g.set_offset(offset + (4 * spec.random + 3) // 4 * 4)
    else:
        seed = int(torch.empty((), dtype=torch.int64).random_(generator=generator))
        offset = 0
    if seed >= 1 << 63:
        seed -= 1 << 64
    return torch.tensor([seed, offset], dtype=torch.int64, device=like.device)


def _mulhilo(a: int, b: torch.Tensor):
    p = b * a  # int64 wraps: the low 64 bits of the product are exact
    return (p >> 32) & _MASK32, p & _MASK32


def uniform(rng: torch.Tensor, stream: int, like: torch.Tensor, first_row: int = 0
            ) -> torch.Tensor:
    """Random stream `stream`'s numbers in [0, 1) for the elements of `like` (row-major over
    the op's [rows, D]; `first_row`: like's rows start there), as the kernels draw them:
    element e takes word e % 4 of Philox block (counter (offset / 4 + stream, e / 4), key
    seed), as (word >> 8) 2^-24. float64 (float32 where like is a half type)."""
    seed, offset = (int(v) for v in rng.cpu())
    seed &= (1 << 64) - 1
    D = like.shape[-1] if like.dim() else 1
    e = torch.arange(like.numel(), dtype=torch.int64, device=like.device) + first_row * D
    block, lane = e // 4, e % 4
    c = (offset // 4 + stream) & ((1 << 64) - 1)
    c0 = torch.full_like(e, c & _MASK32)
    c1 = torch.full_like(e, c >> 32)
    c2, c3 = block & _MASK32, (block >> 32) & _MASK32
    k0, k1 = seed & _MASK32, seed >> 32
    for _ in range(10):
        hi0, lo0 = _mulhilo(_M0, c0)
        hi1, lo1 = _mulhilo(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + _W0) & _MASK32, (k1 + _W1) & _MASK32
    words = torch.stack([c0, c1, c2, c3], -1).gather(-1, lane.unsqueeze(-1)).squeeze(-1)
    dtype = torch.float64 if like.dtype == torch.float64 or not like.is_floating_point() \
        else torch.float32
    return ((words >> 8).to(dtype) * 2.0 ** -24).reshape(like.shape)


def fake_forward(spec: OpInfo, tensors: Sequence[torch.Tensor]):
    named = [(a.name, a.shape, t, a.dtype) for a, t in zip(spec.inputs, tensors)]
    full_shape, _ = check_arguments(spec, spec.qualname, named)
    return _outputs(spec, tensors[spec.dtype_input()], full_shape)


def fake_backward(spec: OpInfo, tensors: Sequence[torch.Tensor], saved: Sequence[torch.Tensor],
                  grads: Sequence[torch.Tensor], output_mask: Sequence[bool]):
    named = [(a.name, a.shape, t, a.dtype) for a, t in zip(spec.inputs, tensors)]
    named += [(f"_saved_{n}", STAT, t) for n, t in zip(spec.saved, saved)]
    named += [(f"_saved_{n}", TOTAL, t) for n, t in zip(spec.saved_totals, saved[len(spec.saved):])]
    named += [(f"_saved_{n}", COLSTAT, t)
              for n, t in zip(spec.saved_columns, saved[len(spec.saved) + len(spec.saved_totals):])]
    named += [(f"_grad_{o.name}", o.shape, g) for o, g in zip(spec.differentiable_outputs(), grads)]
    check_arguments(spec, spec.qualname + "_backward", named)
    # Gradients in the dtype of the call (an integer input's, never asked for, too).
    ref = tensors[spec.dtype_input()]
    out = tuple(ref.new_empty(t.shape) if m else ref.new_empty(0)
                for t, m in zip(tensors, output_mask))
    return out[0] if len(out) == 1 else out


# ---- torch.vmap ------------------------------------------------------------------------
# One batching rule serves the forward op and <op>_backward of every op, from the shape
# classes of their arguments and results. Leading dims are free for [..., D] and [...]
# arguments: the vmapped dim moves to the front and becomes one more leading dim (an
# unbatched one is expanded to it), so one call computes the whole batch. A batched [D] or
# [] argument has no dim to spare, and a [D] or [] gradient is a sum over all rows of the
# call, where each sample needs the sum over its own rows: those cases call the op once
# per sample and stack the results, as do forwards with [] results (whole-tensor values such
# as a loss averaged over rows: each sample's over its own rows).
# Both call the package's ops again, below the vmap level, so autograd and nested
# transforms see the op itself.


RNG = "rng"  # a random op's (seed, offset): returned by the forward, read by the backward


def register_random(spec: OpInfo) -> None:
    """A random op's forward is an ordered side effect for torch.compile: each call is kept, in
    order, with a token threaded through the graph. The nondeterministic_seeded tag the op is
    registered with is not enough under torch 2.11: AOTAutograd's common-subexpression pass
    exempts only ATen's random ops from merging (torch/_functorch/compile_utils.py), so two
    equal calls in one graph that needs gradients returned the first call's draw twice."""
    if not spec.random:
        return
    try:
        from torch._library.effects import EffectType
        register = torch.library._register_effectful_op
    except (ImportError, AttributeError):  # torch before 2.10 has them only here
        from torch._higher_order_ops.effects import _EffectType as EffectType
        from torch._higher_order_ops.effects import _register_effectful_op as register
    register(getattr(op_namespace(), spec.name).default, EffectType.ORDERED)


def register_vmap(spec: OpInfo) -> None:
    """Registers the batching rules of <ns>::<op> and <ns>::<op>_backward. A random op
    is called once per sample, in order (torch.vmap's randomness="different"): each sample
    draws and returns its own seed and offset, and its backward reads them back."""
    ops = op_namespace()
    inputs = [a.shape for a in spec.inputs]
    rng = [RNG] if spec.random else []
    forward_results = ([o.shape for o in spec.outputs] + [ROW] * len(spec.saved)
                       + [SCALAR] * len(spec.saved_totals) + [COL] * len(spec.saved_columns) + rng)
    torch.library.register_vmap(
        spec.qualname, functools.partial(_batch_rule, getattr(ops, spec.name).default, inputs,
                                         forward_results, None,
                                         spec.random, spec.reads_all_rows))
    # <op>_backward(output gradients, inputs, saved statistics, rng, attrs, output_mask)
    backward_args = ([o.shape for o in spec.differentiable_outputs()] + inputs
                     + [ROW] * len(spec.saved) + [SCALAR] * len(spec.saved_totals)
                     + [COL] * len(spec.saved_columns) + rng)
    torch.library.register_vmap(
        spec.qualname + "_backward",
        functools.partial(_batch_rule, getattr(ops, spec.name + "_backward").default,
                          backward_args, inputs, len(backward_args) + len(spec.attrs),
                          spec.random, spec.reads_all_rows))


def _batch_rule(op, classes: List[str], results: List[str], mask_at, random: int, all_rows: bool,
                info, in_dims, *args, **kwargs):
    """The vmap rule of `op`, whose first len(classes) arguments are tensors of those shape
    classes and whose results have the classes `results`; mask_at: the position of the
    backward's output_mask (None for a forward), whose unrequested gradients are empty
    tensors (expanded to the batch: torch.vmap fails to place an unbatched result at a
    negative out_dims). A random op (each sample its own draw) and one whose values depend on
    every row (all_rows: column statistics, whole-tensor values, the row count; each sample over
    its own) are called per sample. Every result comes back with
    the batch at dim 0."""
    n = len(classes)
    tensors, dims, rest = args[:n], in_dims[:n], args[n:]
    if mask_at is None:
        mask = [True] * len(results)
    else:
        mask = list(kwargs["output_mask"] if "output_mask" in kwargs else args[mask_at])
    if random and mask_at is None and info.randomness != "different":
        raise RuntimeError(f"{op}: vmap of an op that draws random numbers needs "
                           f"randomness='different' (each sample its own draw), got "
                           f"randomness='{info.randomness}'")
    full = next(i for i, c in enumerate(classes) if full_like(c))
    scalar_rank = tensors[full].dim() - (dims[full] is not None) == 0  # a 0-dim [..., D]
    per_sample = (
        random or all_rows
        or any(d is not None and (c in (COL, SCALAR) or is_mapped(c))
               for c, d in zip(classes, dims))
        or (mask_at is not None
            and any(m and (c in (COL, SCALAR) or is_mapped(c)) for c, m in zip(results, mask)))
        or (scalar_rank and COL in classes)  # the op's error, per sample
        or info.batch_size == 0)
    if per_sample:
        return _per_sample(op, info.batch_size, tensors, dims, rest, kwargs, mask)
    # One call: [..., D] and [...] arguments get the batch as their first dim; a 0-dim
    # [..., D] (D = 1) becomes [B, 1], so that the batch does not become its D.
    batched = []
    for t, c, d in zip(tensors, classes, dims):
        if c in (FULL, ROW) or full_like(c):
            t = t.movedim(d, 0) if d is not None else t.expand(info.batch_size, *t.shape)
            if scalar_rank and c == FULL:
                t = t.unsqueeze(-1)
        batched.append(t)
    out = op(*batched, *rest, **kwargs)
    single = isinstance(out, torch.Tensor)
    outs = []
    for o, c, m in zip((out,) if single else out, results, mask):
        if not m or c in (COL, SCALAR):  # (an output of the unbatched [D] and [] inputs)
            o = o.expand(info.batch_size, *o.shape)
        elif scalar_rank and c == FULL:
            o = o.squeeze(-1)
        outs.append(o)
    return _batched_at_0(outs, single)


def _per_sample(op, batch_size, tensors, dims, rest, kwargs, mask):
    """op on each sample, the results stacked at dim 0 (an unrequested gradient: the first
    sample's empty tensor, expanded). An empty batch runs the op once on zeros for the
    results' shapes (and the argument checks)."""
    def sample(b):
        return [t.select(d, b) if d is not None else t for t, d in zip(tensors, dims)]

    if batch_size == 0:
        zeros = [t.new_zeros(t.shape[:d] + t.shape[d + 1:]) if d is not None else t
                 for t, d in zip(tensors, dims)]
        out = op(*zeros, *rest, **kwargs)
        single = isinstance(out, torch.Tensor)
        outs = [o.new_empty((0, *o.shape)) for o in ((out,) if single else out)]
    else:
        runs = [op(*sample(b), *rest, **kwargs) for b in range(batch_size)]
        single = isinstance(runs[0], torch.Tensor)
        runs = [(r,) if single else tuple(r) for r in runs]
        outs = [torch.stack(col) if m else col[0].expand(batch_size, *col[0].shape)
                for col, m in zip(zip(*runs), mask)]
    return _batched_at_0(outs, single)


def _batched_at_0(outs, single):
    """A batching rule's (results, out_dims), every result batched at dim 0."""
    return (outs[0], 0) if single else (tuple(outs), (0,) * len(outs))


# ---- second derivatives: helpers of each op's _backward_backward ----------------------
def compute_type(tensors: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """Half types compute in float32, as the kernels do."""
    return [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in tensors]


# The moves and chunk views of primitives.yaml in the printed PyTorch (references, second
# derivatives): a 0-dim value is the same in every column (a zero cotangent, a [] value), so
# it is its own permutation and its own chunk.
def swap_halves(t: torch.Tensor) -> torch.Tensor:
    return t if t.dim() == 0 else torch.cat(t.chunk(2, -1)[::-1], -1)


def swap_pairs(t: torch.Tensor) -> torch.Tensor:
    return t if t.dim() == 0 else t.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)


def roll(t: torch.Tensor, k) -> torch.Tensor:
    return t if t.dim() == 0 else torch.roll(t, int(k), -1)


def chunk(t: torch.Tensor, c, n) -> torch.Tensor:
    return t if t.dim() == 0 else t.chunk(int(n), -1)[int(c)]


def cotangent(g: torch.Tensor, computed: bool, cls: str, like: torch.Tensor,
              dims: Sequence[str] = ()) -> torch.Tensor:
    """The cotangent of one output of <op>_backward in like's dtype: zero where output_mask
    left the output uncomputed (an empty tensor); per-row values as [..., 1]; a mapped
    input's gradient aligned with the op's dims."""
    if not computed or g is None:
        return like.new_zeros(())
    g = g.to(like.dtype)
    if is_mapped(cls):
        return align(g, cls, dims)
    return g.unsqueeze(-1) if cls == ROW else g


def _sum_leading(t: torch.Tensor, n: int) -> torch.Tensor:
    return t.sum(dim=tuple(range(n))) if n else t


def grad_to(a: torch.Tensor, cls: str, full: List[int], dtype: torch.dtype,
            rowlike: bool = False, dims: Sequence[str] = ()) -> torch.Tensor:
    """A second-order adjoint (an expression broadcast against the [..., D] shape `full`) as
    the gradient of an argument of shape class cls: per element, per row ([..., 1]), summed
    over rows ([D]), or over every element ([]; over rows where the adjoint is per row)."""
    lead = full[:-1]
    if is_mapped(cls):
        out = reduce_to(a, cls, full, dims)
    elif chunks_of(cls) > 1:  # a packed input's: [..., n*D]
        out = torch.broadcast_to(a, lead + [chunks_of(cls) * full[-1]])
    elif cls == FULL:
        out = torch.broadcast_to(a, full)
    elif cls == ROW:
        out = torch.broadcast_to(a, lead + [1]).squeeze(-1)
    elif cls == COL:
        out = _sum_leading(torch.broadcast_to(a, full), len(lead))
    else:
        out = torch.broadcast_to(a, lead + [1] if rowlike else full).sum()
    return out.to(dtype).contiguous()


# ---- the autograd kernel of <op>_backward ----------------------------------------------
# The C++ autograd node of each op calls <op>_backward through the dispatcher when grad mode
# is on in the backward (create_graph): this kernel then records the backward with its own
# derivative (`backward`, the op's _backward_backward). It is an autograd.Function in the
# form torch.func accepts (forward without ctx, setup_context, the op's own vmap rule).
# torch.func cannot run an autograd.Function from inside a dispatcher kernel as such, and its
# grad transforms run every backward with create_graph. Under one torch.func grad level the
# node is recorded on that level's tensors as a single-level function (jacrev of jacrev
# differentiates an inner backward at the outer level: run below autograd, it had returned
# zeros); where ordinary autograd also tracks the tensors beneath (torch.autograd.grad of a
# torch.func.grad), it runs below the transforms' autograd, as the C++ node then records the
# op at the ordinary level; under two grad levels (grad of grad) it raises.
_autograd_libs: List[torch.library.Library] = []


def register_backward_autograd(spec: OpInfo, setup_context, backward) -> None:
    """Registers the Autograd kernel of <ns>::<op>_backward: the op below autograd, and
    `backward` (the op's _backward_backward, second derivatives) as its derivative."""
    op = getattr(op_namespace(), spec.name + "_backward").default

    def forward(*args):
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)

    function = type(f"{spec.name}_backward_Function", (torch.autograd.Function,), {
        "forward": staticmethod(forward),
        "setup_context": staticmethod(setup_context),
        "backward": staticmethod(backward),
        "generate_vmap_rule": True,  # vmap of forward is the op's own rule (register_vmap)
    })

    from torch._functorch.utils import enable_single_level_autograd_function
    single_level_apply = super(torch.autograd.Function, function).apply

    def kernel(*args):
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            levels = torch._C._functorch.get_interpreter_stack()
            if levels is None:
                return function.apply(*args)
            grad = torch._C._functorch.TransformType.Grad
            if sum(level.key() == grad for level in levels) > 1:
                raise RuntimeError(
                    f"{spec.qualname}_backward: second derivatives under nested torch.func "
                    "transforms (grad of grad, hessian) are not supported; use "
                    "torch.autograd.grad(..., create_graph=True) for them")
            if not any(_base(t).requires_grad for t in tensors):
                with enable_single_level_autograd_function():
                    return single_level_apply(*args)
        return forward(*args)

    lib = torch.library.Library(NAMESPACE, "IMPL")
    lib.impl(spec.name + "_backward", kernel, "Autograd")
    _autograd_libs.append(lib)  # a Library unregisters its kernels when collected


# ---- the autograd kernel of <op> in a stable ABI build ----------------------------------
# The ATen glue registers each op's Autograd kernel in C++ (fusegen_autograd.cpp); the LibTorch
# stable ABI has no C++ autograd, so a stable build's package registers the same node here: it
# saves the inputs (a placeholder of its shape where the backward does not read one), the
# statistics the forward returns after its outputs and the attrs, and its backward calls
# <op>_backward (through that op's own autograd kernel when create_graph: second derivatives).


def stable_abi() -> bool:
    """Whether the package's library was built on the LibTorch stable ABI glue."""
    try:
        from . import _build_info
    except ImportError:  # not built
        return False
    return bool(getattr(_build_info, "STABLE_ABI", False))


def _base(t: torch.Tensor) -> torch.Tensor:
    """The tensor beneath a torch.func transform's wrappers (the ordinary autograd level's)."""
    while torch._C._functorch.is_functorch_wrapped_tensor(t):
        t = torch._C._functorch.get_unwrapped(t)
    return t


def _wrapper_levels(t: torch.Tensor) -> set:
    """The torch.func levels that wrap t (a jvp level's wrapper carries a tangent)."""
    levels = set()
    while torch._C._functorch.is_functorch_wrapped_tensor(t):
        levels.add(torch._C._functorch.maybe_get_level(t))
        t = torch._C._functorch.get_unwrapped(t)
    return levels


def _under_transform(t: torch.Tensor) -> bool:
    """A tensor of a torch.func transform, functionalization or a Python subclass, or any
    tensor while a torch.func transform runs (fusegen_autograd.cpp's wrapped())."""
    return (torch._C._functorch.get_interpreter_stack() is not None
            or torch._C._functorch.is_functorch_wrapped_tensor(t)
            or torch._is_functional_tensor(t) or type(t) is not torch.Tensor)


def register_forward_autograd(spec: OpInfo, n_attrs: int) -> None:
    """Registers the Autograd kernel of <ns>::<op> in a stable ABI build (the ATen glue has it
    in C++). No-op otherwise."""
    if not stable_abi():
        return
    op = getattr(op_namespace(), spec.name).default
    backward_op = getattr(op_namespace(), spec.name + "_backward").default
    n_in, n_out = len(spec.inputs), len(spec.outputs)
    # (An op writing only FP8 and statistics records no history; its kernel still refuses
    # forward-mode AD, as the C++ one does.)
    differentiable = [o.differentiable for o in spec.outputs]

    # The dispatcher hands a Python kernel the keyword-only arguments (the attrs) as keywords,
    # leaving out those at their defaults; the Function takes them all in schema order (the
    # keyword-only ones last). This kernel runs on every call: what can be is computed here,
    # once (at launch-bound sizes the host's time is the op's time).
    arguments = op._schema.arguments
    n_positional = sum(1 for a in arguments if not a.kwarg_only)
    keyword_defaults = [(a.name, a.default_value) for a in arguments if a.kwarg_only]
    unread = [k for k in range(n_in) if not spec.save_inputs[k]]

    def forward(*args):
        keywords = {n: v for (n, _), v in zip(keyword_defaults, args[n_positional:])}
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args[:n_positional], **keywords)

    def setup_context(ctx, inputs, output):
        outs = output if isinstance(output, tuple) else (output,)
        saved = list(inputs[:n_in])
        for k in unread:  # a placeholder of its shape: one element, never read, not written
            if not _under_transform(saved[k]):
                saved[k] = saved[k].new_empty(()).expand(saved[k].shape)
        ctx.save_for_backward(*saved, *outs[n_out:])
        ctx.attrs = inputs[n_in:n_in + n_attrs]  # (not the generator)
        ctx.mark_non_differentiable(*[o for o, d in zip(outs, differentiable) if not d],
                                    *outs[n_out:])
        # The non-differentiable outputs' gradients stay None (backward drops them): autograd
        # would otherwise make a tensor of zeros for each statistic, a kernel launch apiece.
        # (The attribute AOTAutograd's own Functions set; the differentiable outputs' unused
        # gradients are still zeros, as the backward op needs.)
        ctx._materialize_non_diff_grads = False

    flowing = [m for m, d in enumerate(differentiable) if d]  # outputs gradients flow through
    passed = [(k, spec.passthrough[k]) for k in range(n_in) if spec.passthrough[k] >= 0]

    def backward(ctx, *grads):
        grads = [grads[m] for m in flowing]  # (zeros where unused)
        needs = ctx.needs_input_grad
        result, mask = [None] * n_in, list(needs[:n_in])
        for k, same in passed:
            if not _under_transform(grads[same]):  # its gradient unchanged
                result[k] = grads[same] if needs[k] else None
                mask[k] = False
        if any(mask):
            if torch.is_grad_enabled():  # create_graph: through the op's own autograd kernel
                out = backward_op(*grads, *ctx.saved_tensors, *ctx.attrs, mask)
            else:  # a plain backward records nothing: the kernels alone, as the C++ node
                with torch._C._AutoDispatchBelowAutograd():
                    out = backward_op(*grads, *ctx.saved_tensors, *ctx.attrs, mask)
            out = out if isinstance(out, (tuple, list)) else (out,)
            for k in range(n_in):
                if mask[k]:
                    result[k] = out[k]
        return (*result, *([None] * (len(needs) - n_in)))

    def jvp(ctx, *tangents):
        raise RuntimeError(
            f"{spec.qualname}: forward-mode AD (torch.func.jvp, jacfwd, torch.autograd.forward_ad) "
            "is not supported; use reverse mode (torch.func.vjp, jacrev, torch.autograd.grad)")

    function = type(f"{spec.name}_Function", (torch.autograd.Function,), {
        "forward": staticmethod(forward),
        "setup_context": staticmethod(setup_context),
        "backward": staticmethod(backward),
        "jvp": staticmethod(jvp),
        "generate_vmap_rule": True,  # vmap of forward is the op's own rule (register_vmap)
    })

    # autograd.Function.apply hands a call under a torch.func transform to functorch, which
    # cannot take it from inside a dispatcher kernel: the kernel records the node as the C++
    # one does (torch._C._FunctionBase.apply, a single-level function), on the tensors of the
    # transform's level.
    from torch._functorch.utils import enable_single_level_autograd_function
    apply = super(torch.autograd.Function, function).apply

    def kernel(*args, **kwargs):
        if not torch.is_grad_enabled() and torch._C._functorch.get_interpreter_stack() is None:
            with torch._C._AutoDispatchBelowAutograd():  # (no_grad, inference: the op alone)
                return op(*args, **kwargs)
        if len(args) < n_positional:  # (the schema's positional arguments have no defaults)
            args, kwargs = torch._library.utils.fill_defaults(op._schema, args, kwargs)
        args = (*args, *(kwargs.get(n, d) for n, d in keyword_defaults))
        levels = torch._C._functorch.get_interpreter_stack()
        if levels is not None:
            # A tangent of a torch.func jvp level (jacfwd, hessian): refused, as the C++ node
            # refuses one (a single-level function never calls jvp: they had got zeros).
            kinds = torch._C._functorch.TransformType
            jvps = {v.level() for v in levels if v.key() == kinds.Jvp}
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if jvps and any(jvps & _wrapper_levels(t) for t in tensors):
                jvp(None)
            # The node is recorded on the innermost level alone: an outer grad level, or
            # ordinary autograd beneath the transform, would see the op as a constant.
            if sum(v.key() == kinds.Grad for v in levels) > 1:
                raise RuntimeError(
                    f"{spec.qualname}: derivatives under nested torch.func transforms (jacrev "
                    "of jacrev, grad of grad) are not supported by a stable ABI build, whose "
                    "autograd is a Python function of one level; build the package with "
                    "FUSEGEN_STABLE_ABI=0 (the ATen glue) or use torch.autograd.grad(..., "
                    "create_graph=True)")
            if torch.is_grad_enabled() and any(_base(t).requires_grad for t in tensors):
                warnings.warn(
                    f"{spec.qualname}: under a torch.func transform, ordinary autograd of "
                    "tensors that require grad does not record this op in a stable ABI build "
                    "(its derivative is taken as 0 there: torch.autograd.grad of a "
                    "torch.func.grad result would be wrong); build the package with "
                    "FUSEGEN_STABLE_ABI=0 (the ATen glue) for that")
            with enable_single_level_autograd_function():
                return apply(*args)
        return apply(*args)

    lib = torch.library.Library(NAMESPACE, "IMPL")
    lib.impl(spec.name, kernel, "Autograd")
    _autograd_libs.append(lib)  # a Library unregisters its kernels when collected


# ---- DTensor sharding rules --------------------------------------------------------------
# The sharding strategies of <ns>::<op> and <ns>::<op>_backward for DTensor
# (torch.distributed.tensor.experimental.register_sharding: torch 2.11's route for custom ops;
# the C++ op-strategy registry is internal), from the shape classes of their arguments and
# results, as the fake implementation is. A leading dim of the op's [..., D] rows can be
# sharded when every row's values depend on that row alone (no reduction over rows, no
# whole-tensor value, no random draw, whose numbers follow the element index): [..., D] and
# [...] arguments and results are sharded on it, an input that omits it ([D], [], a [S, D]
# table sharded on H) is replicated and its gradient is Partial (a sum over rows, reduced by
# DTensor); a table that has it is sharded on its own dim. The last dim can be sharded when the
# columns are independent (no reduction over the row, no move, no column index, no packed
# chunks): [D] arguments and results are sharded too, per-row ones replicated, their gradients
# Partial. Replicating everything is always a strategy.


def _placements(spec: OpInfo, classes, d, ndim, results):
    """The placement of each of `classes` (arguments or results of one op) when the op's
    [..., D] tensors (of ndim dims) are sharded on dim d; None where not expressible. results:
    the gradient of each class instead (a sum over what is not sharded: Partial)."""
    from torch.distributed.tensor import Partial, Replicate, Shard
    last = d == ndim - 1
    k = len(spec.dims)
    named = d - (ndim - 1 - k)  # d's index among the named dims (< 0: a batch dim)
    out = []
    for cls in classes:
        if cls in (None, "rng"):
            out.append(None if cls is None else Replicate())
        elif is_mapped(cls):
            _, dims_of, has_d = parse_shape(cls)  # (never the batch: Sema refuses '...' there)
            if last:
                out.append(Shard(len(dims_of)) if has_d else Partial() if results else Replicate())
            elif named >= 0 and spec.dims[named] in dims_of:
                out.append(Shard(dims_of.index(spec.dims[named])))
            else:
                out.append(Partial() if results else Replicate())
        elif full_like(cls) or cls == STAT:
            out.append(Shard(d) if not (last and cls == STAT) else Replicate())
        elif cls == ROW:
            out.append((Partial() if results else Replicate()) if last else Shard(d))
        elif cls in (COL, COLSTAT):
            out.append(Shard(0) if last else Partial() if results else Replicate())
        else:  # [] values and whole-tensor statistics
            out.append(Partial() if results else Replicate())
    return out


def _sharding_dims(spec: OpInfo, ndim: int):
    """The dims of the op's [..., D] tensors a strategy may shard."""
    if spec.random or any(o.shape == SCALAR for o in spec.outputs):
        return []
    # (a dim a position is read along: a shard's rows would count from 0)
    k = len(spec.dims)
    leading = [] if spec.reads_all_rows else [
        d for d in range(ndim - 1)
        if d < ndim - 1 - k or spec.dims[d - (ndim - 1 - k)] not in spec.positions]
    return leading + ([ndim - 1] if spec.columns_independent and ndim else [])


def _forward_shardings(spec: OpInfo, *args, **kwargs):
    from torch.distributed.tensor import Replicate
    ndim = args[spec.full_input()].ndim
    results = ([o.shape for o in spec.outputs] + [STAT] * len(spec.saved)
               + [TOTAL] * len(spec.saved_totals) + [COLSTAT] * len(spec.saved_columns))
    inputs = [a.shape for a in spec.inputs] + [None] * (len(args) - len(spec.inputs))
    rng = [Replicate()] if spec.random else []
    strategies = [([Replicate()] * len(results) + rng,
                   [None if c is None else Replicate() for c in inputs])]
    for d in _sharding_dims(spec, ndim):
        strategies.append((_placements(spec, results, d, ndim, False) + rng,
                           _placements(spec, inputs, d, ndim, False)))
    return strategies


def _backward_shardings(spec: OpInfo, *args, **kwargs):
    from torch.distributed.tensor import Replicate
    grads = [o.shape for o in spec.differentiable_outputs()]
    ndim = args[len(grads) + spec.full_input()].ndim
    classes = (grads + [a.shape for a in spec.inputs] + [STAT] * len(spec.saved)
               + [TOTAL] * len(spec.saved_totals) + [COLSTAT] * len(spec.saved_columns)
               + (["rng"] if spec.random else []))
    classes += [None] * (len(args) - len(classes))  # attrs, output_mask
    results = [a.shape for a in spec.inputs]
    strategies = [([Replicate()] * len(results), [None if c is None else Replicate()
                                                  for c in classes])]
    for d in _sharding_dims(spec, ndim):
        strategies.append((_placements(spec, results, d, ndim, True),
                           _placements(spec, classes, d, ndim, False)))
    return strategies


def register_sharding(spec: OpInfo) -> None:
    """Registers the DTensor sharding strategies of <ns>::<op> and <ns>::<op>_backward
    once torch.distributed.tensor is imported (now, or when it is: importing it costs about
    0.5 s, which a program not using DTensor should not pay)."""
    if not torch.distributed.is_available():
        return

    def register():
        from torch.distributed.tensor.experimental import register_sharding as rule
        ops = op_namespace()
        rule(getattr(ops, spec.name).default)(functools.partial(_forward_shardings, spec))
        rule(getattr(ops, spec.name + "_backward").default)(
            functools.partial(_backward_shardings, spec))

    _after_import("torch.distributed.tensor", register)


_PENDING: dict = {}  # module name -> callbacks to run once it is imported


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs the callbacks of _PENDING once their module is imported (finds its spec with the
    other finders and wraps the loader's exec_module). Another fusegen package's finder is one
    of the others: while this one asks them it answers nothing, so the two do not ask each
    other forever, and each wraps the loader the other found."""

    def __init__(self):
        self._asking = False

    def find_spec(self, fullname, path, target=None):
        if fullname not in _PENDING or self._asking:
            return None
        self._asking = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                found = finder.find_spec(fullname, path, target)
                if found is not None and found.loader is not None:
                    exec_module = found.loader.exec_module

                    def run(module, exec_module=exec_module):
                        exec_module(module)
                        for callback in _PENDING.pop(fullname, []):
                            callback()
                    found.loader.exec_module = run
                    return found
            return None
        finally:
            self._asking = False


def _after_import(name: str, callback) -> None:
    if name in sys.modules:
        callback()
        return
    _PENDING.setdefault(name, []).append(callback)
    if not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
