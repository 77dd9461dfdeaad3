"""The fuzzer's own model of a fusegen spec: an expression DAG, shape classes, a parser of the
formula language and of the C++ subset of `functions:` headers, and printers back to both.

The reference is always printed from a spec read back by this parser (generated specs and
kept regression specs alike), so a regression is just a spec file. Nothing here uses
fusegen's code or its generated reference."""
import math
import re
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

FULL, COL, ROW, SCALAR, CONST = "full", "col", "row", "scalar", "const"
SPELL = {FULL: "[..., D]", COL: "[D]", ROW: "[...]", SCALAR: "[]"}
UNSPELL = {v.replace(" ", ""): k for k, v in SPELL.items()}
_RANK = {CONST: 0, SCALAR: 1, COL: 2, ROW: 2, FULL: 3}

# Primitives that read other columns of the row (docs/spec-language.md, "Moves"): the two
# permutations and the rotations defined over them, by family (one family per op: moves of two
# kinds may not be nested, in the formulas or in the derived backward)
MOVES = {"swap_halves": "halves", "swap_pairs": "pairs"}
ROTATIONS = {"rotate_half": "halves", "rotate_pairs": "pairs"}
COLUMN_REDUCTIONS = {"colsum", "colmean"}  # reductions over rows: [D] values


@dataclass(frozen=True)
class Shape:
    """An input's shape as the spec writes it: the batch `...`, the named leading dims it has
    (a subsequence of the op's), and its last dim: 0 none, 1 D, n >= 2 packed n*D."""
    batch: bool
    dims: Tuple[str, ...] = ()
    d: int = 1

    @property
    def cls(self) -> str:
        """Its class in the [rows, D] view: with any leading dim it varies per row."""
        lead = self.batch or bool(self.dims)
        if self.d:
            return FULL if lead else COL
        return ROW if lead else SCALAR

    @property
    def mapped(self) -> bool:
        """Named dims without the batch: broadcast over the dims it omits, read at a row of its own."""
        return not self.batch and bool(self.dims)

    def spell(self) -> str:
        parts = (["..."] if self.batch else []) + list(self.dims)
        if self.d:
            parts.append("D" if self.d == 1 else f"{self.d}*D")
        return "[" + ", ".join(parts) + "]"

    def sizes(self, batch, named: Dict[str, int], D: int):
        """Its tensor shape for a call with batch dims `batch`, the op's named dims' sizes and D."""
        return ([*batch] if self.batch else []) + [named[d] for d in self.dims] + (
            [self.d * D] if self.d else [])


def class_shape(cls: str) -> Shape:
    return {FULL: Shape(True), COL: Shape(False), ROW: Shape(True, (), 0), SCALAR: Shape(False, (), 0)}[cls]


def parse_shape(entries) -> Shape:
    batch, dims, d = False, [], 0
    for i, e in enumerate(entries):
        e = str(e).strip()
        if e == "...":
            if i:
                raise ParseError("'...' must come first")
            batch = True
        elif e == "D" or re.fullmatch(r"[2-8]\*D", e):
            if i != len(entries) - 1:
                raise ParseError("D must come last")
            d = 1 if e == "D" else int(e[0])
        elif re.fullmatch(r"[A-Za-z_]\w*", e):
            dims.append(e)
        else:
            raise ParseError(f"unsupported shape entry {e!r}")
    return Shape(batch, tuple(dims), d)

CMP_OPS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
CMP_SPELL = {v: k for k, v in CMP_OPS.items()}
BIN_SPELL = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def join(a: str, b: str) -> str:
    """Broadcast of two shape classes: [D] with [...] is full."""
    if {a, b} == {COL, ROW}:
        return FULL
    return a if _RANK[a] >= _RANK[b] else b


class Node:
    """One value of the DAG. op: 'num' (value), 'input'/'attr'/'param' (name), 'D', 'call'
    (name of a primitive or a header function; args). Sharing a Node object is sharing the
    value: the reference computes it once."""
    __slots__ = ("op", "name", "value", "args", "spelling", "_cls")

    def __init__(self, op, name=None, value=None, args=(), spelling=None):
        self.op, self.name, self.value, self.args = op, name, value, list(args)
        self.spelling = spelling  # how a number is printed (C++ literal), if not repr
        self._cls = None

    def __repr__(self):
        return print_formula(self)


def num(v, spelling=None):
    return Node("num", value=float(v), spelling=spelling)


def call(name, *args):
    return Node("call", name=name, args=args)


@dataclass
class Function:
    """A C++ header function: params, a body over them, and optionally stated derivatives
    (names of other header functions, one per param)."""
    name: str
    params: List[str]
    body: Node
    derivatives: List[str] = field(default_factory=list)
    locals: List[Tuple[str, Node]] = field(default_factory=list)  # printing only


@dataclass
class Attr:
    name: str
    type: str  # float | int | bool
    default: Optional[object]


@dataclass
class Spec:
    op: str
    inputs: List[Tuple[str, str]]          # (name, class)
    attrs: List[Attr]
    lets: List[Tuple[str, Node]]
    outputs: List[Tuple[str, Node]]
    dtypes: Optional[List[str]] = None
    functions_file: Optional[str] = None
    functions: Dict[str, Function] = field(default_factory=dict)
    header_text: Optional[str] = None
    doc: Optional[str] = None
    comment: str = ""
    calls: List[Dict[str, object]] = field(default_factory=list)  # extra attr values to test
    directives: Dict[str, str] = field(default_factory=dict)
    # Named leading dims (docs/spec-language.md): each input's shape as written (absent: its
    # class's plain spelling), and the op's dims, from its inputs with `...`
    shapes: Dict[str, Shape] = field(default_factory=dict)
    dims: Tuple[str, ...] = ()

    def shape(self, name: str) -> Shape:
        return self.shapes.get(name) or class_shape(dict(self.inputs)[name])

    def full_input(self) -> str:
        """The input that gives the op its shape: the first with `...` and a last dim."""
        return next(n for n, _ in self.inputs if self.shape(n).batch and self.shape(n).d)

    def has_moves(self) -> bool:
        return any(n.op == "call" and (n.name in MOVES or n.name in ROTATIONS)
                   for n in walk([e for _, e in self.outputs + self.lets]
                                 + [f.body for f in self.functions.values()]))


def features_used(spec: "Spec") -> List[str]:
    """Which of the later sections of docs/spec-language.md a spec exercises (gen.FEATURES'
    names): named_dims, positions, moves, packed, col_reductions."""
    nodes = walk([e for _, e in spec.outputs + spec.lets])
    out = []
    if spec.dims:
        out.append("named_dims")
    if any(n.op in ("pos", "j") for n in nodes):
        out.append("positions")
    if any(n.op == "call" and (n.name in MOVES or n.name in ROTATIONS or n.name == "roll")
           for n in nodes):
        out.append("moves")
    if any(spec.shape(n).d > 1 for n, _ in spec.inputs) or any(
            e.op == "call" and e.name == "cat" for _, e in spec.outputs):
        out.append("packed")
    if any(n.op == "rows" or n.op == "call" and n.name in COLUMN_REDUCTIONS for n in nodes):
        out.append("col_reductions")
    return out


# ---- shape classes ----------------------------------------------------------------------------

REDUCTIONS: set = set()  # (name, arity) of the reduction primitives; filled by prims.load


def is_reduction(name: str, arity: int) -> bool:
    return (name, arity) in REDUCTIONS


def shape_class(n: Node, spec: "Spec", memo=None, params=None) -> str:
    """The shape class of a node: const < scalar < col, row < full; a header function call
    has its inlined body's class."""
    memo = {} if memo is None else memo
    key = id(n)
    if key in memo:
        return memo[key]
    if n.op in ("num", "D", "attr", "rows"):
        c = CONST
    elif n.op == "j":
        c = COL
    elif n.op == "pos":
        c = ROW
    elif n.op == "input":
        c = dict(spec.inputs)[n.name]
    elif n.op == "param":
        c = params[n.name]
    else:
        cs = [shape_class(a, spec, memo, params) for a in n.args]
        fn = spec.functions.get(n.name)
        if fn is not None:
            c = shape_class(fn.body, spec, {}, dict(zip(fn.params, cs)))
        elif is_reduction(n.name, len(n.args)):
            c = ROW
        elif n.name in COLUMN_REDUCTIONS:
            c = COL
        elif n.name in ("chunk", "cat"):
            c = FULL
        elif n.name in ROTATIONS:  # where(j < D / 2, ...): per column at least
            c = join(cs[0], COL) if cs[0] != CONST else COL
        else:
            c = CONST
            for x in cs:
                c = join(c, x)
    memo[key] = c
    return c


# Value types, as fusegen types formulas (docs/spec-language.md, "Integer and bool inputs, the
# column index"): D, j, rows, pos(S) and int attrs are integers; an integer literal alone does
# not make one; a primitive whose eval is integer-closed (+ - * unary -, abs, select,
# comparisons and integer literals; a reduction without a finish; a move) keeps integers
# integers. Filled by prims.load: (name, arity) -> whether the primitive is integer-closed.
INTEGER_CLOSED: Dict[tuple, bool] = {}
PARAM_KINDS: Dict[tuple, List[str]] = {}
INT, LIT, VALUE, BOOL = "int", "lit", "value", "bool"


def is_int_literal(v: float) -> bool:
    """Whether fmt_number prints v as an integer literal (fusegen reads it as an integer)."""
    s = fmt_number(v)
    return s.lstrip("-").isdigit()


def value_type(n: Node, spec: "Spec", memo=None, params=None) -> str:
    """int (an integer value), lit (an integer literal: integer with integers, else float),
    value (float) or bool (a condition)."""
    memo = {} if memo is None else memo
    if id(n) in memo:
        return memo[id(n)]
    if n.op == "num":
        t = LIT if is_int_literal(n.value) and not n.spelling else VALUE
    elif n.op in ("D", "j", "rows", "pos"):
        t = INT
    elif n.op == "attr":
        t = INT if any(a.name == n.name and a.type == "int" for a in spec.attrs) else VALUE
    elif n.op == "input":
        t = VALUE
    elif n.op == "param":
        t = params[n.name]
    else:
        ts = [value_type(a, spec, memo, params) for a in n.args]
        fn = spec.functions.get(n.name)
        key = (n.name, len(n.args))
        if fn is not None:
            t = value_type(fn.body, spec, {}, dict(zip(fn.params, ts)))
        elif n.name in CMP_SPELL:
            t = BOOL
        elif n.name in ROTATIONS:
            t = INT if ts[0] == INT else VALUE
        elif n.name in ("chunk", "cat", "colmean"):
            t = VALUE
        else:
            kinds = PARAM_KINDS.get(key, ["value"] * len(ts))
            vals = [x for k, x in zip(kinds, ts) if k == "value"]
            closed = INTEGER_CLOSED.get(key, False)
            t = INT if closed and all(x in (INT, LIT) for x in vals) and INT in vals else VALUE
    memo[id(n)] = t
    return t


def reduction_depth(n: Node, memo=None) -> int:
    """Reductions nested in n (the row plan's passes); header functions have none."""
    memo = {} if memo is None else memo
    if id(n) in memo:
        return memo[id(n)]
    d = max([reduction_depth(a, memo) for a in n.args], default=0)
    if n.op == "call" and is_reduction(n.name, len(n.args)):
        d += 1
    memo[id(n)] = d
    return d


def walk(roots):
    """Every node reachable from roots, each once, children first."""
    seen, order = set(), []
    stack = [(r, False) for r in reversed(list(roots))]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        for a in reversed(n.args):
            if id(a) not in seen:
                stack.append((a, False))
    return order


# ---- numbers ------------------------------------------------------------------------------------

def fmt_number(v: float) -> str:
    """A literal the formula language reads back to exactly v (no hex or nan; inf is the
    literal `inf`)."""
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "-0.0" if math.copysign(1, v) < 0 else "0"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    r = repr(v)
    if "e" in r and "." not in r.split("e")[0]:
        return r  # 1e-30
    return r


def f32(v: float) -> float:
    return struct.unpack("f", struct.pack("f", v))[0]


# ---- the formula language -------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)|(<=|>=|==|!=|[-+*/(),<>]))")


class ParseError(Exception):
    pass


def tokenize(text: str):
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ParseError(f"cannot read {text[pos:pos + 10]!r}")
        pos = m.end()
        if m.group(1):
            out.append(("num", m.group(1)))
        elif m.group(2):
            out.append(("id", m.group(2)))
        else:
            out.append(("p", m.group(3)))
    out.append(("end", ""))
    return out


def parse_position(parser) -> Node:
    """The rest of `pos(S)` after `pos`, in either parser: the dim's name in parentheses."""
    parser.next()
    k, dim = parser.next()
    if k != "id" or not parser.isp(")"):
        raise ParseError("pos takes one dim name")
    parser.next()
    return Node("pos", name=dim)


class FormulaParser:
    """Recursive descent with fusegen's documented precedence: comparison < + - < * / < unary -."""

    def __init__(self, text, scope: Dict[str, Node], functions: Dict[str, Function]):
        self.t, self.i, self.scope, self.functions = tokenize(text), 0, scope, functions

    def peek(self):
        return self.t[self.i]

    def next(self):
        self.i += 1
        return self.t[self.i - 1]

    def isp(self, s):
        return self.peek() == ("p", s)

    def parse(self):
        e = self.comparison()
        if self.peek()[0] != "end":
            raise ParseError(f"unexpected {self.peek()[1]!r}")
        return e

    def comparison(self):
        lhs = self.additive()
        for s, name in CMP_OPS.items():
            if self.isp(s):
                self.next()
                return call(name, lhs, self.additive())
        return lhs

    def additive(self):
        lhs = self.term()
        while self.isp("+") or self.isp("-"):
            op = self.next()[1]
            lhs = call("add" if op == "+" else "sub", lhs, self.term())
        return lhs

    def term(self):
        lhs = self.unary()
        while self.isp("*") or self.isp("/"):
            op = self.next()[1]
            lhs = call("mul" if op == "*" else "div", lhs, self.unary())
        return lhs

    def unary(self):
        if self.isp("-"):
            self.next()
            e = self.unary()
            if e.op == "num":
                return num(-e.value)
            return call("neg", e)
        return self.primary()

    def primary(self):
        kind, text = self.next()
        if kind == "num":
            return num(float(text))
        if kind == "id":
            if text == "pos" and self.isp("("):
                return parse_position(self)
            if self.isp("("):
                self.next()
                args = []
                if not self.isp(")"):
                    while True:
                        args.append(self.comparison())
                        if self.isp(","):
                            self.next()
                            continue
                        break
                if not self.isp(")"):
                    raise ParseError(f"expected ')' in the call of {text}")
                self.next()
                return call(text, *args)
            if text not in self.scope:
                raise ParseError(f"unknown name {text!r}")
            return self.scope[text]
        if (kind, text) == ("p", "("):
            e = self.comparison()
            if not self.isp(")"):
                raise ParseError("expected ')'")
            self.next()
            return e
        raise ParseError(f"unexpected {text!r}")


def parse_formula(text, scope, functions=None):
    return FormulaParser(text, scope, functions or {}).parse()


def print_formula(n: Node, names: Optional[Dict[int, str]] = None, top=True) -> str:
    """Fully parenthesized formula; nodes in `names` (lets) print as their name."""
    names = names or {}
    if not top and id(n) in names:
        return names[id(n)]
    if n.op == "num":
        s = fmt_number(n.value)
        return f"({s})" if s.startswith("-") else s
    if n.op in ("input", "attr", "param"):
        return n.name
    if n.op in ("D", "j", "rows"):
        return n.op
    if n.op == "pos":
        return f"pos({n.name})"
    a = [print_formula(x, names, False) for x in n.args]
    if n.name in BIN_SPELL and len(a) == 2:
        return f"({a[0]} {BIN_SPELL[n.name]} {a[1]})"
    if n.name in CMP_SPELL and len(a) == 2:
        return f"{a[0]} {CMP_SPELL[n.name]} {a[1]}"
    if n.name == "neg" and len(a) == 1:
        return f"(-{a[0]})"
    return f"{n.name}({', '.join(a)})"


# ---- the C++ subset of functions: headers ---------------------------------------------------

CXX_MATH = {"expf": "exp", "exp": "exp", "expm1f": "expm1", "expm1": "expm1", "logf": "log",
            "log": "log", "log1pf": "log1p", "log1p": "log1p", "tanhf": "tanh", "tanh": "tanh",
            "erff": "erf", "erf": "erf", "sqrtf": "sqrt", "sqrt": "sqrt", "rsqrtf": "rsqrt",
            "rsqrt": "rsqrt", "fabsf": "abs", "fabs": "abs", "powf": "pow", "pow": "pow",
            "fmaxf": "max", "fmax": "max", "fminf": "min", "fmin": "min"}
PRIM_TO_CXX = {"exp": "expf", "expm1": "expm1f", "log": "logf", "log1p": "log1pf",
               "tanh": "tanhf", "erf": "erff", "sqrt": "sqrtf", "rsqrt": "rsqrtf",
               "abs": "fabsf", "pow": "powf", "max": "fmaxf", "min": "fminf"}

_CXX_TOKEN = re.compile(
    r"\s*(?:((?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fF]?)|([A-Za-z_]\w*)|(<=|>=|==|!=|[-+*/(),<>?:;={}]))")


class CxxValue:
    """A parsed C++ expression: its node, and its C++ type (int, float or double); integer
    constant subexpressions are folded with C++ semantics (truncating division)."""
    __slots__ = ("node", "type", "ival")

    def __init__(self, node, type_, ival=None):
        self.node, self.type, self.ival = node, type_, ival


class CxxParser:
    def __init__(self, text: str, scope: Dict[str, Node], functions: Dict[str, Function]):
        toks, pos = [], 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _CXX_TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ParseError(f"C++: cannot read {text[pos:pos + 20]!r}")
            pos = m.end()
            if m.group(1):
                toks.append(("num", m.group(1)))
            elif m.group(2):
                toks.append(("id", m.group(2)))
            else:
                toks.append(("p", m.group(3)))
        toks.append(("end", ""))
        self.t, self.i, self.scope, self.functions = toks, 0, dict(scope), functions

    def peek(self):
        return self.t[self.i]

    def next(self):
        self.i += 1
        return self.t[self.i - 1]

    def isp(self, s):
        return self.peek() == ("p", s)

    def expect(self, s):
        if not self.isp(s):
            raise ParseError(f"C++: expected {s!r}, found {self.peek()[1]!r}")
        self.next()

    def conditional(self):
        c = self.comparison()
        if self.isp("?"):
            self.next()
            a = self.conditional()
            self.expect(":")
            b = self.conditional()
            if c.type != "bool":
                raise ParseError("C++: ?: condition must be a comparison")
            t = "double" if "double" in (a.type, b.type) else "float"
            return CxxValue(call("where", c.node, a.node, b.node), t)
        return c

    def comparison(self):
        lhs = self.additive()
        for s, name in CMP_OPS.items():
            if self.isp(s):
                self.next()
                rhs = self.additive()
                return CxxValue(call(name, lhs.node, rhs.node), "bool")
        return lhs

    def _arith(self, name, a, b):
        if a.type == "int" and b.type == "int":
            x, y = a.ival, b.ival
            if name == "add":
                v = x + y
            elif name == "sub":
                v = x - y
            elif name == "mul":
                v = x * y
            else:
                if y == 0:
                    raise ParseError("C++: integer division by zero")
                v = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)  # truncation
            return CxxValue(num(v), "int", v)
        t = "double" if "double" in (a.type, b.type) else "float"
        return CxxValue(call(name, a.node, b.node), t)

    def additive(self):
        lhs = self.term()
        while self.isp("+") or self.isp("-"):
            op = self.next()[1]
            lhs = self._arith("add" if op == "+" else "sub", lhs, self.term())
        return lhs

    def term(self):
        lhs = self.unary()
        while self.isp("*") or self.isp("/"):
            op = self.next()[1]
            lhs = self._arith("mul" if op == "*" else "div", lhs, self.unary())
        return lhs

    def unary(self):
        if self.isp("-"):
            self.next()
            e = self.unary()
            if e.type == "int":
                return CxxValue(num(-e.ival), "int", -e.ival)
            if e.node.op == "num":
                return CxxValue(num(-e.node.value), e.type)
            return CxxValue(call("neg", e.node), e.type)
        if self.isp("+"):
            self.next()
            return self.unary()
        return self.primary()

    def primary(self):
        kind, text = self.next()
        if kind == "num":
            if text[-1] in "fF":
                return CxxValue(num(f32(float(text[:-1]))), "float")
            if re.fullmatch(r"\d+", text):
                return CxxValue(num(int(text)), "int", int(text))
            return CxxValue(num(float(text)), "double")
        if kind == "id":
            if text == "pos" and self.isp("("):
                return parse_position(self)
            if self.isp("("):
                self.next()
                args = []
                if not self.isp(")"):
                    while True:
                        args.append(self.conditional())
                        if self.isp(","):
                            self.next()
                            continue
                        break
                self.expect(")")
                if text in CXX_MATH:
                    t = "float" if text.endswith("f") or text == "rsqrtf" else "double"
                    return CxxValue(call(CXX_MATH[text], *[a.node for a in args]), t)
                if text in self.functions:
                    return CxxValue(call(text, *[a.node for a in args]), "float")
                raise ParseError(f"C++: call of unknown function {text!r}")
            if text not in self.scope:
                raise ParseError(f"C++: unknown name {text!r}")
            v = self.scope[text]
            return v if isinstance(v, CxxValue) else CxxValue(v, "float")
        if (kind, text) == ("p", "("):
            # a cast (float)x / (double)x, or parentheses
            if self.peek() in (("id", "float"), ("id", "double")) and self.t[self.i + 1] == ("p", ")"):
                t = self.next()[1]
                self.next()
                e = self.unary()
                if e.type == "int":
                    return CxxValue(num(e.ival), t)
                return CxxValue(e.node, t)
            e = self.conditional()
            self.expect(")")
            return e
        raise ParseError(f"C++: unexpected {text!r}")


def parse_header(text: str) -> Dict[str, Function]:
    """The functions of a header in the subset fusegen translates (const float locals, one
    return, FUSEGEN_DERIVATIVE(...) before a function)."""
    # drop comments and preprocessor lines
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = "\n".join(l for l in text.split("\n") if not l.lstrip().startswith("#"))
    functions: Dict[str, Function] = {}
    pos = 0
    fn_re = re.compile(r"(?:FUSEGEN_DERIVATIVE\s*\(([^)]*)\)\s*)?((?:__host__|__device__|inline|static|"
                       r"__forceinline__|constexpr)\s+)*(float|double)\s+([A-Za-z_]\w*)\s*\(([^)]*)\)\s*\{", re.S)
    while True:
        m = fn_re.search(text, pos)
        if not m:
            break
        derivs = [d.strip() for d in (m.group(1) or "").split(",") if d.strip()]
        name = m.group(4)
        params = []
        for p in filter(None, (s.strip() for s in m.group(5).split(","))):
            params.append(p.split()[-1])
        depth, j = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        body = text[m.end():j - 1]
        scope = {p: Node("param", name=p) for p in params}
        fn = Function(name, params, None, derivs)
        functions[name] = fn  # visible to later functions (and itself, to report recursion)
        for stmt in filter(None, (s.strip() for s in body.split(";"))):
            sm = re.fullmatch(r"const\s+(?:float|double)\s+([A-Za-z_]\w*)\s*=\s*(.*)", stmt, re.S)
            if sm:
                v = CxxParser(sm.group(2), scope, functions).conditional()
                scope[sm.group(1)] = v if v.type != "int" else CxxValue(num(v.ival), "float")
                fn.locals.append((sm.group(1), v.node))
                continue
            rm = re.fullmatch(r"return\s+(.*)", stmt, re.S)
            if not rm:
                raise ParseError(f"C++: cannot read the statement {stmt!r} of {name}")
            p = CxxParser(rm.group(1), scope, functions)
            v = p.conditional()
            if p.peek()[0] != "end":
                raise ParseError(f"C++: trailing {p.peek()[1]!r} in {name}")
            fn.body = v.node
        if fn.body is None:
            raise ParseError(f"C++: {name} has no return")
        pos = j
    return functions


def print_cxx(n: Node, names: Dict[int, str]) -> str:
    if id(n) in names:
        return names[id(n)]
    if n.op == "num":
        if n.spelling:
            return n.spelling
        v = n.value
        if v == 0:
            return "-0.0f" if math.copysign(1, v) < 0 else "0.0f"
        s = repr(v)
        if "e" not in s and "." not in s:
            s += ".0"
        return f"({s}f)" if v < 0 else s + "f"
    if n.op == "param":
        return n.name
    a = [print_cxx(x, names) for x in n.args]
    if n.name in BIN_SPELL:
        return f"({a[0]} {BIN_SPELL[n.name]} {a[1]})"
    if n.name in CMP_SPELL:
        return f"({a[0]} {CMP_SPELL[n.name]} {a[1]})"
    if n.name == "neg":
        return f"(- {a[0]})"  # the space: -(-0.0f) must not print as the decrement --0.0f
    if n.name == "where":
        return f"({a[0]} ? {a[1]} : {a[2]})"
    if n.name in PRIM_TO_CXX:
        return f"{PRIM_TO_CXX[n.name]}({', '.join(a)})"
    return f"{n.name}({', '.join(a)})"


# ---- specs ------------------------------------------------------------------------------------

def _yaml_load(text: str):
    try:
        import yaml  # type: ignore
        return yaml.safe_load(text)
    except ImportError:
        return _mini_yaml(text)


def _scalar(s: str):
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    if s in ("true", "True"):
        return True
    if s in ("false", "False"):
        return False
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def _flow(s: str):
    s = s.strip()
    if s.startswith("{"):
        out = {}
        for part in filter(None, (p.strip() for p in s[1:-1].split(","))):
            k, _, v = part.partition(":")
            out[k.strip()] = _scalar(v)
        return out
    if s.startswith("["):
        return [p.strip() for p in s[1:-1].split(",") if p.strip()]
    return _scalar(s)


def _mini_yaml(text: str):
    """Enough YAML for the specs this fuzzer writes (block mappings two levels deep, flow
    lists and maps as values), for machines without PyYAML."""
    root: Dict[str, object] = {}
    cur = None
    for raw in text.split("\n"):
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        k, _, v = line.strip().partition(":")
        if indent == 0:
            if v.strip():
                root[k] = _flow(v)
                cur = None
            else:
                cur = root[k] = {}
        else:
            cur[k] = _flow(v)
    return root


def load_spec(path: str) -> Spec:
    import os
    with open(path, encoding="utf-8") as f:
        text = f.read()
    d = _yaml_load(text)
    header = None
    if isinstance(d, dict) and d.get("functions"):
        hp = os.path.join(os.path.dirname(os.path.abspath(path)), d["functions"])
        with open(hp, encoding="utf-8") as f:
            header = f.read()
    return loads_spec(text, header)


def loads_spec(text: str, header_text: Optional[str] = None) -> Spec:
    """A spec from its YAML text (and its functions: header's text)."""
    d = _yaml_load(text)
    directives = {}
    comment_lines = []
    for line in text.split("\n"):
        m = re.match(r"#\s*difffuzz-(\w[\w-]*):\s*(.*)$", line)
        if m:
            directives[m.group(1)] = m.group(2).strip()
        elif line.startswith("#"):
            comment_lines.append(line)
    inputs, shapes, dims = [], {}, ()
    for name, shape in (d.get("inputs") or {}).items():
        if not isinstance(shape, list):
            raise ParseError(f"unsupported shape {shape!r} of input {name}")
        sh = parse_shape(shape)
        inputs.append((name, sh.cls))
        if sh != class_shape(sh.cls):
            shapes[name] = sh
        if sh.batch and sh.dims and not dims:
            dims = sh.dims
    attrs = []
    for name, a in (d.get("attrs") or {}).items():
        attrs.append(Attr(name, a["type"], a.get("default")))
    spec = Spec(op=d["op"], inputs=inputs, attrs=attrs, lets=[], outputs=[],
                dtypes=d.get("dtypes"), functions_file=d.get("functions"), doc=d.get("doc"),
                comment="\n".join(comment_lines), directives=directives, shapes=shapes, dims=dims)
    if spec.functions_file:
        if header_text is None:
            raise ParseError(f"the spec names functions: {spec.functions_file}, but no header was given")
        spec.header_text = header_text
        spec.functions = parse_header(header_text)
    scope: Dict[str, Node] = {"D": Node("D"), "j": Node("j"), "rows": Node("rows"), "inf": num(math.inf)}
    for name, _ in inputs:
        scope[name] = Node("input", name=name)
    for a in attrs:
        scope[a.name] = Node("attr", name=a.name)
    for name, formula in (d.get("let") or {}).items():
        n = parse_formula(str(formula), scope, spec.functions)
        scope[name] = n
        spec.lets.append((name, n))
    for name, formula in (d.get("outputs") or {}).items():
        spec.outputs.append((name, parse_formula(str(formula), scope, spec.functions)))
    if "calls" in directives:
        # `# difffuzz-calls: -; a0=0.25 a1=3` : the attr values of each call the checks make,
        # `;` between calls, `-` for the defaults
        for group in directives["calls"].split(";"):
            kv = {}
            for part in group.split():
                if part == "-":
                    continue
                k, _, v = part.partition("=")
                kv[k] = _scalar(v)
            spec.calls.append(kv)
    return spec


def print_spec(spec: Spec) -> str:
    """The spec as YAML in the style load_spec reads (and fusegen)."""
    out = []
    if spec.comment:
        out.append(spec.comment.rstrip())
    for k, v in spec.directives.items():
        if k != "calls":
            out.append(f"# difffuzz-{k}: {v}")
    if spec.calls:
        out.append("# difffuzz-calls: " + "; ".join(" ".join(f"{k}={_fmt_attr(v)}" for k, v in c.items()) or "-"
                                                     for c in spec.calls))
    out.append(f"op: {spec.op}")
    if spec.doc:
        out.append(f"doc: {spec.doc}")
    if spec.functions_file:
        out.append(f"functions: {spec.functions_file}")
    out.append("inputs:")
    for name, c in spec.inputs:
        out.append(f"  {name}: {spec.shape(name).spell()}")
    if spec.attrs:
        out.append("attrs:")
        for a in spec.attrs:
            fields = [f"type: {a.type}"]
            if a.default is not None:
                fields.append(f"default: {_fmt_attr(a.default)}")
            out.append(f"  {a.name}: {{{', '.join(fields)}}}")
    names: Dict[int, str] = {}  # a let names its node in the formulas after it
    if spec.lets:
        out.append("let:")
        for name, n in spec.lets:
            out.append(f"  {name}: {print_formula(n, names)}")
            names.setdefault(id(n), name)
    out.append("outputs:")
    for name, n in spec.outputs:
        out.append(f"  {name}: {print_formula(n, names)}")
    if spec.dtypes:
        out.append(f"dtypes: [{', '.join(spec.dtypes)}]")
    return "\n".join(out) + "\n"


def _fmt_attr(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    s = repr(float(v))
    if "e" in s and "." not in s.split("e")[0]:
        m, e = s.split("e")
        s = f"{m}.0e{e}"  # YAML 1.1 reads 1e-6 as a string; 1.0e-6 is a float
    return s


def print_header(functions: List[Function]) -> str:
    out = ["// @difffuzz: C++ functions of a generated spec (tests/difffuzz/gen.py).",
           "#ifndef FUSEGEN_DERIVATIVE", "#define FUSEGEN_DERIVATIVE(...)", "#endif", ""]
    for f in functions:
        if f.derivatives:
            out.append(f"FUSEGEN_DERIVATIVE({', '.join(f.derivatives)})")
        out.append(f"__host__ __device__ inline float {f.name}({', '.join('float ' + p for p in f.params)}) {{")
        names: Dict[int, str] = {}
        for lname, ln in f.locals:
            out.append(f"  const float {lname} = {print_cxx(ln, names)};")
            names[id(ln)] = lname
        out.append(f"  return {print_cxx(f.body, names)};")
        out.append("}")
        out.append("")
    return "\n".join(out)


def grad_edges(n: Node, spec: "Spec"):
    """The arguments of n that its gradient flows to (not a condition, not through detach,
    only the stated x's of with_grad; every argument of a header function call)."""
    if n.op != "call":
        return []
    if n.name in spec.functions:
        return list(n.args)
    if n.name == "detach" or n.name in CMP_SPELL:
        return []
    if n.name == "with_grad":
        return [n.args[i] for i in range(1, len(n.args), 2)]
    if n.name == "where":
        return n.args[1:]
    return list(n.args)


def grad_reachable(spec: "Spec"):
    """Ids of the nodes the outputs' gradients reach."""
    seen = set()
    stack = [n for _, n in spec.outputs]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.extend(grad_edges(n, spec))
    return seen
