"""The independent reference and the error model.

`print_reference(spec)` prints PyTorch code from the fuzzer's own DAG of a spec (lang.py) with
the fuzzer's own spellings (prims.TORCH). Every primitive call is printed as
`_M.f(name, lambda: <spelling>, *args)`, so one printed function runs under two models:

- Exact: runs the spellings in float64; gradients by torch.autograd. The values the op must
  match. Nothing of fusegen's is used.
- MonteCarlo (the error model, for tolerances only): runs fusegen's *documented computation*
  in float64 -- each primitive's `eval:` formula and `grad:` rules from primitives.yaml,
  with every builtin operation's result multiplied by (1 + 2u r), r uniform in [-1, 1] and u
  the unit roundoff of the dtype the op computes in; sums over a row get an extra
  u sqrt(n) sum|terms|; per-row values and outputs are perturbed at the storage dtype's u
  (per-row values: conservative, as fusegen saves the per-row values its backward reads in
  the compute type since 1ccccee); values beyond the compute or storage range become inf. Monte Carlo arithmetic (Parker 1997): the spread
  of a few runs around the same model's unperturbed run (u = 0) measures how far an honest
  implementation of that computation in that precision may land -- cancellation inside a
  formula (1 + tanh(z) in gelu_tanh, 1 - tanh^2 in its derivative), branch flips and long
  sums included. The tolerance is a multiple of that spread (checker.py). Since the spread
  is measured around the model's own centre, not around the Exact value, an eval formula or
  a rule that computes something else still fails the value check.
"""
import math
from typing import Dict, List

import torch

import lang
import prims as P
from lang import COL, FULL, ROW, Node, Spec
from prims import TORCH


# ---- printing ---------------------------------------------------------------------------------

class _Printer:
    def __init__(self, spec: Spec, types=None):
        self.spec = spec
        self.lines: List[str] = []
        self.names: Dict[int, str] = {}
        self.k = 0
        self.types = types  # id(node) -> lang.value_type, for the op's formulas (not functions)

    def tmp(self):
        self.k += 1
        return f"_t{self.k}"  # spec names never begin with '_': no clash

    def emit(self, n: Node, cls_memo, params=None) -> str:
        key = id(n)
        if key in self.names:
            return self.names[key]
        if n.op == "input":
            return n.name
        if n.op == "param":
            return params[n.name]
        v = self.tmp()
        if n.op == "attr":
            self.lines.append(f"{v} = _M.c({n.name})")
        elif n.op == "D":
            self.lines.append(f"{v} = _M.c(_D)")
        elif n.op == "rows":
            self.lines.append(f"{v} = _M.c(_rows)")
        elif n.op == "j":
            self.lines.append(f"{v} = _M.column()")
        elif n.op == "pos":
            self.lines.append(f"{v} = _M.pos({list(self.spec.dims).index(n.name)})")
        elif n.op == "call" and n.name == "chunk":
            # chunk c of a packed input [..., n*D]: its columns c*D ... c*D + D - 1
            x, c = n.args
            parts = self.spec.shape(x.name).d
            self.lines.append(f"{v} = _M.chunk({self.emit(x, cls_memo, params)}, {int(c.value)}, {parts})")
        elif n.op == "num":
            value = float(n.value)
            spelled = repr(value) if math.isfinite(value) else f"float('{value}')"
            self.lines.append(f"{v} = _M.c({spelled})")
        else:
            args = [self.emit(a, cls_memo, params) for a in n.args]
            fn = self.spec.functions.get(n.name)
            if fn is not None and not fn.derivatives:
                # a header function: its body, inlined as a Python function
                expr = f"_fn_{n.name}(_M, {', '.join(args)})"
                self.lines.append(f"{v} = {expr}")
            elif fn is not None:
                # with stated derivatives: with_grad(body, arg, derivative(args), ...)
                parts = [f"_fn_{n.name}(_M, {', '.join(args)})"]
                for a, d in zip(args, fn.derivatives):
                    parts += [a, f"_fn_{d}(_M, {', '.join(args)})"]
                p = ", ".join(parts)
                self.lines.append(f"{v} = _M.f('with_grad', lambda: _M.with_grad({p}), {p})")
            else:
                key2 = (n.name, len(args))
                if key2 not in TORCH:
                    raise KeyError(f"no PyTorch spelling for {n.name}/{len(args)}")
                expr = TORCH[key2].format(*args)
                if self.types is not None and self.types.get(key) in (lang.INT, lang.BOOL) and all(
                        self.types.get(id(a)) in (lang.INT, lang.LIT, lang.BOOL) for a in n.args):
                    # Integers (and comparisons of integers) are exact in fusegen's compute type:
                    # evaluated by the exact model in every run (no rounding, no ties)
                    self.lines.append(f"{v} = _M.ints(lambda _M: {expr})")
                elif lang.is_reduction(*key2) or key2 in DIRECT:
                    self.lines.append(f"{v} = {expr}")
                else:
                    self.lines.append(f"{v} = _M.f({n.name!r}, lambda: {expr}, {', '.join(args)})")
        self.names[key] = v
        return v


# Primitives printed as calls of the model's helpers (not _M.f): moves (roll's shift an integer
# constant), rotations and reductions over rows, which the model computes itself
DIRECT = {(k, 1) for k in list(lang.MOVES) + list(lang.ROTATIONS) + list(lang.COLUMN_REDUCTIONS)}
DIRECT.add(("roll", 2))


def _index_of(spec: Spec, shape) -> str:
    """The indexing that turns an input naming some of the op's dims into a tensor that
    broadcasts against the full shape: None at the dims it omits (a trailing D stays)."""
    idx = ["slice(None)" if d in shape.dims else "None" for d in spec.dims]
    if shape.d:
        idx.append("slice(None)")
    return "(" + ", ".join(idx) + ",)"


def print_reference(spec: Spec) -> str:
    """Python source of `reference(_M, *inputs, **attrs)` returning the list of outputs."""
    out = ["# The difffuzz reference of " + spec.op + ", printed by tests/difffuzz/reference.py",
           "import math", "import torch", ""]
    for fn in spec.functions.values():
        p = _Printer(spec)
        res = p.emit(fn.body, {}, {q: q for q in fn.params})
        out.append(f"def _fn_{fn.name}(_M, {', '.join(fn.params)}):")
        out += ["    " + l for l in p.lines]
        out.append(f"    return {res}")
        out.append("")
    types: Dict[int, str] = {}
    for _, n in spec.lets + spec.outputs:
        lang.value_type(n, spec, types)
    p = _Printer(spec, types)
    full_input = spec.full_input()
    sig = ", ".join(name for name, _ in spec.inputs)
    kw = ", ".join(a.name if a.default is None else f"{a.name}={a.default!r}" for a in spec.attrs)
    out.append(f"def reference(_M, {sig}{', *, ' + kw if kw else ''}):")
    packed = spec.shape(full_input).d
    body = [f"_lead = {full_input}.shape[:-1]",
            f"_D = {full_input}.shape[-1]" + (f" // {packed}" if packed > 1 else ""),
            "_full = (*_lead, _D)",
            "_rows = math.prod(_lead)",
            f"_M.setup(_lead, _D, {len(spec.dims)})"]
    for name, c in spec.inputs:
        sh = spec.shape(name)
        if sh.mapped:
            # named dims without the batch: None at the dims it omits (the checker passes them
            # expanded to the op's shape when it measures the terms of their gradients' sums)
            body.append(f"{name} = {name} if _M.expanded_inputs else {name}[{_index_of(spec, sh)}]")
        if c == ROW:
            body.append(f"{name} = {name}.unsqueeze(-1)")
    memo = {}
    results = []
    for name, n in spec.outputs:
        if n.op == "call" and n.name == "cat":
            # an output of parts side by side, [..., n*D]
            parts = [p.emit(a, memo) for a in n.args]
            results.append(("torch.cat([" + ", ".join(f"_M.bcast({x}, _full)" for x in parts) + "], -1)", "cat"))
            continue
        v = p.emit(n, memo)
        results.append((v, lang.shape_class(n, spec, memo)))
    body += p.lines
    outs = []
    for v, c in results:
        if c == ROW:
            outs.append(f"_M.out(_M.row({v}, _lead))")
        elif c == "cat":
            outs.append(f"_M.out({v})")
        elif c == COL:
            outs.append(f"_M.out(_M.colout({v}))")
        else:
            outs.append(f"_M.out(_M.bcast({v}, _full))")
    body.append(f"return [{', '.join(outs)}]")
    out += ["    " + l for l in body]
    return "\n".join(out) + "\n"


def compile_reference(spec: Spec):
    src = print_reference(spec)
    g: Dict[str, object] = {}
    exec(compile(src, f"<difffuzz reference {spec.op}>", "exec"), g)
    return g["reference"], src


# ---- the exact model ----------------------------------------------------------------------------

class _RedExtreme(torch.autograd.Function):
    """max/min over the last dim whose gradient is split evenly among the extremal elements
    (the documented rule, as torch.amax's)."""

    @staticmethod
    def forward(ctx, t, is_max):
        r = t.amax(-1, keepdim=True) if is_max else t.amin(-1, keepdim=True)
        ctx.save_for_backward(t, r)
        return r

    @staticmethod
    def backward(ctx, g):
        t, r = ctx.saved_tensors
        return _split_among(t == r, g), None


def _split_among(tie, g):
    """g split evenly among the elements of each row that tie (0 elsewhere)."""
    n = tie.sum(-1, keepdim=True).clamp_min(1).to(g.dtype)
    return torch.where(tie, g / n, torch.zeros_like(g))


def _with_grad(value, *pairs):
    """value, with the gradient in each x stated as dx (no gradient through value or dx)."""
    out = value.detach()
    for x, dx in zip(pairs[0::2], pairs[1::2]):
        term = x * dx.detach()
        out = out + (term - term.detach())
    return out


class Exact:
    u_compute = u_store = 0.0
    tiny_store = fast_tiny = 0.0

    def __init__(self, device="cpu"):
        self.device = device
        self.D = 1.0

    def setup(self, lead, D, nd):
        """The call's shape: leading dims (the batch, then the op's nd named dims) and D."""
        self.lead, self.D, self.nd = tuple(lead), D, nd
        self.full = (*self.lead, D)
        self.rows = math.prod(self.lead)

    def c(self, v):
        return torch.tensor(float(v), dtype=torch.float64, device=self.device)

    def f(self, name, spelled, *args):
        return spelled()

    def ints(self, f):
        """An integer value (or a comparison of integers): exact in fusegen's compute type."""
        return f(self)

    # ---- named dims, positions, moves, packed inputs, reductions over rows -------------------
    def column(self):
        """j, the column index: a [D] value."""
        return torch.arange(self.D, dtype=torch.float64, device=self.device)

    def pos(self, k):
        """pos(S) for the op's k-th named dim: the row's index along it, a per-row value."""
        size = self.lead[len(self.lead) - self.nd + k]
        return torch.arange(size, dtype=torch.float64, device=self.device).reshape(
            size, *([1] * (self.nd - k - 1)), 1)

    def chunk(self, t, c, n):
        """Chunk c of the n chunks of D of a packed input's last dim."""
        return t[..., c * self.D:(c + 1) * self.D]

    def _perm(self, kind, device):
        """The column each column reads: (j + D/2) mod D for the halves, j xor 1 for the pairs."""
        j = torch.arange(self.D, device=device)
        return (j + self.D // 2) % self.D if kind == "halves" else j ^ 1

    @staticmethod
    def _per_column(t, D):
        """Whether t varies over the columns (a per-row value, [..., 1], or a 0-dim one does
        not: it is its own move)."""
        return t.dim() > 0 and t.shape[-1] == D and not (D == 1)

    def move(self, kind, t):
        """swap_halves (kind 'halves') or swap_pairs ('pairs')."""
        if not self._per_column(t, self.D):
            return t
        return t[..., self._perm(kind, t.device)]

    def roll(self, t, k):
        """roll(x, k): torch.roll's cyclic shift of the row by k (an integer constant, any sign
        and size: it is taken mod D)."""
        if not self._per_column(t, self.D):
            return t
        return torch.roll(t, int(round(float(k))) % self.D, -1)

    def _widen(self, t):
        """t with a last dim of D (a per-row or 0-dim value repeated along the row)."""
        if t.dim() == 0:
            return self.bcast(t, (self.D,))
        return t if t.shape[-1] == self.D else self.bcast(t, (*t.shape[:-1], self.D))

    def rotate(self, kind, t):
        """Llama's rotate_half, cat(-x2, x1) of the row's halves (kind 'halves'), or GPT-J's
        rotate_every_two, (x0, x1) -> (-x1, x0) per pair of columns ('pairs')."""
        t = self._widen(t)
        h = self.D // 2
        if kind == "halves":
            return torch.cat([-t[..., h:], t[..., :h]], -1)
        return torch.stack([-t[..., 1::2], t[..., 0::2]], -1).flatten(-2)

    def col(self, kind, t):
        """colsum / colmean: the sum (mean) over every row of the op, per column; t is
        broadcast to the op's shape first (an input naming some dims counts once per row)."""
        t = self.bcast(t, self.full)
        s = t.sum(tuple(range(t.dim() - 1))) if t.dim() > 1 else t
        return s / self.rows if kind == "mean" else s

    def colout(self, v):
        """A [D] value as a [D] output."""
        if v.dim() > 1:  # from inputs the checker expanded (rows equal): row 0 has its terms
            v = v.expand(self.full).reshape(-1, self.D)[0]
        return v.expand(self.D)

    def out(self, t):
        return t

    # Set by the checker when [D] and [] inputs come expanded to the full shape (to get the
    # per-element terms of their gradients): a per-row value computed from such an input is
    # then full-shaped, with equal columns; column 0 carries its per-row terms.
    expanded_inputs = False

    def row(self, v, lead):
        """A per-row value (last dim 1, or broadcastable) as a [...] output."""
        if self.expanded_inputs and v.dim() and v.shape[-1] != 1:
            v = v[..., :1]
        return self.bcast(v, (*lead, 1))[..., 0]

    def bcast(self, t, shape):
        """t broadcast to `shape` (a value of inputs naming some dims, a per-row value, to the
        op's shape): its gradient is a sum over the dims it is broadcast over."""
        return t.expand(shape)

    def pow(self, x, p):
        return torch.pow(x, float(p))

    def red(self, kind, t):
        if kind == "sum":
            return t.sum(-1, keepdim=True)
        if kind == "mean":
            return t.mean(-1, keepdim=True)
        return _RedExtreme.apply(t, kind == "max")

    with_grad = staticmethod(_with_grad)


# ---- the Monte Carlo model ------------------------------------------------------------------------

# (unit roundoff, largest finite, smallest subnormal) of each dtype
DTYPE_INFO = {
    torch.float64: (2.0 ** -53, 1.7976931348623157e308, 5e-324),
    torch.float32: (2.0 ** -24, 3.4028234663852886e38, 1.401298464324817e-45),
    torch.bfloat16: (2.0 ** -8, 3.3895313892515355e38, 9.183549615799121e-41),
    torch.float16: (2.0 ** -11, 65504.0, 5.960464477539063e-08),
}
# How near two values must be to count as equal in a Monte Carlo run (a random fraction of
# this many roundoffs of their magnitude): ties that rounding creates, for every comparison
# (MonteCarlo.f) and for the max/min reductions' gradient (_RedExtremeTies)
TIE_ROUNDOFFS = 1024

# The comparisons under a merging tie (`same` marks values rounding may have made equal), and
# by the sign of a - b (the runs that swap the order of tied values: MonteCarlo.f).
_BY_SIGN = {"eq": lambda d: d == 0, "ne": lambda d: d != 0, "lt": lambda d: d < 0,
            "gt": lambda d: d > 0, "le": lambda d: d <= 0, "ge": lambda d: d >= 0}
_ORDER = {"eq": lambda a, b, same: same, "ne": lambda a, b, same: ~same,
          "lt": lambda a, b, same: (a < b) & ~same, "gt": lambda a, b, same: (a > b) & ~same,
          "le": lambda a, b, same: (a <= b) | same, "ge": lambda a, b, same: (a >= b) | same}

# The magnitude behind a value: the size of the terms it was computed from, which bounds its
# rounding error when it is a small difference of large terms ((|x| + 1e-30) - x, sum(x) -
# D * mean(x), the 1 + tanh(u) inside gelu_tanh for u << 0). Ties are measured against it:
# such a difference is 0 in one precision and not in another. A primitive's magnitude comes
# from its `eval` formula: add and sub keep their operands' larger magnitude, products and
# quotients scale it, select picks it, neg and abs keep it, the other builtins restart it
# from their result; reductions combine it (MonteCarlo.red).
def _mag(t):
    m = getattr(t, "_fg_mag", None)
    return m if m is not None else t.detach().abs()


def _mag_eval(n, env, device):
    """(value, magnitude) of an eval formula's node over float64 tensors; env: name -> pair."""
    if n.op == "num":
        v = torch.tensor(float(n.value), dtype=torch.float64, device=device)
        return v, v.abs()
    if n.op == "param":
        return env[n.name]
    args = [_mag_eval(a, env, device) for a in n.args]
    v = BUILTINS[n.name](*(a for a, _ in args))
    m = [b for _, b in args]
    if n.name in ("add", "sub"):
        mag = torch.maximum(m[0], m[1])
    elif n.name in ("neg", "abs"):
        mag = m[0]
    elif n.name == "mul":
        mag = m[0] * m[1]
    elif n.name == "div":
        mag = m[0] / args[1][0].abs()
    elif n.name == "select":
        mag = torch.where(args[0][0], m[1], m[2])
    elif v.dtype == torch.bool:
        return v, None  # a condition has no magnitude
    else:
        mag = v.abs()
    return v, torch.maximum(torch.nan_to_num(mag, nan=math.inf), v.abs())


def _mag_of(prim, args, r):
    """The magnitude of a primitive call's result r (args: its tensors and constants)."""
    if prim.eval is None:
        return r.detach().abs()
    env = {}
    for q, a in zip(prim.params, args):
        t = a.detach() if torch.is_tensor(a) else torch.tensor(float(a), dtype=torch.float64, device=r.device)
        env[q.name] = (t, None if t.dtype == torch.bool else _mag(a) if torch.is_tensor(a) else t.abs())
    with torch.no_grad():
        _, mag = _mag_eval(_ast(prim.eval, [q.name for q in prim.params]), env, r.device)
    return torch.maximum(mag, r.detach().abs()).expand(r.shape)


def _with_mag(t, mag):
    t._fg_mag = mag
    return t


# the smallest normal number of each dtype, by its smallest subnormal
SMALLEST_NORMAL = {5e-324: 2.2250738585072014e-308, 1.401298464324817e-45: 1.1754943508222875e-38,
                   9.183549615799121e-41: 1.1754943508222875e-38, 5.960464477539063e-08: 6.103515625e-05}
# Half types compute in float32 with approximate math allowed (fusegen_runtime.h's kFast):
# their compute roundoff is taken 8x float32's. On CUDA that math is the GPU's approximate
# instructions, tanh.approx.f32 the least exact (2^-10.99 relative, PTX ISA): taken as
# 2^-11 there (the first CUDA run's fz407_26 and fz555_2 flipped branches and lost
# cancellations by more than 2^-21 allowed).
HALF_COMPUTE_U = 2.0 ** -21
HALF_COMPUTE_U_CUDA = 2.0 ** -11

BUILTINS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "neg": lambda a: -a,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
    "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "select": lambda c, a, b: torch.where(c, a, b),
    "exp": torch.exp, "expm1": torch.expm1, "log": torch.log, "log1p": torch.log1p,
    "tanh": torch.tanh, "erf": torch.erf, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "abs": torch.abs, "pow": torch.pow, "sin": torch.sin, "cos": torch.cos,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
}

# Roundoffs per builtin: + - * / sqrt correctly rounded; the other math functions within
# 2 ulp, pow within 4 (glibc's and CUDA's accuracy tables), and the fuzzer's Exact value
# comes from PyTorch's own implementations of them.
UNITS = {"exp": 4, "expm1": 4, "log": 4, "log1p": 4, "tanh": 4, "erf": 4, "rsqrt": 4, "pow": 8,
         "sin": 4, "cos": 4, "floor": 0, "ceil": 0, "round": 0, "trunc": 0}  # (rounding: exact)

_PARSED: Dict[tuple, object] = {}
_LIB: Dict[tuple, P.Prim] = {}


def _library():
    if not _LIB:
        for p in P.load_primitives():
            _LIB[p.key] = p
    return _LIB


def _ast(text, names):
    key = (text, tuple(names))
    if key not in _PARSED:
        scope = {n: Node("param", name=n) for n in names}
        _PARSED[key] = lang.parse_formula(text, scope)
    return _PARSED[key]


class _PrimOp(torch.autograd.Function):
    """A primitive as fusegen documents it: forward by its eval formula, backward by its grad
    rules, every operation perturbed."""

    @staticmethod
    def forward(ctx, model, prim, *args):
        ctx.model, ctx.prim, ctx.args = model, prim, args
        env = {q.name: a for q, a in zip(prim.params, args)}
        with torch.no_grad():
            if prim.eval is None:
                raise KeyError(f"{prim.signature()} has no eval formula")
            y = model.evaluate(_ast(prim.eval, [q.name for q in prim.params]), env, builtins=True)
            if prim.name == "with_grad":
                # its value, at the join of its arguments' shapes (docs/spec-language.md): a
                # per-row value with a full-shaped x is full-shaped, so its gradient is
                # grad * dx per element, not a row's sum of grad times dx
                y = y.expand(torch.broadcast_shapes(*(a.shape for a in args if torch.is_tensor(a)))).clone()
        ctx.result = y
        return y

    @staticmethod
    def backward(ctx, g):
        model, prim = ctx.model, ctx.prim
        names = [q.name for q in prim.params]
        env = {q.name: a.detach() if torch.is_tensor(a) else a for q, a in zip(prim.params, ctx.args)}
        env.update(grad=g, result=ctx.result, D=model.c(model.D), rows=model.c(model.rows))
        out = []
        with torch.no_grad():
            for i, (q, a) in enumerate(zip(prim.params, ctx.args)):
                rule = prim.grads.get(q.name)
                if q.kind != "value" or not ctx.needs_input_grad[2 + i] or rule is None:
                    out.append(None)
                    continue
                r = model.evaluate(_ast(rule, names + ["grad", "result", "D", "rows"]), env, builtins=False)
                # each contribution perturbed once more: fusegen adds a node's contributions
                # one by one, and a partial sum can be large where they cancel ((a + L) - L)
                out.append(model.perturb(model.reduce_to(r, a.shape), model.u_compute))
        return (None, None, *out)


class MonteCarlo(Exact):
    AMP = 2.0  # perturbations up to 2u

    def __init__(self, dtype, device="cpu", seed=0, u_scale=1.0, emulate_range=True):
        super().__init__(device)
        self.dtype = dtype
        half = dtype in (torch.float16, torch.bfloat16)
        cdt = torch.float32 if half else dtype
        self.compute_dtype = cdt
        on_cuda = str(device).startswith("cuda")
        self.u_compute = ((HALF_COMPUTE_U_CUDA if on_cuda else HALF_COMPUTE_U) if half
                          else DTYPE_INFO[cdt][0]) * u_scale
        self.max_compute = DTYPE_INFO[cdt][1] if emulate_range else math.inf
        self.tiny_compute = DTYPE_INFO[cdt][2] * u_scale
        # Half types compute with approximate math (fusegen_runtime.h kFast): its division
        # returns 0 where the divisor passes 2^126, whatever the numerator, so a quotient
        # below |numerator| x 2^-126 (silu(-88) = -88 / (1 + e^88): -5e-37; its gradient
        # 1.4e-34) may come out 0 (difffuzz fz518_41, on CUDA): 2^-100 absolute allowed.
        self.fast_tiny = 2.0 ** -100 if half else 0.0
        u_store, max_store, tiny_store = DTYPE_INFO[dtype]
        self.u_store, self.tiny_store = u_store * u_scale, tiny_store * u_scale
        self.max_store = max_store if emulate_range else math.inf
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed)
        # This run's tie width, as a fraction of TIE_ROUNDOFFS (see f). Rounding can make near
        # values equal, or equal ones unequal, or swap their order (glibc's tanhf(x) is x plus
        # an ulp at x = 1e-4, where tanh(x) < x: difffuzz fz605_16). Within the width, runs of
        # even seed take the values as equal, those of seed 4k + 1 take the first as the
        # smaller, those of 4k + 3 as the larger (tie_split: the sign of a - b), alike for
        # every comparison of the run; so four consecutive seeds see every outcome of a tie.
        # (Comparing the perturbed values as they are left it to chance: fz605_16's three runs
        # of odd seed all kept the order.)
        self.tie_frac = float(torch.rand((), generator=self.gen, dtype=torch.float64, device=device))
        self.tie_split = 0.0 if seed % 2 == 0 else (-1.0 if seed % 4 == 1 else 1.0)
        self.red_tie_scale = 4.0 ** -(seed % 6)  # (_RedExtremeTies)
        _library()

    def setup(self, lead, D, nd):
        super().setup(lead, D, nd)
        self._exact = Exact(self.device)
        self._exact.setup(lead, D, nd)
        self._exact.expanded_inputs = self.expanded_inputs

    def ints(self, f):
        # fusegen computes integers (D, j, rows, pos(S) and what + - * min max where make of
        # them) exactly in the compute type: no rounding, no ties
        return f(self._exact)

    def move(self, kind, t):
        r = super().move(kind, t)
        return _with_mag(r, super().move(kind, _mag(t))) if self.u_compute and r is not t else r

    def roll(self, t, k):
        r = super().roll(t, k)
        return _with_mag(r, super().roll(_mag(t), k)) if self.u_compute and r is not t else r

    def rotate(self, kind, t):
        r = super().rotate(kind, t)
        if not self.u_compute:
            return r
        return _with_mag(r, self._widen(_mag(t))[..., self._perm(kind, r.device)])

    def col(self, kind, t):
        """A sum over the rows with its rounding, as a row sum's: u sqrt(rows) sum|terms|
        (plain sums in the compute type per chunk of rows, the chunks added in order); the
        mean's division rounded once more."""
        # (the centre run, u = 0, computes the same: the spread is measured around it)
        if t.requires_grad and self.u_compute:
            t = _with_mag(_Edge.apply(t, self), _mag(t))
        te = self.bcast(t, self.full)
        dims = tuple(range(te.dim() - 1))
        s = te.sum(dims) if dims else te
        if self.u_compute:
            n = max(self.rows, 1)
            s = s + self.u_compute * math.sqrt(n) * te.detach().abs().sum(dims) * self._r(s)
        if kind == "mean":
            s = s / self.rows
            if self.u_compute:  # (added as a constant: no inf * 0 in the backward)
                s = s + (self.perturb(s.detach(), self.u_compute) - s.detach())
        if not self.u_compute:
            return s
        mag = _mag(t).expand(self.full).sum(dims) if dims else _mag(t)
        if kind == "mean":
            mag = mag / self.rows
        return _with_mag(s, torch.maximum(mag.nan_to_num(math.inf), s.detach().abs()))

    def c(self, v):
        """A constant of the spec (a number, an attr, D) as the kernels see it: T(v), rounded
        to the compute type, in the Monte Carlo runs (exact in the centre run). Rounded, not
        perturbed: an integer stays one (pow(x, 3) of a negative x must not turn NaN)."""
        t = torch.tensor(float(v), dtype=torch.float64, device=self.device)
        return t.to(self.compute_dtype).to(torch.float64) if self.u_compute else t

    def _r(self, t):
        """Random factors in [-1, -1/2] or [1/2, 1]: every rounding is felt at least half
        way in each run, so one dominant rounding cannot be missed by chance."""
        r = torch.rand(t.shape, generator=self.gen, dtype=torch.float64, device=t.device)
        return torch.where(r < 0.5, -0.5 - r, r)

    def perturb(self, t, u, limit=None, tiny=None):
        """t rounded as the model says: times (1 + 2u r); beyond `limit`, inf; below the
        dtype's smallest normal, stochastically rounded to its subnormal grid (multiples of
        `tiny`), so what underflows to 0 in the dtype does here too (exp(-500) is 0 in
        float32). Exact zeros stay zero: x - x is 0 in any precision, and a row of zeros
        ties for its max and min."""
        limit = self.max_compute if limit is None else limit
        tiny = self.tiny_compute if tiny is None else tiny
        y = t if u == 0 else t * (1 + self.AMP * u * self._r(t))
        if math.isfinite(limit):
            y = torch.where(y.abs() > limit, y * math.inf, y)
            if tiny:
                small = y.abs() < SMALLEST_NORMAL.get(tiny, 0.0)
                if small.any():
                    jitter = torch.rand(y.shape, generator=self.gen, dtype=torch.float64, device=y.device)
                    grid = torch.floor(y / tiny + jitter) * tiny
                    y = torch.where(small, grid, y)
        return y

    def round_centre(self, t):
        """The centre run's (u = 0) result of an operation: rounded to the compute type, as the
        kernels hold it, where that type's values are normal (beyond its range and among its
        subnormals, unrounded: overflow and the subnormals' lost digits are the perturbed
        runs' to show, fz518_41). What saturates there saturates here: float32's erf(4) is 1
        and tanh(-9.5) -1, so the 1 + tanh(u) inside gelu_tanh is 0 where float64's is 2e-8,
        and a comparison with 1 or 0 goes the kernels' way (difffuzz fz3002_66, fz3002_73);
        the runs' spread is then measured from the branch the kernels take."""
        if self.compute_dtype == torch.float64 or not t.is_floating_point():
            return t
        _, largest, tiny = DTYPE_INFO[self.compute_dtype]
        a = t.abs()
        normal = (a <= largest) & ((a >= SMALLEST_NORMAL[tiny]) | (a == 0))
        return torch.where(normal, t.to(self.compute_dtype).double(), t)

    def evaluate(self, n: Node, env, builtins: bool):
        """A formula of primitives.yaml over tensors, each operation perturbed. In eval
        formulas calls are builtins; in grad rules they are primitives (their eval formulas)."""
        if n.op == "num":
            return self.c(n.value)
        if n.op == "param":
            v = env[n.name]
            return v if torch.is_tensor(v) else self.c(v)
        args = [self.evaluate(a, env, builtins) for a in n.args]
        if builtins or (n.name, len(args)) not in _LIB:
            fn = BUILTINS.get(n.name)
            if fn is None:
                raise KeyError(f"unknown builtin {n.name}")
            r = fn(*args)
            if r.dtype == torch.bool:
                return r
            if not self.u_compute:
                return self.round_centre(r)
            return self.perturb(r, self.u_compute * UNITS.get(n.name, 1))
        prim = _LIB[(n.name, len(args))]
        if n.name in _ORDER:
            return self.f(n.name, None, *args)  # a comparison of a rule sees this run's ties
        if prim.kind == "reduction" or prim.eval is None:
            raise KeyError(f"rule calls {prim.signature()}, which the model cannot evaluate")
        inner = {q.name: a for q, a in zip(prim.params, args)}
        return self.evaluate(_ast(prim.eval, [q.name for q in prim.params]), inner, builtins=True)

    def bcast(self, t, shape):
        # the sum of the gradient over the dims t is broadcast over, with its roundoff (fusegen
        # sums a named-dims input's, a [D] value's, a per-row value's over the elements of
        # the op's shape: exact in autograd's expand)
        if self.u_compute and t.requires_grad and tuple(t.shape) != tuple(shape):
            return _with_mag(_Broadcast.apply(t, tuple(shape), self), _mag(t).expand(shape))
        return t.expand(shape)

    def reduce_to(self, g, shape):
        """g summed to an argument's shape: the sum over a row, then over rows (a [D], [] or
        named-dims argument used by every row: a column sum), each with its roundoff."""
        shape = tuple(shape)
        if tuple(g.shape) == shape:
            return g
        g = g.expand(torch.broadcast_shapes(g.shape, shape))
        if tuple(g.shape) == shape:
            return g
        out = g
        if len(shape) == 0 or shape[-1] == 1 and g.dim() and g.shape[-1] != 1:
            n = g.shape[-1] if g.dim() else 1
            s = g.sum(-1, keepdim=True)
            s = s + self.u_compute * math.sqrt(max(n, 1)) * g.abs().sum(-1, keepdim=True) * self._r(s)
            out = s
        s = out.sum_to_size(shape) if shape else out.sum()
        n = out.numel() // max(s.numel(), 1)
        if n > 1 and self.u_compute:
            terms = out.abs().sum_to_size(shape) if shape else out.abs().sum()
            s = s + self.u_compute * math.sqrt(n) * terms * self._r(s)
        return s

    def f(self, name, spelled, *args):
        """A primitive call. Per-row results are rounded like any other value: fusegen keeps
        them in the compute type, in registers and in its saved statistics (1ccccee). (They
        were rounded to the storage dtype here once, 2^-8 in bfloat16: that perturbed a row
        sum of 1000 by 8 where float32 errs by 4e-5, saturated nonlinearities in every run
        and hid the real error source, difffuzz fz407_26.)"""
        key = (name, len(args))
        prim = _LIB.get(key)
        if prim is None:
            raise KeyError(f"the model has no primitive {name}/{len(args)}")
        if prim.returns_bool:
            if name in _ORDER and self.u_compute and len(args) == 2:
                # Rounding makes nearby values equal ((2 + 1e-9)^2.5 is 2^2.5 in float32;
                # gelu(x) is x for large x), which random perturbation never does: within
                # tie_frac x 1024 roundoffs, values count as equal, in every comparison of a
                # run alike (min's gradient asks a < b, then a == b: both must see the tie)
                a, b = (x if torch.is_tensor(x) else self.c(x) for x in args)
                width = TIE_ROUNDOFFS * self.u_compute * self.tie_frac * torch.maximum(_mag(a), _mag(b))
                same = (a - b).abs() <= width
                if self.tie_split:  # within the width, a below (or above) b, whatever they are
                    d = torch.where(same, torch.full_like(a, self.tie_split), torch.sign(a - b))
                    return _BY_SIGN[name](d)
                return _ORDER[name](a, b, same)
            env = {q.name: a for q, a in zip(prim.params, args)}
            return self.evaluate(_ast(prim.eval, [q.name for q in prim.params]), env, builtins=True)
        if prim.name == "detach":
            return args[0].detach()
        targs = [a if torch.is_tensor(a) else self.c(a) for a in args]
        r = _PrimOp.apply(self, prim, *targs)
        return _with_mag(r, _mag_of(prim, targs, r)) if self.u_compute else r

    def out(self, t):
        return _Store.apply(t, self, self.u_store, self.max_store, self.tiny_store)

    def red(self, kind, t):
        if t.requires_grad:
            t = _with_mag(_Edge.apply(t, self), _mag(t))
        if kind in ("max", "min") and self.u_compute:
            # max's rule routes the gradient to every element equal to the result; rounding
            # (a saturated erf, tanh or sigmoid) makes near-maximal elements equal to it:
            # within a random 0 to 1024 roundoffs of it, an element counts as a tie
            r = _RedExtremeTies.apply(t, kind == "max", self)
            return _with_mag(r, torch.maximum(_mag(t).amax(-1, keepdim=True), r.detach().abs())) if t.numel() else r
        r = super().red(kind, t)
        if kind in ("sum", "mean") and self.u_compute:
            n = max(t.shape[-1], 1) if t.dim() else 1
            err = self.u_compute * math.sqrt(n) * t.detach().abs().sum(-1, keepdim=True)
            if kind == "mean":
                err = err / n
            r = r + err * self._r(r)
            r = _with_mag(r, _mag(t).sum(-1, keepdim=True) / (n if kind == "mean" else 1))
        return r


class _Store(torch.autograd.Function):
    """Rounding to the storage dtype, forward and backward."""

    @staticmethod
    def forward(ctx, t, model, u, limit, tiny):
        ctx.model, ctx.u, ctx.limit, ctx.tiny = model, u, limit, tiny
        return model.perturb(t, u, limit, tiny)

    @staticmethod
    def backward(ctx, g):
        return ctx.model.perturb(g, ctx.u, ctx.limit, ctx.tiny), None, None, None, None


class _Broadcast(torch.autograd.Function):
    """A broadcast whose backward sums with the model's roundoff (MonteCarlo.reduce_to)."""

    @staticmethod
    def forward(ctx, t, shape, model):
        ctx.model, ctx.shape = model, tuple(t.shape)
        return t.expand(shape)

    @staticmethod
    def backward(ctx, g):
        return ctx.model.reduce_to(g, ctx.shape), None, None


class _Edge(torch.autograd.Function):
    """One use of a value: the gradient it contributes back is perturbed (see _PrimOp)."""

    @staticmethod
    def forward(ctx, t, model):
        ctx.model = model
        return t.view_as(t)

    @staticmethod
    def backward(ctx, g):
        return ctx.model.perturb(g, ctx.model.u_compute), None


class _RedExtremeTies(torch.autograd.Function):
    """max/min whose gradient is split among the elements within a random 0 to 1024 roundoffs
    of the result (the Monte Carlo model of ties that rounding creates)."""

    @staticmethod
    def forward(ctx, t, is_max, model):
        r = t.amax(-1, keepdim=True) if is_max else t.amin(-1, keepdim=True)
        ctx.save_for_backward(t, r)
        ctx.model = model
        return r

    @staticmethod
    def backward(ctx, g):
        t, r = ctx.saved_tensors
        m = ctx.model
        # The width: a random part of this run's scale (m.red_tie_scale: 1024 roundoffs of the
        # result down to 1, a factor 4 apart in six consecutive runs), so the runs see ties of
        # the many elements saturation makes equal and of the two or three that rounding alone
        # does (x / (|x| + 1e-6) of a row's largest negative elements: difffuzz fz12_8)
        frac = m.red_tie_scale * (0.5 + 0.5 * torch.rand(r.shape, generator=m.gen, dtype=r.dtype,
                                                         device=r.device))
        width = TIE_ROUNDOFFS * m.u_compute * r.abs() * frac
        return _split_among((t - r).abs() <= width, g), None, None
