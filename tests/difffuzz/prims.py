"""The primitive library as the fuzzer sees it: read from templates/primitives.yaml (so a new
primitive is fuzzed without code changes), plus the fuzzer's OWN table of PyTorch spellings
and domain rules. The spellings are deliberately not the `torch:` fields of primitives.yaml:
the reference must be independent of fusegen's, or a bug shared by both would go unseen.

A primitive without an entry in TORCH is an error at start-up (the fuzzer cannot check what
it cannot compute); one without a DOMAIN entry is taken to be defined for every real input."""
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Param:
    name: str
    kind: str  # value | bool | const | random


@dataclass
class Prim:
    name: str
    params: List[Param]
    kind: str = "elementwise"  # or reduction
    returns_bool: bool = False
    declares_gradient: bool = False
    surrogate: bool = False  # declares_gradient: surrogate (with_surrogate_grad)
    eval: Optional[str] = None                                # fusegen's forward formula
    grads: Dict[str, str] = field(default_factory=dict)        # fusegen's derivative rules
    combine: Optional[str] = None
    finish: Optional[str] = None
    expand: Optional[str] = None  # a primitive defined by a formula over others (rotate_half)

    @property
    def key(self):
        return (self.name, len(self.params))

    def signature(self):
        return f"{self.name}({', '.join(p.name + ('' if p.kind == 'value' else ': ' + p.kind) for p in self.params)})"


def _parse_signature(sig: str):
    m = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*\((.*)\)\s*", sig)
    if not m:
        raise SystemExit(f"difffuzz: cannot read the primitive signature {sig!r}")
    params = []
    for p in filter(None, (s.strip() for s in m.group(2).split(","))):
        name, _, kind = (s.strip() for s in p.partition(":"))
        params.append(Param(name, kind or "value"))
    return m.group(1), params


def _unquote(s: str) -> str:
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    return s


def _split_top(text: str, sep=","):
    """Splits at sep outside parentheses and quotes."""
    parts, depth, quote, cur = [], 0, None, ""
    for ch in text:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'" and (i == 0 or not line[i - 1].isalnum()):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line


def _read_library(text: str):
    """The entries of primitives.yaml as dicts (name, kind, returns, declares_gradient, eval,
    combine, finish, grad): PyYAML when present, else a reader of the file's own layout
    (one `- name:` per entry, two-space keys, grad as a flow map or a block of `    p: rule`)."""
    try:
        import yaml  # type: ignore
        return yaml.safe_load(text)
    except ImportError:
        pass
    entries, cur, in_grad = [], None, False
    for line in text.split("\n"):
        if line.lstrip().startswith("#") or not line.strip():
            continue
        body = _strip_comment(line.rstrip())
        m = re.match(r"^- name:\s*(.+)$", body)
        if m:
            cur = {"name": _unquote(m.group(1))}
            entries.append(cur)
            in_grad = False
            continue
        m = re.match(r"^  (\w+):\s*(.*)$", body)
        if m and cur is not None:
            k, v = m.group(1), m.group(2).strip()
            in_grad = k == "grad" and not v
            if k == "grad" and v:
                cur["grad"] = {}
                for part in _split_top(v.strip()[1:-1]):
                    pk, _, pv = part.partition(":")
                    cur["grad"][pk.strip()] = _unquote(pv)
            elif k == "grad":
                cur["grad"] = {}
            else:
                cur[k] = _unquote(v)
            continue
        m = re.match(r"^    (\w+):\s*(.*)$", body)
        if m and in_grad and cur is not None:
            cur["grad"][m.group(1)] = _unquote(m.group(2))
    return entries


def load_primitives(path: Optional[str] = None) -> List[Prim]:
    """Every primitive of the library."""
    path = path or os.path.join(ROOT, "templates", "primitives.yaml")
    with open(path, encoding="utf-8") as f:
        entries = _read_library(f.read())
    prims: List[Prim] = []
    for e in entries:
        name, params = _parse_signature(str(e["name"]))
        p = Prim(name, params, kind=str(e.get("kind", "elementwise")),
                 returns_bool=str(e.get("returns", "")) == "bool",
                 declares_gradient=e.get("declares_gradient") in (True, "true", "surrogate"),
                 surrogate=e.get("declares_gradient") == "surrogate")
        p.eval = None if e.get("eval") is None else str(e["eval"])
        p.grads = {str(k): str(v) for k, v in (e.get("grad") or {}).items()}
        p.combine = e.get("combine")
        p.finish = None if e.get("finish") is None else str(e["finish"])
        p.expand = None if e.get("expand") is None else str(e["expand"])
        prims.append(p)
    if not prims:
        raise SystemExit(f"difffuzz: no primitives read from {path}")
    return prims


# ---- the fuzzer's own PyTorch spellings ---------------------------------------------------
# Keyed by (name, arity). Arguments are Python expressions of float64 tensors (row values are
# [..., 1], [D] values are [D], 0-dim for scalars and constants); `{0}`, `{1}`... by position.
# Reductions and with_grad/detach go through helpers of the arithmetic model `_M` (reference.py),
# which implement the semantics the docs state (a max reduction's gradient is split among the
# maximal elements; with_grad's gradient is the stated one).
TORCH: Dict[tuple, str] = {
    ("add", 2): "({0} + {1})",
    ("sub", 2): "({0} - {1})",
    ("mul", 2): "({0} * {1})",
    ("div", 2): "({0} / {1})",
    ("neg", 1): "(-{0})",
    ("lt", 2): "({0} < {1})",
    ("le", 2): "({0} <= {1})",
    ("gt", 2): "({0} > {1})",
    ("ge", 2): "({0} >= {1})",
    ("eq", 2): "({0} == {1})",
    ("ne", 2): "({0} != {1})",
    ("where", 3): "torch.where({0}, {1}, {2})",
    ("exp", 1): "torch.exp({0})",
    ("expm1", 1): "torch.special.expm1({0})",
    ("log", 1): "torch.log({0})",
    ("log1p", 1): "torch.special.log1p({0})",
    ("sqrt", 1): "torch.sqrt({0})",
    ("rsqrt", 1): "(1.0 / torch.sqrt({0}))",
    ("tanh", 1): "torch.tanh({0})",
    ("erf", 1): "torch.special.erf({0})",
    ("abs", 1): "torch.abs({0})",
    ("pow", 2): "_M.pow({0}, {1})",
    ("square", 1): "({0} * {0})",
    ("min", 2): "torch.minimum({0}, {1})",
    ("max", 2): "torch.maximum({0}, {1})",
    ("sigmoid", 1): "torch.special.expit({0})",
    ("relu", 1): "torch.where({0} > 0, {0}, torch.where({0} != {0}, {0}, 0.0))",
    ("leaky_relu", 2): "torch.where({0} > 0, {0}, {0} * {1})",
    ("silu", 1): "({0} * torch.special.expit({0}))",
    ("softplus", 1): "torch.logaddexp({0}, torch.zeros_like({0}))",
    ("gelu", 1): "(0.5 * {0} * (1.0 + torch.special.erf({0} / 2.0 ** 0.5)))",
    ("gelu_tanh", 1): "(0.5 * {0} * (1.0 + torch.tanh((2.0 / torch.pi) ** 0.5 * ({0} + 0.044715 * {0} ** 3))))",
    ("sum", 1): "_M.red('sum', {0})",
    ("mean", 1): "_M.red('mean', {0})",
    ("max", 1): "_M.red('max', {0})",
    ("min", 1): "_M.red('min', {0})",
    ("with_grad", 3): "_M.with_grad({0}, {1}, {2})",
    ("with_grad", 5): "_M.with_grad({0}, {1}, {2}, {3}, {4})",
    ("with_grad", 7): "_M.with_grad({0}, {1}, {2}, {3}, {4}, {5}, {6})",
    ("detach", 1): "{0}.detach()",
    ("sin", 1): "torch.sin({0})",
    ("cos", 1): "torch.cos({0})",
    ("floor", 1): "torch.floor({0})",
    ("mod", 2): "torch.remainder({0}, {1})",
    ("ceil", 1): "torch.ceil({0})",
    ("round", 1): "torch.round({0})",
    ("trunc", 1): "torch.trunc({0})",
    ("sign", 1): "torch.sign({0})",
    ("clamp", 3): "torch.clamp(torch.broadcast_tensors({0}, {1}, {2})[0], {1}, {2})",
    # moves and the rotations over them (need an even D), reductions over rows: helpers of the
    # model (reference.py), from their definitions in docs/spec-language.md, not primitives.yaml's
    ("swap_halves", 1): "_M.move('halves', {0})",
    ("swap_pairs", 1): "_M.move('pairs', {0})",
    ("roll", 2): "_M.roll({0}, {1})",
    ("rotate_half", 1): "_M.rotate('halves', {0})",
    ("rotate_pairs", 1): "_M.rotate('pairs', {0})",
    ("colsum", 1): "_M.col('sum', {0})",
    ("colmean", 1): "_M.col('mean', {0})",
}
# Notes on the spellings that differ from the obvious one:
# - square as a product and rsqrt as 1/sqrt: the derivative comes from autograd of a different
#   formula than fusegen's rule, so a wrong rule is caught.
# - relu as a where: its gradient at 0 is 0, as fusegen documents, and NaN stays NaN (torch.clamp_min's is 1 at
#   its bound in torch 2.11: difffuzz seed 400 spec 32 met x1 + x2 == 0); leaky_relu at 0 takes the
#   slope (fusegen's rule where(x > 0, grad, grad * slope)), which torch.where reproduces.
# - softplus as logaddexp(x, 0): exact for every x, independent of fusegen's stable form.
# - the two GELUs from their defining formulas, not F.gelu.
# - torch.minimum/maximum split the gradient evenly at a tie, as primitives.yaml documents.


# ---- domain rules ----------------------------------------------------------------------------
# What each value parameter needs so the result is finite and well-conditioned; the generator
# (gen.py) makes the argument satisfy it. 'positive': > 0 and away from 0; 'bounded': at most
# ~20, so exp stays finite in float32; 'any': every real.
DOMAIN: Dict[tuple, Dict[str, str]] = {
    ("log", 1): {"x": "positive"},
    ("log1p", 1): {"x": "positive"},
    ("sqrt", 1): {"x": "positive"},
    ("rsqrt", 1): {"x": "positive"},
    ("div", 2): {"b": "nonzero"},
    ("mod", 2): {"b": "nonzero"},
    ("exp", 1): {"x": "bounded"},
    ("expm1", 1): {"x": "bounded"},
    ("pow", 2): {"x": "pow_base"},  # positive unless the exponent is a non-negative integer
    ("sin", 1): {"x": "bounded"},
    ("cos", 1): {"x": "bounded"},
}


# Primitives with a `random` parameter draw numbers the oracle would have to redraw from the
# op's (seed, offset): they are not generated. The generated tests of the specs that use them
# compare every element with the reference's redraw (fusegen_ops._support.uniform, itself
# checked against Random123's known answer), so they are covered there.
def _draws(p: Prim) -> bool:
    return any(q.kind == "random" for q in p.params)


# Whole-tensor reductions (kind `total`: sum_all, max_all, min_all) make [] outputs, computed
# after every row; the generator draws outputs per element and per row only, so they are not
# generated either. The generated tests of the specs using them (cross_entropy_mean,
# rmsnorm_fp8_tensor) and tests/unit/test_output_types.cpp cover them.
def _whole(p: Prim) -> bool:
    return p.kind == "total"


# Views of a packed last dim (chunk, place) are not called as primitives: a spec reads a packed
# input as chunk(gu, c), which the reference prints as a slice of its own (reference.py), and
# place is chunk's adjoint, which only derivative rules produce.
def _views(p: Prim) -> bool:
    return p.kind == "view"


# with_surrogate_grad is with_grad to the fuzzer's model (the stated gradient, which its
# reference always takes): the with_grads it generates cover it; the generated tests (gradcheck
# skipped, the backward against the reference's surrogate) and tests/python cover the rest.
def _surrogate(p: Prim) -> bool:
    return p.surrogate


def check_coverage(prims: List[Prim]):
    missing = [p.signature() for p in prims
               if p.key not in TORCH and not _draws(p) and not _whole(p) and not _views(p)
               and not _surrogate(p)]
    if missing:
        raise SystemExit("difffuzz: no PyTorch spelling for the primitive(s) " + ", ".join(missing) +
                         " of templates/primitives.yaml: add one to TORCH in tests/difffuzz/prims.py "
                         "(and a DOMAIN rule if it is not defined for every real input)")
    for p in prims:
        for name in DOMAIN.get(p.key, {}):
            if name not in [q.name for q in p.params]:
                raise SystemExit(f"difffuzz: DOMAIN rule for {p.signature()} names an unknown "
                                 f"parameter '{name}'")


def load(path: Optional[str] = None) -> List[Prim]:
    """The library, checked for coverage, with lang.REDUCTIONS filled in."""
    import lang
    prims = load_primitives(path)
    check_coverage(prims)
    prims = [p for p in prims
             if not _draws(p) and not _whole(p) and not _views(p) and not _surrogate(p)]
    lang.REDUCTIONS.clear()
    lang.REDUCTIONS.update(p.key for p in prims if p.kind == "reduction")
    lang.INTEGER_CLOSED.clear()
    lang.PARAM_KINDS.clear()
    for p in prims:
        lang.PARAM_KINDS[p.key] = [q.kind for q in p.params]
        lang.INTEGER_CLOSED[p.key] = integer_closed(p)
    return prims


_CLOSED_BUILTINS = {"add", "sub", "mul", "neg", "abs", "select", "lt", "le", "gt", "ge", "eq", "ne"}


def integer_closed(p: Prim) -> bool:
    """Whether the primitive keeps integers integers (docs/spec-language.md): an elementwise
    one whose eval uses only + - * unary -, abs, select, comparisons and integer literals; a
    reduction or move without a finish."""
    if p.expand is not None:
        return False  # typed by its expansion (lang.value_type)
    if p.kind != "elementwise":
        return p.finish is None
    if p.eval is None:
        return False
    import lang
    try:
        ast = lang.parse_formula(p.eval, {q.name: lang.Node("param", name=q.name) for q in p.params})
    except lang.ParseError:
        return False

    def closed(n):
        if n.op == "num":
            return lang.is_int_literal(n.value)
        if n.op == "call" and n.name not in _CLOSED_BUILTINS:
            return False
        return all(closed(a) for a in n.args)
    return closed(ast)
