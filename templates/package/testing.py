"""Checks shared by every generated op's tests (generated/<op>/test_<op>.py).

Each check takes the op's OpInfo, the op, its generated reference, the spec's independent
formula and the op's error bounds, builds random inputs of the right shape classes and
asserts, within tolerances that follow from one error model (below). Set
FUSEGEN_REQUIRE_CUDA=1 to make a missing GPU an error instead of a CPU-only run (the GPU
runner does), so a skipped GPU path is never reported as passed."""
import contextlib
import functools
import math
import os
import re
import sys
import warnings
from typing import Callable, Dict, List, Sequence

import pytest
import torch

from . import _support
from ._support import (COL, FULL, ROW, SCALAR, OpInfo, chunks_of, draw_rng, full_like,
                                  is_mapped, mapped_shape, parse_shape, random_float, random_typed)

if os.environ.get("FUSEGEN_REQUIRE_CUDA") == "1" and not torch.cuda.is_available():
    raise RuntimeError("FUSEGEN_REQUIRE_CUDA=1 but torch sees no CUDA device")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
CUDA_DEVICES = ["cuda"] if torch.cuda.is_available() else []  # GPU-sized checks only

# ---- the error model of every comparison ------------------------------------------------
# Each check compares an op's outputs or input gradients with its reference's elementwise:
#
#     |got - want| <= C * (E_op + E_ref) + the dtype's smallest subnormal step
#
# E is a first-order bound on the absolute rounding error of a value (Wilkinson's running
# error bound), computed in float64 by the op's generated error_bounds(): the reference and
# its derived backward again, printed from the IR the kernels are generated from, each
# primitive spelled through the builtins of its `eval` formula (the operations the kernels
# do) over Rounding's bounded numbers. A builtin returns its exact value at the computed
# arguments times (1 + d), |d| <= units * u (u: the compute type's unit roundoff, fp32's for
# half types; units: Rounding's table), so to first order
#
#     E(f(a, b, ...)) = sum_i |df/da_i| E(a_i) + units_f * u * |f|;
#
# (and where |f| is below twice the compute type's smallest normal, units_f halves of its
# subnormal step besides: gradual underflow rounds to multiples of the step, Rounding._round);
# a sum adds u sum_k |s_k|, its partial sums s_k in index order (the same running bound:
# each addition rounds its partial sum), and a value written in the dtype (an output)
# adds the dtype's unit roundoff times its magnitude (a per-row statistic the backward reads
# back is written in the compute type: it adds nothing). Sums and differences thus carry the magnitudes of their terms: a result that
# cancels between large terms gets the tolerance it needs, a well-conditioned one keeps a
# tight one, from the dtype's epsilon, the terms and the reductions (their length and partial
# sums) alone, for outputs and gradients alike ([D] and [] gradients are sums over rows).
# That plain sum's term is the first-order bound of sequential sums (the CPU plans' [D] and
# [] sums over rows, and the reference's), and covers blocked and tree sums (the CUDA plans',
# whose partial sums are smaller). It grows like sqrt(n) u sum|terms| for terms of both signs
# and n/2 u sum|terms| for terms of one sign, and must: a float32 sum of 65535 sixth powers
# of random halfs, done in order, errs by up to 1039 u sum|terms| (small terms vanish against
# a large partial sum, all the same way), four times the sqrt(n) of a random-sign model and
# 65 times the log2(n) of a tree sum.
# The kernels' reductions over a row (sum, mean) are compensated (fusegen_program.h): the exact
# rounding errors of the additions (each at most u |s_k|) are summed, off by at most
# n u sum|errors| <= n u^2 sum_k |s_k|, and added back, so such a sum adds
# u |sum| + n u^2 sum_k |s_k| (n: the row length) instead: a row of large terms with a small
# spread, whose mean a centred value carries, is held to the precision of the mean itself.
# E_ref is the reference's own bound at the dtype it runs in (float64: negligible unless the
# op runs in float64 too). A spec's independent formula is held to float32's: PyTorch's
# built-ins promise no more (F.hardswish on CUDA multiplies by 1.0f / 6.0f in float64 too).
# A comparison the rounding may flip (an order comparison of values within their bounds of
# each other: relu of a centred value, x - mean(x), in rows of mean 1000 and spread 0.01) may
# take either branch of a select: there its bound is both branches' and their distance.
# Left out: second-order terms (C = 2 covers them).
C = 2.0


class Bounded:
    """A value (float64) and E, a bound on the absolute error of a kernel computing it; the
    arithmetic operators and comparisons of formulas (a comparison: the values' bool tensor,
    with `flips` where an order comparison may come out either way, for Rounding.select)."""
    __slots__ = ("v", "e", "r")
    __hash__ = None

    def __init__(self, v, e, r):
        self.v, self.e, self.r = v, e, r

    def __add__(self, o): return self.r.add(self, o)
    def __radd__(self, o): return self.r.add(o, self)
    def __sub__(self, o): return self.r.sub(self, o)
    def __rsub__(self, o): return self.r.sub(o, self)
    def __mul__(self, o): return self.r.mul(self, o)
    def __rmul__(self, o): return self.r.mul(o, self)
    def __truediv__(self, o): return self.r.div(self, o)
    def __rtruediv__(self, o): return self.r.div(o, self)
    def __neg__(self): return Bounded(-self.v, self.e, self.r)
    def __lt__(self, o): return _order(self, o, self.v < _value(o))
    def __le__(self, o): return _order(self, o, self.v <= _value(o))
    def __gt__(self, o): return _order(self, o, self.v > _value(o))
    def __ge__(self, o): return _order(self, o, self.v >= _value(o))
    def __eq__(self, o): return self.v == _value(o)
    def __ne__(self, o): return self.v != _value(o)


def _value(a):
    return a.v if isinstance(a, Bounded) else a


def _order(a, b, c):
    """c, the comparison of a and b (a Bounded, b a Bounded or a number), with `flips`: where
    the values are within their bounds of each other, so the kernel's may compare either way."""
    e = a.e + b.e if isinstance(b, Bounded) else a.e
    c.flips = (e > 0) & ((a.v - _value(b)).abs() <= e)
    return c


def _partial_sums(v, dim):
    """sum_k |s_k|, k >= 2, of the partial sums s_k of v along dim: a sequential sum's
    rounding errors are at most u times this (each addition rounds its partial sum)."""
    s = v.cumsum(dim).abs()
    return s.sum(dim, keepdim=True) - s.narrow(dim, 0, min(1, s.shape[dim])).sum(dim, keepdim=True)


def _times(k, e):
    """k * e, zero where either is (an exact value stays exact where k is infinite; a value
    that does not depend on its argument, such as exp(-inf), ignores its error)."""
    return torch.where((e == 0) | (k == 0), 0.0, k * e)


class Rounding:
    """How the kernels of an op round in `dtype`, over inputs whose [..., D] shape is `full`:
    the builtins of primitive `eval` formulas on bounded numbers (the error model above).
    Units of u per builtin: + - * / sqrt are correctly rounded (1); the other math functions
    are within 2 ulp (4) and pow within 4 ulp (8), by the CUDA and glibc accuracy tables;
    a result below twice the compute type's smallest normal may also be off by units halves
    of its subnormal step (absolute: gradual underflow rounds to multiples of the step).
    Half types compute in fp32, on the GPU with its approximate exp, log, tanh and division
    (fusegen_runtime.h): exp (2 + 1.17 |x|) ulp and 2^-126 absolute (denormals flushed), log 3 ulp and 2^-21.41 absolute, tanh
    2^-10.99 relative, division 2 ulp."""

    def __init__(self, dtype, full, device, partial=False, compensated=True, columns=None,
                 rows=None):
        half = dtype in (torch.float16, torch.bfloat16)
        self.compute = torch.float32 if half else dtype
        self.u = torch.finfo(self.compute).eps / 2
        self.u_store = torch.finfo(dtype).eps / 2
        self.normal = torch.finfo(self.compute).smallest_normal
        self.step = self.normal * torch.finfo(self.compute).eps  # subnormal spacing
        self.fast = half and torch.device(device).type == "cuda"
        self.full, self.device = list(full), device
        self.partial = partial  # rows of a larger tensor: result() leaves [D] and [] sums open
        self.compensated = compensated  # row sums as the kernels do them (else plain: torch)
        self.columns = columns  # partial: the ColumnSums of the whole tensor's column sums
        # `rows` in formulas: the whole tensor's (full: a chunk of its rows, when partial)
        self.rows = math.prod(self.full[:-1]) if rows is None else rows
        if columns is not None:
            columns.calls = 0

    def exact(self, t):
        t = t.detach().to(torch.float64)
        return Bounded(t, torch.zeros((), dtype=torch.float64, device=t.device), self)

    def _b(self, a):
        """A number of a formula (a literal, an attr, D) as the kernels see it: in the compute
        type, off by its rounding where it is not representable."""
        if isinstance(a, Bounded):
            return a
        c = float(a)
        off = 0.0 if not math.isfinite(c) or float(torch.tensor(c, dtype=self.compute)) == c \
            else self.u * abs(c)
        t = lambda z: torch.tensor(z, dtype=torch.float64, device=self.device)  # noqa: E731
        return Bounded(t(c), t(off), self)

    def _round(self, v, e, units):
        # (1 + d) holds down to the compute type's smallest normal; below it a result rounds
        # to a multiple of the subnormal step, off by up to half of it whatever its size (a
        # temperature softmax's float32 gradient y * (g - sum(g y)) / t, y subnormal: the
        # step's error over a small t, 26 steps, where u |v| allowed one).
        # (units may be a tensor, infinite where an argument is: the fast exp's at -inf, whose
        # 0 is exact; in float64, as v: the half step is below float32's least subnormal)
        half_step = torch.as_tensor(units * (self.step / 2), dtype=v.dtype, device=v.device)
        sub = (v != 0) & (v.abs() < 2 * self.normal)
        return Bounded(v, e + _times(units * self.u, v.abs()) + torch.where(sub, half_step, 0.0),
                       self)

    def add(self, a, b):
        a, b = self._b(a), self._b(b)
        return self._round(a.v + b.v, a.e + b.e, 1)

    def sub(self, a, b):
        a, b = self._b(a), self._b(b)
        return self._round(a.v - b.v, a.e + b.e, 1)

    def mul(self, a, b):
        a, b = self._b(a), self._b(b)
        return self._round(a.v * b.v, _times(b.v.abs(), a.e) + _times(a.v.abs(), b.e), 1)

    def div(self, a, b):
        a, b = self._b(a), self._b(b)
        v = a.v / b.v
        e = _times(1 / b.v.abs(), a.e) + _times((v / b.v).abs(), b.e)
        return self._round(v, e, 4 if self.fast else 1)

    def select(self, c, a, b):
        a, b = self._b(a), self._b(b)
        flips = getattr(c, "flips", None)
        c = torch.as_tensor(c, device=self.device)
        e = torch.where(c, a.e, b.e)
        if flips is not None:  # either branch: the other's value within its bound
            apart = torch.where(a.v == b.v, 0.0, (a.v - b.v).abs())  # (inf == inf: 0)
            e = torch.where(flips, torch.maximum(a.e, b.e) + apart, e)
        return Bounded(torch.where(c, a.v, b.v), e, self)

    def abs(self, a):
        a = self._b(a)
        return Bounded(a.v.abs(), a.e, self)

    def exp(self, a):
        a = self._b(a)
        v = a.v.exp()
        r = self._round(v, _times(v, a.e), 4 + 2.35 * a.v.abs() if self.fast else 4)
        # the GPU's fast exp flushes denormal results to 0 (fusegen_runtime.h)
        return Bounded(r.v, r.e + 2.0**-126, self) if self.fast else r

    def expm1(self, a):
        a = self._b(a)
        v = a.v.expm1()
        return self._round(v, _times((v + 1).abs(), a.e), 4)

    def log(self, a):
        a = self._b(a)
        r = self._round(a.v.log(), _times(1 / a.v.abs(), a.e), 6 if self.fast else 4)
        return Bounded(r.v, r.e + 2**-21.41, self) if self.fast else r

    def log1p(self, a):
        a = self._b(a)
        return self._round(a.v.log1p(), _times(1 / (1 + a.v).abs(), a.e), 4)

    def tanh(self, a):
        a = self._b(a)
        v = a.v.tanh()
        return self._round(v, _times(1 - v * v, a.e), 2**-10.99 / self.u if self.fast else 4)

    def erf(self, a):
        a = self._b(a)
        return self._round(a.v.erf(), _times(1.1283791670955126 * (-a.v * a.v).exp(), a.e), 4)

    def sqrt(self, a):  # |sqrt(a) - sqrt(b)| <= sqrt(|a - b|): at 0 (or -0.0), sqrt(e)
        a = self._b(a)
        v = a.v.sqrt()
        return self._round(v, torch.minimum(_times(0.5 / v.abs(), a.e), a.e.sqrt()), 1)

    def rsqrt(self, a):
        a = self._b(a)
        v = a.v.rsqrt()
        return self._round(v, _times((0.5 * v / a.v).abs(), a.e), 4)

    def pow(self, a, p):
        a, p = self._b(a), float(_value(p))
        # (a^0 is 1 whatever a: its slope 0, not 0 * 0^-1 = NaN at a = 0, which a relu's
        # flipping select can hand it: pow(relu(h), p - 1) in the backward of p = 1)
        slope = torch.zeros_like(a.v) if p == 0 else (p * a.v.pow(p - 1)).abs()
        return self._round(a.v.pow(p), _times(slope, a.e), 8)

    def sin(self, a):  # 1-Lipschitz; |cos| e + e^2 / 2 where that is less
        a = self._b(a)
        v = a.v.sin()
        return self._round(v, torch.minimum(a.e, _times(a.v.cos().abs(), a.e) + 0.5 * a.e * a.e), 4)

    def cos(self, a):
        a = self._b(a)
        v = a.v.cos()
        return self._round(v, torch.minimum(a.e, _times(a.v.sin().abs(), a.e) + 0.5 * a.e * a.e), 4)

    # Rounding to integers is exact; an argument within its bound of a step can land on
    # either side of it, so the bound is the largest jump within [v - e, v + e].
    def _steps(self, f, a):
        a = self._b(a)
        v = f(a.v)
        lo, hi = f(a.v - a.e), f(a.v + a.e)
        jump = torch.maximum((hi - v).abs(), (v - lo).abs()).nan_to_num(nan=0.0)  # (inf - inf)
        e = torch.where(a.e == 0, 0.0, jump)
        return Bounded(v, e, self)

    def floor(self, a):
        return self._steps(torch.floor, a)

    def ceil(self, a):
        return self._steps(torch.ceil, a)

    def round(self, a):
        return self._steps(torch.round, a)

    def trunc(self, a):
        return self._steps(torch.trunc, a)

    # Reductions over the last dim, of values broadcast to the full shape.
    def _row(self, a):
        a = self._b(a)
        return a.v.expand(self.full), a.e.expand(self.full)

    def sum(self, a):
        v, e = self._row(a)
        s, running = v.sum(-1, keepdim=True), _partial_sums(v, -1)
        rounding = (self.u * s.abs() + v.shape[-1] * self.u**2 * running if self.compensated
                    else self.u * running)
        return Bounded(s, e.sum(-1, keepdim=True) + rounding, self)

    def max(self, a):
        v, e = self._row(a)
        return Bounded(v.amax(-1, keepdim=True), e.amax(-1, keepdim=True), self)

    def min(self, a):
        v, e = self._row(a)
        return Bounded(v.amin(-1, keepdim=True), e.amax(-1, keepdim=True), self)

    # Whole-tensor reductions (sum_all, max_all, min_all) of values per element or per row
    # ([..., 1]): over every value, in row order. The kernels combine per thread over rows,
    # then across the block and the blocks' partials in a fixed order; the sum's bound is a
    # sequential sum's (u times its partial sums' magnitudes).
    # (per_row: a per-row value, [..., 1] or of some of the op's named dims, [S, 1]; else one
    # per element, of any of the op's dims: every row of the op takes part all the same.)
    def _all(self, a, per_row):
        a = self._b(a)
        shape = self.full[:-1] + [1] if per_row else self.full
        return a.v.expand(shape).reshape(-1), a.e.expand(shape).reshape(-1)

    def sum_all(self, a, per_row=False):
        v, e = self._all(a, per_row)
        running = _partial_sums(v, 0).squeeze(0) if v.numel() else v.new_zeros(())
        return Bounded(v.sum(), e.sum() + self.u * running, self)

    def max_all(self, a, per_row=False):
        v, e = self._all(a, per_row)
        return Bounded(v.amax(), e.amax(), self)

    def min_all(self, a, per_row=False):
        v, e = self._all(a, per_row)
        return Bounded(v.amin(), e.amax(), self)

    # Reductions over the rows, per column (colsum), of element values: per thread over rows,
    # then across threads and chunks of rows in a fixed order; bounded as a sequential sum.
    # Over rows of a larger tensor (partial), the sums of the whole tensor's (self.columns).
    def colsum(self, a):
        a = self._b(a)
        D = self.full[-1]
        v, e = a.v.expand(self.full).reshape(-1, D), a.e.expand(self.full).reshape(-1, D)
        running = _partial_sums(v, 0).squeeze(0) if v.shape[0] else v.new_zeros(D)
        if self.columns is None:
            return Bounded(v.sum(0), e.sum(0) + self.u * running, self)
        return self.columns.sum(self, (v.sum(0), e.sum(0), running, v.shape[0]))

    def number(self, a):
        """An integer the formulas compute from attrs (a roll's shift): exact, its value."""
        return _value(a)

    def move(self, f, a):
        """A move of the columns (swap_halves, swap_pairs) or a view of a packed last dim (chunk,
        place), by its torch spelling f: exact, the bounds move with the values."""
        a = self._b(a)
        v = a.v if a.v.dim() else a.v.expand(self.full)
        return Bounded(f(v), f(torch.broadcast_to(a.e, v.shape)), self)

    def stored(self, v, e, out=None):
        """E of values v (bounds e) as the kernels store them: rounded to the dtype, or to an
        output's own type `out` (float32, float8_e4m3fn, float8_e5m2; integers and bool: the
        largest step their rounding makes within the bound), which the reference
        rounds to as well (it returns the output as the op does): twice half its unit in the
        last place, relative, or of its least subnormal, absolute, saturated values alike
        (saturation moves both to the same largest finite value)."""
        if out is None:
            return e + self.u_store * v.abs()
        t = getattr(torch, out)
        if t == torch.bool:  # a value within its bound of 0 may be stored as either
            return torch.where((e > 0) & (v.abs() <= e), 1.0, 0.0)
        if not t.is_floating_point:  # the largest step rounding makes within [v - e, v + e]
            r = _support.integer_values(v, t)
            lo, hi = _support.integer_values(v - e, t), _support.integer_values(v + e, t)
            return torch.where(e > 0, torch.maximum(hi - r, r - lo).nan_to_num(0.0), 0.0)
        info = torch.finfo(getattr(torch, out))
        return e + info.eps * v.abs().clamp(max=info.max) + info.smallest_normal * info.eps

    def whole(self, a, out=None):
        """E of a [] output (computed from whole-tensor values) as the kernels write it."""
        a = self._b(a)
        return self.stored(a.v, a.e, out)

    def result(self, a, cls, out=None, dims=()):
        """E of an output or input gradient of shape class `cls` as the kernels write it: a
        [D] or [] gradient summed over rows (and columns) in the compute type, then every
        value stored (rounded to the dtype, or to the output's own type `out`). The gradient
        of a mapped input (one that omits some of the op's leading `dims`): written per element
        in the compute type, summed by torch over the omitted dims (a sum's bound, as [D]'s)."""
        a = self._b(a)
        lead = self.full[:-1]
        if chunks_of(cls) > 1:  # a packed input's gradient, its chunks placed side by side
            return self.stored(a.v, a.e, out)
        if is_mapped(cls):
            _, named, has_d = parse_shape(cls)
            shape = self.full if has_d else lead + [1]
            v, e = a.v.expand(shape), a.e.expand(shape)
            k = len(dims)
            first = len(self.full) - 1 - k
            sums = list(range(first)) + [first + i for i in range(k) if dims[i] not in named]
            keep = [d for d in range(len(shape)) if d not in sums]
            if not has_d:
                keep = keep[:-1]
            v = v.permute(sums + [d for d in range(len(shape)) if d not in sums])
            e = e.permute(sums + [d for d in range(len(shape)) if d not in sums])
            v = v.reshape([-1] + [shape[d] for d in keep] + ([] if has_d else [1]))
            e = e.reshape(v.shape)
            if not has_d:
                v, e = v.squeeze(-1), e.squeeze(-1)
            n = v.shape[0]
            v, e, running = v.sum(0), e.sum(0), _partial_sums(v, 0).squeeze(0)
            if self.partial:
                return v, e, running, n
            return self.sum_rounded(v, e, running)
        if cls == ROW:  # per-row values are [..., 1] in the reference
            v, e = a.v.expand(lead + [1]).squeeze(-1), a.e.expand(lead + [1]).squeeze(-1)
        elif cls == FULL:
            v, e = a.v.expand(self.full), a.e.expand(self.full)
        else:  # [D] or []: of the element value, or of the per-row value where it is one
            rowlike = cls == SCALAR and a.v.dim() == len(self.full) and a.v.shape[-1] == 1
            shape = lead + [1] if rowlike else self.full
            v, e = a.v.expand(shape), a.e.expand(shape)
            # Summed in row order: the leading dims (and for [], the last) flattened to one.
            k = len(lead) if cls == COL else len(shape)
            v, e = v.reshape([-1] + shape[k:]), e.reshape([-1] + shape[k:])
            n = v.shape[0]
            v, e, running = v.sum(0), e.sum(0), _partial_sums(v, 0).squeeze(0)
            if self.partial:
                return v, e, running, n
            return self.sum_rounded(v, e, running)
        return self.stored(v, e, out)

    def sum_rounded(self, v, e, running, n=None):
        """E of a sum over rows: v and e, the sums of the terms' values and bounds; running,
        the sum of the magnitudes of its partial sums (n: the count, unused here)."""
        return e + self.u * running + self.u_store * v.abs()


def _join_sums(parts):
    """The open sums (value, bound, running, count) of consecutive chunks of rows as one: a
    chunk's partial sums continue from the total s of the chunks before it, and
    |s + s_k| <= |s| + |s_k|, so its running term grows by its count times |s| at most."""
    v, e, running = parts[0][:3]
    for p in parts[1:]:
        running = running + p[2] + p[3] * abs(v)
        v, e = v + p[0], e + p[1]
    return v, e, running, sum(p[3] for p in parts)


class ColumnSums:
    """The column sums (colsum) of an op's bounds over the whole tensor, gathered over its
    chunks of rows (Checks._bounds): error_bounds() calls colsum in the same order on every
    chunk, so the i-th call is one sum. Each pass over the chunks completes the first call not
    known yet (its argument reads known sums only: every call before it was known); until a
    call is known, colsum gives the chunk's own sum, and what uses it is redone next pass."""

    def __init__(self):
        self.known = {}  # call -> Bounded over the whole tensor ([D])
        self.parts = {}  # the first unknown call -> the open sums of the chunks so far
        self.calls = 0
        self.first_unknown = None

    def sum(self, r, part):
        i, self.calls = self.calls, self.calls + 1
        if i in self.known:
            return Bounded(self.known[i][0], self.known[i][1], r)
        if self.first_unknown is None or self.first_unknown == i:
            self.first_unknown = i
            self.parts.setdefault(i, []).append(part)
        v, e, running, _ = part
        return Bounded(v, e + r.u * running, r)

    def next_pass(self, u):
        """After a pass over every chunk: completes its first unknown call; False when every
        call was known (the pass's results are the whole tensor's)."""
        if self.first_unknown is None:
            return False
        v, e, running, _ = _join_sums(self.parts.pop(self.first_unknown))
        self.known[self.first_unknown] = (v, e + u * running)
        self.first_unknown = None
        return True


def vmap_dtypes(spec: OpInfo) -> List[torch.dtype]:
    """The dtypes of the vmap checks: float64 and float32 where the op has them, else its
    first (a vmapped call must equal a loop of calls in any dtype)."""
    return [d for d in (torch.float64, torch.float32) if d in spec.torch_dtypes()] or \
        spec.torch_dtypes()[:1]


def wide_dtypes(spec: OpInfo) -> List[torch.dtype]:
    """The op's dtypes of at least 32 bits: a half type holds too few distinct values near a
    large mean to make a small spread (the extreme-magnitude check)."""
    return [d for d in spec.torch_dtypes() if d in (torch.float32, torch.float64)]


def _shape_of(cls: str, lead: Sequence[int], D: int, dims: Sequence[str] = ()) -> List[int]:
    """The shape of an argument of class cls where the op's leading dims are `lead` (their
    last len(dims) the named dims' sizes)."""
    if is_mapped(cls):
        return mapped_shape(cls, list(lead)[len(lead) - len(dims):], dims, D)
    if chunks_of(cls) > 1:  # packed: [..., n*D]
        return [*lead, chunks_of(cls) * D]
    return {FULL: [*lead, D], COL: [D], ROW: list(lead), SCALAR: []}[cls]


def _rows(t, a, b, cls, named):
    """Rows a:b of a [..., D] (or packed) or [...] tensor of class cls, as whole units of the
    named dims' sizes `named` (an op of the same dims) where the op has named dims."""
    if not named:
        return t[a:b]
    D = [t.shape[-1]] if full_like(cls) else []
    return t.reshape([-1] + D)[a:b].reshape([-1] + named + D)


def _holds(a, v: int) -> bool:
    """Whether integer input a may hold v: within its declared range, else its type's (False
    for a float or bool input)."""
    if a.dtype is None or a.dtype == "bool":
        return False
    info = torch.iinfo(getattr(torch, a.dtype))
    lo, hi = a.range if a.range is not None else (info.min, info.max)
    return lo <= v <= hi


def _cast(t, fn):
    """fn(t) for a floating tensor; an integer or bool input (a class index, a mask) is never
    converted, scaled or differentiated: its values are what the spec's dtype says."""
    return fn(t) if t is not None and t.is_floating_point() else t


def _leaf(t: torch.Tensor, requires_grad: bool = True) -> torch.Tensor:
    """A detached copy of t that requires grad if it is floating (and requires_grad)."""
    return t.detach().clone().requires_grad_(requires_grad and t.is_floating_point())


def _misaligned(t: torch.Tensor) -> torch.Tensor:
    """A copy of t whose data pointer is one element past a 16-byte boundary."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    return buf[1:].view(t.shape).copy_(t)


class OpChecks:
    BOUND_CHUNK = 1 << 23  # elements per error_bounds() call (float64 temporaries: memory)
    VMAP_BATCH = 3  # the vmapped dim's size in the vmap checks

    def __init__(self, spec: OpInfo, op: Callable, reference: Callable, independent: Callable,
                 error_bounds: Callable):
        self.spec, self.op, self.reference, self.independent = spec, op, reference, independent
        self.error_bounds = error_bounds
        # A random op's error bounds draw what a given call drew (drawn_with), at the rows of
        # the larger tensor a chunk of rows starts at; None: the draw of a reseeded call.
        self.rng_override, self.row_base = None, 0
        # The dtypes the checks run the op in, from its own (a spec may list fewer than four):
        # float32 for the checks of shapes, strides, transforms and streams; float16 and
        # bfloat16 for the narrow vectors and the misaligned views; each the nearest the op
        # has where it lacks one. Checks that need float64 (finite differences) skip without it.
        self.f32 = self.dtype(torch.float32, torch.float64, torch.bfloat16, torch.float16)
        self.f16 = self.dtype(torch.float16, torch.bfloat16, torch.float32, torch.float64)
        self.bf16 = self.dtype(torch.bfloat16, torch.float16, torch.float32, torch.float64)

    def dtype(self, *order):
        """The first of `order` among the op's dtypes."""
        return next(d for d in order if d in self.spec.torch_dtypes())

    def need_float64(self):
        if torch.float64 not in self.spec.torch_dtypes():
            pytest.skip(f"computed in float64, which the op's dtypes ({', '.join(self.spec.dtypes)}) "
                        "leave out")

    # ---- inputs ----------------------------------------------------------------------
    # The sizes of an op's named leading dims in the checks: each check's leading dims (its
    # batch) are followed by these, distinct and above 1, so a broadcast over the wrong dim
    # changes the result.
    NAMED_SIZES = (3, 2, 4, 5, 2, 3)

    def lead_of(self, lead):
        """A check's leading dims, followed by the op's named dims' sizes (NAMED_SIZES)."""
        return list(lead) + list(self.NAMED_SIZES[:len(self.spec.dims)])

    def op_shape(self, x):
        """The op's [..., D] shape, from its inputs x (a packed full input is [..., n*D])."""
        full = list(x[self.spec.full_input()].shape)
        n = chunks_of(self.spec.inputs[self.spec.full_input()].shape)
        return full[:-1] + [full[-1] // n] if full else full

    def D_of(self, D):
        """A check's D, one more where it is odd and the op moves columns (which needs it even)."""
        return D + 1 if self.spec.even_d and D % 2 else D

    def inputs(self, lead, D, dtype, device, requires_grad=False, scale=1.0, generator=None):
        out = []
        lead, D = self.lead_of(lead), self.D_of(D)
        for a in self.spec.inputs:
            shape = _shape_of(a.shape, lead, D, self.spec.dims)
            if a.dtype is not None:
                out.append(self.typed_input(a, shape, D, generator).to(device))
                continue
            t = random_float(a, shape, dtype, device, generator, scale)  # (a range: within it)
            out.append(t.requires_grad_(requires_grad))
        return out

    def typed_input(self, a, shape, D, generator=None):
        """An integer or bool input (random_typed), integers with one in 4 replaced by the
        value of one of the op's int attrs (a sentinel such as ignore_index) that the input's
        type holds and its declared range, if any, includes."""
        t = random_typed(a, shape, D, generator=generator)
        sentinels = [int(v) for n, v in self.attrs().items()
                     if any(x.name == n and x.type == "int" for x in self.spec.attrs)
                     and _holds(a, int(v))]
        if sentinels and t.numel():
            pick = torch.randint(0, 4 * len(sentinels), list(shape), generator=generator)
            for k, v in enumerate(sentinels):
                t = torch.where(pick == k, torch.tensor(v, dtype=t.dtype), t)
        return t

    def attrs(self) -> Dict[str, object]:
        # Attrs without a default get a value of their type.
        return {a.name: (a.default if a.default is not None else {"float": 0.5, "int": 2,
                                                                   "bool": True}[a.type])
                for a in self.spec.attrs}

    def other_attrs(self) -> Dict[str, object]:
        """Attrs away from their defaults, so options that are off by default run too: float
        attrs 0.25 more (softcap 0.25, label_smoothing 0.25), bools flipped, ints 1 more (a
        window, a chunk, an offset) but those an integer input may hold, kept: sentinels such
        as ignore_index, which typed_input puts in."""
        out = {}
        for a in self.spec.attrs:
            v = self.attrs()[a.name]
            out[a.name] = (not v) if a.type == "bool" else v + 0.25 if a.type == "float" else \
                v if any(_holds(x, int(v)) for x in self.spec.inputs) else v + 1
        return out

    RNG_SEED = 20261124  # random ops: every call draws after torch.manual_seed(RNG_SEED)

    def reseed(self):
        """A random op's calls and its reference's draw the same numbers: each call takes its
        seed and offset from the generator just reseeded (the op and draw_rng alike), as
        torch.library.opcheck reseeds before each of its calls."""
        if self.spec.random:
            torch.manual_seed(self.RNG_SEED)

    def call(self, fn, tensors, attrs=None):
        self.reseed()
        out = fn(*tensors, **(attrs if attrs is not None else self.attrs()))
        return out if isinstance(out, tuple) else (out,)

    def rng_kwargs(self, like):
        """error_bounds' random numbers: the draw of a reseeded call."""
        if not self.spec.random:
            return {}
        if self.rng_override is not None:  # a given call's draw
            return {"_rng": self.rng_override}
        self.reseed()
        return {"_rng": draw_rng(self.spec, like)}

    @contextlib.contextmanager
    def drawn_with(self, rng):
        """Within it, error bounds use the numbers drawn with (seed, offset) `rng`."""
        self.rng_override = rng
        try:
            yield
        finally:
            self.rng_override, self.row_base = None, 0

    def reference64(self, tensors):
        """The generated reference in float64 on the same values."""
        return self.call(self.reference, [_cast(t.detach(), torch.Tensor.double) for t in tensors])

    # ---- tolerances (the error model above) ------------------------------------------
    def _bounds(self, x, dtype, gouts, partial=False, compensated=True):
        """E of the outputs and (with gouts) the input gradients of the kernels in dtype on
        the values x, by the op's error_bounds(); large inputs in chunks of rows (memory).
        With `partial`, x are rows of larger tensors: [D] and [] gradients come back as the
        open sums (value, E, running, count) that Rounding.sum_rounded closes. Without
        `compensated`, E of plain PyTorch (the reference) computing the same in dtype."""
        full = self.op_shape(x)
        rows = math.prod(full[:-1])
        if gouts is not None:
            gouts = [torch.zeros(_shape_of(o.shape, full[:-1], full[-1]), device=x[0].device)
                     if g is None else g for o, g in zip(self.spec.outputs, gouts)]
        # Rows come in units of the named dims' sizes (one batch element of [..., S, H, D]):
        # a chunk is whole units, so its rows are an op of the same dims.
        named = full[len(full) - 1 - len(self.spec.dims):-1]
        unit = math.prod(named)
        step = max(1, self.BOUND_CHUNK // max(full[-1], 1))
        step = max(unit, step // unit * unit) if unit else step
        rng = self.rng_kwargs(x[self.spec.full_input()])
        # (An op with [] outputs: whole-tensor values, which chunks of rows do not compose.)
        whole = any(o.shape == SCALAR for o in self.spec.outputs)
        if (rows <= step or whole) and not partial:
            r = Rounding(dtype, full, x[0].device, compensated=compensated)
            return self.error_bounds(r, gouts, *x, **self.attrs(), **rng)

        def flat(ts, classes):
            return [t.reshape(-1, t.shape[-1]) if full_like(c) else t.reshape(-1) if c == ROW
                    else t for t, c in zip(ts, classes)]

        xs, ins = flat(x, [a.shape for a in self.spec.inputs]), [a.shape for a in self.spec.inputs]
        gs = None if gouts is None else flat(gouts, [o.shape for o in self.spec.outputs])
        # An op reducing over rows (colsum) needs its column sums over every chunk first: a
        # pass over the chunks per sum (ColumnSums), then one whose results are the tensor's.
        columns = ColumnSums() if self.spec.over_rows else None
        while True:
            parts = []
            for a in range(0, rows, step):
                b = min(a + step, rows)
                shape = [(b - a) // unit] + named + [full[-1]] if named else [b - a, full[-1]]
                r = Rounding(dtype, shape, x[0].device, partial=True, compensated=compensated,
                             columns=columns, rows=rows)
                # (per-row arguments and gradients are cut; [D], [] and mapped ones are whole)
                cut = [_rows(t, a, b, c, named) if c == ROW or full_like(c) else t
                       for t, c in zip(xs, ins)]
                g = None if gs is None else [
                    _rows(t, a, b, o.shape, named) if o.shape == ROW or full_like(o.shape)
                    else t for t, o in zip(gs, self.spec.outputs)]
                if rng:
                    rng["_row0"] = self.row_base + a
                parts.append(self.error_bounds(r, g, *cut, **self.attrs(), **rng))
            if columns is None or not columns.next_pass(r.u):
                break

        def join(bounds, cls):  # [D], [] and mapped sums: over the chunks' sums, in order
            if cls in (COL, SCALAR) or is_mapped(cls):
                sums = _join_sums(bounds)
                return sums if partial else r.sum_rounded(*sums)
            return torch.cat(bounds).reshape(
                full[:-1] + [chunks_of(cls) * full[-1]] if full_like(cls) else full[:-1])

        # ([D] outputs, batch statistics, are the whole tensor's in every chunk)
        outs = [parts[0][0][m] if o.shape == COL else join([p[0][m] for p in parts], o.shape)
                for m, o in enumerate(self.spec.outputs)]
        if gouts is None:
            return outs, None
        return outs, [None if parts[0][1][k] is None else join([p[1][k] for p in parts], a.shape)
                      for k, a in enumerate(self.spec.inputs)]

    def tolerances(self, x, dtype, ref_dtype=torch.float64, gouts=None):
        """C * (E_op + E_ref) + the smallest subnormal step, for the outputs and (with the
        output gradients gouts) the input gradients of the op in dtype on the values x, its
        reference run in ref_dtype."""
        ops = self._bounds(x, dtype, gouts)
        if ref_dtype == torch.float64 and dtype != ref_dtype:  # 2^-29 of a lower one's or less
            refs = ([0.0] * len(ops[0]), None if ops[1] is None else [0.0] * len(ops[1]))
        else:
            refs = self._bounds(x, ref_dtype, gouts, compensated=False)
        floor = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps
        out = []
        for a, b in zip(ops, refs):
            out.append(None if a is None else
                       [None if p is None else C * (p + q) + floor for p, q in zip(a, b)])
        return out[0], out[1]

    @staticmethod
    def close(got, want, tol, what):
        """|got - want| <= tol elementwise; where want is not finite, got must equal it."""
        # A value beyond the range of got's dtype must come out infinite, as it rounds. (An FP8
        # output saturates instead; the reference returns it saturated, as the op does.)
        if got.is_floating_point() and got.dtype != torch.float64 and got.element_size() > 1:
            rounded = want.detach().to(got.dtype)
            want = torch.where(torch.isfinite(rounded) | ~torch.isfinite(want), want, rounded)
        of_float64 = got.dtype == torch.float64
        got, want = got.detach().double(), want.detach().double()
        tol = torch.as_tensor(tol, dtype=torch.float64, device=got.device)
        if of_float64:
            # torch's float64 functions flush to 0 the results an intermediate overflows for
            # (sigmoid's 1 / (1 + exp(-x)) and silu at x < -709.78, where e^x and x e^x are at
            # most 4e-306), which the kernels' stable forms keep: a float64 result against a 0
            # of the reference is held to 2^-990 (1e-298), not finer.
            tol = torch.where(want == 0, tol.clamp(min=2.0 ** -990), tol)
        assert got.shape == want.shape, f"{what}: shape {list(got.shape)} != {list(want.shape)}"
        finite = torch.isfinite(want)
        same = (got == want) | (got.isnan() & want.isnan())
        assert (finite | same).all(), f"{what}: got {got[~finite & ~same][:4].tolist()} where " \
                                      f"the reference has {want[~finite & ~same][:4].tolist()}"
        err = (got - want).abs()
        bad = finite & ~(err <= tol)  # (a NaN error or bound fails)
        if bad.any():  # the worst: the largest error over its bound (a bound <= 0 or NaN first)
            ratio = torch.where(tol > 0, err / tol, float("inf")).nan_to_num(float("inf"))
            i = int(torch.where(bad, ratio, -1.0).reshape(-1).argmax())
            at = [int(k) for k in torch.unravel_index(torch.tensor(i), got.shape)]
            g, w, t = (z.reshape(-1)[i].item() for z in (got, want, tol.expand_as(got)))
            raise AssertionError(
                f"{what}: {int(bad.sum())} of {got.numel()} elements differ by more than the "
                f"rounding error bound; worst at {at}: got {g:.9g}, want {w:.9g}, "
                f"|error| {abs(g - w):.3e} > bound {t:.3e}")

    def close_grads(self, got, x, grad_outs, dtype, what, ref_dtype=torch.float64):
        """The op's input gradients `got` against the reference's at ref_dtype on the same
        values, within the error model's bound (for [D] and [] inputs that of the sum over
        rows, so a result that cancels between large terms is held to their magnitude). An
        input the reference does not reach must get zeros or no gradient."""
        xs = [_cast(t.detach(), lambda t: t.to(ref_dtype)) for t in x]
        gs = [None if g is None else g.to(ref_dtype) for g in grad_outs]
        want = self.grads(self.reference, xs, gs)
        _, tols = self.tolerances(x, dtype, ref_dtype, grad_outs)
        for a, t, g, w, tol in zip(self.spec.inputs, x, got, want, tols):
            name = f"grad of {a.name}{what}"
            if w is None:
                assert g is None or not g.any(), f"{name}: nonzero, the reference has none"
            else:
                assert g is not None, f"{name}: missing"
                assert g.dtype == t.dtype, f"{name}: dtype {g.dtype}, its input's {t.dtype}"
                # (where the reference's is not finite, or beyond the range of g's dtype, as a
                # float16 gradient of 3e5 is, close() holds g to the same value, or to inf)
                at = torch.isfinite(w.to(g.dtype)) if w.shape == g.shape else ...
                assert torch.isfinite(g[at]).all(), f"{name}: non-finite values"
                self.close(g, w, 0.0 if tol is None else tol, name)  # None: no gradient in the IR

    def grad_outs(self, outs, make=torch.randn_like):
        """Gradients of the outputs (random ones: make(output)), None for an output of its own
        type (FP8, a float32 statistic), which has no gradient."""
        return [make(o) if a.differentiable else None for a, o in zip(self.spec.outputs, outs)]

    def differentiable(self, outs):
        """The outputs gradient flows through, of all the op's (or the reference's) outputs."""
        return tuple(o for a, o in zip(self.spec.outputs, outs) if a.differentiable)

    def grads(self, fn, tensors, grad_outs):
        """Input gradients of fn at tensors; outputs whose grad_out is None are not used."""
        leaves = [_leaf(t) for t in tensors]
        _backward(self.call(fn, leaves), grad_outs)
        return [t.grad for t in leaves]

    # ---- checks ----------------------------------------------------------------------
    def sharding(self):
        """DTensor, 2 CPU processes with gloo: under each sharding strategy of the op's
        (_support.register_sharding: a leading dim, the last dim where columns are
        independent), its outputs and gradients equal the op's on whole tensors, and its forward
        runs no collective. An op whose rows share values (a reduction over rows, a whole-tensor
        value, random numbers) has only the replicated strategy: nothing to check."""
        import socket

        import torch.multiprocessing as mp
        self.need_float64()
        x = self.inputs((4,), 8, torch.float64, "cpu")
        if not _support._sharding_dims(self.spec, x[self.spec.full_input()].dim()):
            pytest.skip("the op's rows share values (a reduction over rows, a whole-tensor "
                        "value or random numbers): only its replicated strategy applies")
        with socket.socket() as sock:  # a free port for the process group
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        mp.spawn(_sharding_worker, args=(self.spec.name, port), nprocs=2, join=True)

    def forward_matches_reference(self, device, dtype):
        for lead, D, scale in [((64,), 96, 1.0), ((3, 5), 40, 3.0), ((17,), 7, 1.0)]:
            x = self.inputs(lead, D, dtype, device, scale=scale)
            got = self.call(self.op, x)
            tols, _ = self.tolerances(x, dtype)
            for o, g, w, tol in zip(self.spec.outputs, got, self.reference64(x), tols):
                assert g.dtype == o.torch_dtype(dtype) and g.device.type == device
                self.close(g, w, tol, f"{self.spec.name}.{o.name} {dtype} lead={lead} D={D}")
        # Large magnitudes: stable forms must not overflow where the exact value is finite.
        # (In float inputs without a declared range: a range says which values the formulas
        # are meant for, as exp(a) of a log-scale parameter a in [-2, 2].)
        x = self.inputs((4,), 64, torch.float64, device)
        extremes = torch.tensor([-1e5, -1e3, -88.0, -20.0, 0.0, 20.0, 88.0, 1e3, 1e5],
                                dtype=torch.float64)
        for a, t in zip(self.spec.inputs, x):
            if t.dim() and t.shape[-1] % 64 == 0 and a.dtype is None and a.range is None:
                t.view(-1)[: extremes.numel()] = extremes.to(device)  # (a packed input's too)
        x = [_cast(t, lambda t: t.to(dtype)) for t in x]
        tols, _ = self.tolerances(x, dtype)
        for o, g, w, tol in zip(self.spec.outputs, self.call(self.op, x), self.reference64(x), tols):
            g, w = _wide(g), _wide(w)  # (FP8 saturates: finite)
            finite = torch.isfinite(_wide(w.to(o.torch_dtype(dtype))))  # (beyond the dtype's range: inf)
            assert torch.isfinite(g[finite]).all(), f"{self.spec.name}.{o.name}: overflow at large |x|"
            self.close(g[finite], w[finite], tol.expand_as(w)[finite],
                       f"{self.spec.name}.{o.name} {dtype} large |x|")

    def extreme_magnitudes(self, device, dtype):
        """Rows of a large mean and a tiny spread (1000 + 0.01 N(0, 1)) and the same small
        (-0.001 + 1e-8 N(0, 1)) in the [..., D] inputs, D = 1024: sums over such a row are large
        against their spread, and a centred value (x - mean(x)) carries the mean's error over
        the spread; outputs and gradients against the reference in float64. Where an output
        is beyond the dtype's range (exp(1000)) it must be so in the op too, and the
        gradients are not compared."""
        for mean, std in [(1e3, 1e-2), (-1e-3, 1e-8)]:
            x = self.inputs((16,), 1024, torch.float64, device,
                            generator=torch.Generator().manual_seed(13))
            x = [_cast(mean + std * t if full_like(a.shape) and a.dtype is None and a.range is None
                       else t, lambda t: t.to(dtype))
                 for a, t in zip(self.spec.inputs, x)]
            where = f"{dtype} rows of mean {mean:g}, std {std:g}"
            got, want = self.call(self.op, x), self.reference64(x)
            tols, _ = self.tolerances(x, dtype)
            in_range = True
            for o, g, w, tol in zip(self.spec.outputs, got, want, tols):
                g, w = _wide(g), _wide(w)  # (FP8 saturates: finite)
                finite = torch.isfinite(_wide(w.to(o.torch_dtype(dtype))))
                in_range = in_range and bool(finite.all())
                assert torch.isfinite(g[finite]).all(), f"{o.name} overflows, {where}"
                self.close(g[finite], w[finite], tol.expand_as(w)[finite],
                           f"{self.spec.name}.{o.name} {where}")
            if in_range:
                gouts = self.grad_outs(got)
                self.close_grads(self.grads(self.op, x, gouts), x, gouts, dtype, f", {where}")

    def forward_matches_independent(self, device, dtype):
        x = self.inputs((32, 3), 80, dtype, device)
        self.reseed()
        want = self.independent(*[_cast(t, torch.Tensor.double) for t in x], **self.attrs())
        if want is None:
            pytest.skip("the spec gives no independent `reference:` formula")
        want = want if isinstance(want, tuple) else (want,)
        # The independent formula's own error is held to float32's (the model above).
        tols, _ = self.tolerances(x, dtype, ref_dtype=torch.float32)
        for o, g, w, tol in zip(self.spec.outputs, self.call(self.op, x), want, tols):
            if w is not None:
                self.close(g, w, tol, f"{self.spec.name}.{o.name} vs independent formula")

    def other_attrs_match_reference(self, device, dtype):
        """Outputs and gradients with every attr away from its default (other_attrs) against
        the reference in float64, with the bounds of the same error model."""
        saved, attrs = self.attrs, self.other_attrs()
        self.attrs = lambda: attrs  # every check below reads the attrs through self.attrs()
        try:
            x = self.inputs((24,), 40, dtype, device)
            got = self.call(self.op, x)
            tols, _ = self.tolerances(x, dtype)
            for o, g, w, tol in zip(self.spec.outputs, got, self.reference64(x), tols):
                self.close(g, w, tol, f"{self.spec.name}.{o.name} {dtype} attrs {attrs}")
            gouts = self.grad_outs(got)
            self.close_grads(self.grads(self.op, x, gouts), x, gouts, dtype, f", attrs {attrs}")
        finally:
            self.attrs = saved

    # Shifts of the roll checks: of either sign, 0, past D, odd, and multiples of the vector
    # widths (4 float32, 8 half-type elements: the GPU's whole-vector loads).
    ROLL_SHIFTS = (1, -1, 0, 3, -5, 4, 8, -16, 40, 65, -129, 1000003)

    def roll_shifts(self, device):
        """An op that rolls columns (roll(x, k), torch.roll's k reduced mod D): with each int
        attr its shifts read set to every ROLL_SHIFTS value (or at the defaults, for literal
        shifts), rows of D from 1 to past the vector width and not a multiple of it (the
        kernels' scalar variants), outputs and gradients against the reference in float64,
        float32 and bfloat16."""
        saved = self.attrs
        variants = [saved()] + [{**saved(), name: k}
                                for name in self.spec.rolls for k in self.ROLL_SHIFTS]
        dtypes = list(dict.fromkeys((self.f32, self.bf16)))  # (one where the op has one)
        try:
            for attrs in variants:
                self.attrs = lambda attrs=attrs: attrs
                for D in (1, 7, 8, 33, 64):
                    for dtype in dtypes:
                        x = self.inputs((3,), D, dtype, device)
                        got = self.call(self.op, x)
                        tols, _ = self.tolerances(x, dtype)
                        what = f"{self.spec.name} {dtype} D={self.D_of(D)} attrs {attrs}"
                        for o, g, w, tol in zip(self.spec.outputs, got, self.reference64(x), tols):
                            self.close(g, w, tol, f"{what}: {o.name}")
                        if self.spec.differentiable_outputs():
                            gouts = self.grad_outs(got)
                            self.close_grads(self.grads(self.op, x, gouts), x, gouts, dtype,
                                             f" ({what})")
        finally:
            self.attrs = saved

    def backward_matches_reference(self, device, dtype):
        x = self.inputs((48,), 72, dtype, device)
        gouts = self.grad_outs(self.call(self.op, x))
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, dtype, f" ({dtype})")

    def finite_differentiable(self, outs):
        """differentiable(outs) with infinite elements (an output written as -inf, a mask)
        replaced by 0: finite differences of an infinity are inf - inf, and the derivative
        there is 0 either way."""
        return tuple(torch.where(torch.isinf(o.detach()), 0, o) for o in self.differentiable(outs))

    def gradcheck(self, device):
        if self.spec.surrogate_gradient:
            pytest.skip("a with_surrogate_grad states a gradient that is not the forward's "
                        "derivative: finite differences of the forward do not check it (the "
                        "backward is compared with the reference's, which states the same)")
        self.need_float64()
        x = self.inputs((3, 4), 5, torch.float64, device, requires_grad=True)
        attrs = self.attrs()
        assert torch.autograd.gradcheck(
            lambda *t: self.finite_differentiable(self.call(self.op, t, attrs)), x, eps=1e-6,
            atol=1e-6)

    def gradgradcheck(self, device):
        """Second derivatives (the backward's own backward, derived by fusegen) against
        finite differences of the backward, in float64."""
        if self.spec.surrogate_gradient:
            # (the backward reads the surrogate's value, round(x) in w's gradient of
            # with_surrogate_grad(round(x), x, 1) * w: its stated derivative in x is 1, its
            # finite differences 0)
            pytest.skip("a with_surrogate_grad states a gradient that is not its value's "
                        "derivative, and the backward reads that value: finite differences of "
                        "the backward do not check the second derivatives (they are compared "
                        "with the reference's, which states the same)")
        self.need_float64()
        x = self.inputs((3, 4), 5, torch.float64, device, requires_grad=True)
        attrs = self.attrs()
        assert torch.autograd.gradgradcheck(
            lambda *t: self.finite_differentiable(self.call(self.op, t, attrs)), x, eps=1e-6,
            atol=1e-5)

    def second_order(self, fn, tensors, grad_outs, vs, wrt):
        """The gradients in the inputs and output gradients of sum_k <vs[k], grad of input k>
        over the inputs k in `wrt` (the others' gradients are not asked for: output_mask
        leaves them out), by torch autograd over fn's first derivatives; zeros where none."""
        leaves = [_leaf(t) for t in tensors]
        gl = [g.detach().clone().requires_grad_(True) for g in grad_outs if g is not None]
        # (an output the spec's independent formulas leave out is None: not differentiated)
        pairs = [(o, g) for o, g in zip(self.differentiable(self.call(fn, leaves)), gl)
                 if o is not None]
        first = torch.autograd.grad([o for o, _ in pairs], [leaves[k] for k in wrt],
                                    [g for _, g in pairs], create_graph=True, allow_unused=True)
        terms = [(f * vs[k]).sum() for f, k in zip(first, wrt) if f is not None and f.requires_grad]
        wanted = [t for t in leaves + gl if t.requires_grad]  # (not integer or bool inputs)
        if not terms:
            return [torch.zeros_like(t) for t in leaves + gl]
        got = iter(torch.autograd.grad(sum(terms), wanted, allow_unused=True,
                                       materialize_grads=True))
        return [next(got) if t.requires_grad else torch.zeros_like(t) for t in leaves + gl]

    def second_derivatives_match_reference(self, device, subset):
        """Hessian-vector products through the op's derived double backward against the same
        through torch autograd over reference() and over the spec's independent formula
        (where it gives one: F.rms_norm's own double backward for rmsnorm, and the op states
        no surrogate gradient, which torch's derivatives of the formula are not), in float64.
        `subset`: all input gradients taken, or only the first input's."""
        self.need_float64()
        x = self.inputs((5, 2), 12, torch.float64, device)
        gouts = self.grad_outs(self.call(self.op, x))
        vs = [torch.randn_like(t) if t.is_floating_point() else None for t in x]
        floats = [k for k, t in enumerate(x) if t.is_floating_point()]
        wrt = floats if subset == "all" else floats[:1]
        got = self.second_order(self.op, x, gouts, vs, wrt)
        names = [a.name for a in self.spec.inputs] + [f"grad_{o.name}"
                                                      for o in self.spec.differentiable_outputs()]
        oracles = [("reference", self.reference, gouts, got, set())]
        outs = self.call(self.independent, x)
        if not self.spec.surrogate_gradient and any(o is not None for o in outs):
            # Outputs it gives no formula for: their output gradients 0 in both, not compared.
            left = [k for k, o in enumerate(self.differentiable(outs)) if o is None]
            zeroed = [g for g in gouts if g is not None]
            zeroed = [torch.zeros_like(g) if k in left else g for k, g in enumerate(zeroed)]
            oracles.append(("independent formula", self.independent, zeroed,
                            self.second_order(self.op, x, zeroed, vs, wrt) if left else got,
                            {len(x) + k for k in left}))
        for label, fn, gs, got, skip in oracles:
            try:
                want = self.second_order(fn, x, gs, vs, wrt)
            except (RuntimeError, NotImplementedError) as e:
                # A formula written by hand may call a torch op that has no second derivative
                # (F.multi_margin_loss), or none in an argument (F.nll_loss's weight,
                # F.binary_cross_entropy_with_logits's pos_weight): reference() was compared
                # above, and gradgrad_check checks the second derivatives against finite
                # differences.
                if label == "reference" or not any(
                        m in str(e) for m in ("not implemented", "is not differentiable with")):
                    raise
                pytest.skip(f"compared with reference(); the spec's independent formula has no "
                            f"second derivative in torch ({str(e).splitlines()[0]})")
            for k, (name, g, w) in enumerate(zip(names, got, want)):
                if k in skip:
                    continue
                if not w.is_floating_point():  # an integer or bool input: no derivative
                    assert not g.any(), f"second derivative in {name}: nonzero"
                    continue
                scale = max(1.0, float(w.abs().max())) if w.numel() else 1.0
                torch.testing.assert_close(
                    g, w, rtol=1e-7, atol=1e-7 * scale,
                    msg=lambda m: f"second derivative in {name} against the {label}: {m}")

    def partial_gradients(self, device):
        """Asked for one input's gradient, the op returns it and no other, equal to that input's
        gradient among all: exactly, as a call asking for fewer gradients may run kernels
        compiled for those alone (the groups plan's variant for the full-shape gradients), which
        must compute the same values. Rows of 10 (read element by element) in float64, and rows
        of 16, which the plans read in 128-bit vectors, in every dtype of the op."""
        cases = [(10, self.dtype(torch.float64, torch.float32, torch.bfloat16, torch.float16))] + [
            (16, t) for t in self.spec.torch_dtypes()]
        for D, dtype in cases:
            x = self.inputs((6,), D, dtype, device)
            gouts = self.grad_outs(self.call(self.op, x))
            full = self.grads(self.op, x, gouts)
            for i in (k for k, t in enumerate(x) if t.is_floating_point()):
                leaves = [_leaf(t, j == i) for j, t in enumerate(x)]
                _backward(self.call(self.op, leaves), gouts)
                for j, t in enumerate(leaves):
                    if j == i:
                        torch.testing.assert_close(t.grad, full[i], rtol=0, atol=0,
                                                   msg=lambda m: f"D={D} {dtype}: {m}")
                    else:
                        assert t.grad is None

    def opcheck(self, device):
        op = getattr(_support.op_namespace(), self.spec.name).default
        x = self.inputs((4, 3), 16, self.f32, device, requires_grad=True)
        # The schema takes the attrs keyword-only, as the Python wrapper does.
        fp8 = any(o.dtype is not None and o.dtype.startswith("float8") for o in self.spec.outputs)
        if fp8 and self.spec.differentiable_outputs():
            # opcheck's AOT test sums every output for its backward, and torch has no sum of
            # FP8: that test runs on inputs without gradient (the forward under AOTAutograd),
            # the others as usual; test_torch_compile_fullgraph compiles the backward.
            torch.library.opcheck(op, tuple(t.detach() for t in x), self.attrs())
            torch.library.opcheck(op, tuple(x), self.attrs(), test_utils=(
                "test_schema", "test_autograd_registration", "test_faketensor"))
            return
        torch.library.opcheck(op, tuple(x), self.attrs())

    def schema_round_trips(self):
        """The schemas fusegen spelled are in torch's own spelling: parsed by torch's parser
        and printed back they are unchanged, and they are what the dispatcher registered."""
        for text, name in ((self.spec.schema, self.spec.name),
                           (self.spec.backward_schema, self.spec.name + "_backward")):
            assert str(torch._C.parse_schema(text)) == text
            registered = getattr(_support.op_namespace(), name).default._schema
            assert str(registered) == _support.NAMESPACE + "::" + text, (str(registered), text)

    def seeds_reproduce(self, device):
        """A random op: torch.manual_seed reproduces a call; the next call draws anew (the
        generator advanced); a `generator` argument is drawn from instead of the default one,
        which it leaves untouched; and the (seed, offset) returned are what the reference
        needs to redraw the call exactly."""
        attrs = self.attrs()
        raw = getattr(_support.op_namespace(), self.spec.name).default
        x = self.inputs((16,), 64, self.f32, device)
        torch.manual_seed(3)
        first, second = _tuple(raw(*x, **attrs)), _tuple(raw(*x, **attrs))
        torch.manual_seed(3)
        again = _tuple(raw(*x, **attrs))
        for a, b in zip(first, again):
            assert _equal(a, b), "a call after torch.manual_seed did not reproduce"
        assert not _equal(first[-1], second[-1]), "two calls drew with one (seed, offset)"
        assert not all(_equal(a, b) for a, b in zip(first[:len(self.spec.outputs)],
                                                         second)), "two calls drew alike"
        torch.manual_seed(3)
        mine = [_tuple(raw(*x, **attrs, generator=torch.Generator(device).manual_seed(9)))
                for _ in range(2)]
        after = _tuple(raw(*x, **attrs))
        for a, b in zip(mine[0], mine[1]):
            assert _equal(a, b), "a fresh generator of one seed drew differently"
        for a, b in zip(after, first):
            assert _equal(a, b), "a generator argument advanced the default generator"
        want = _tuple(self.reference(*[_cast(t, torch.Tensor.double) for t in x], **attrs,
                                     _rng=second[-1]))
        with self.drawn_with(second[-1]):
            tols, _ = self.tolerances(x, self.f32)
        for o, g, w, tol in zip(self.spec.outputs, second, want, tols):
            self.close(g, w, tol, f"{self.spec.name}.{o.name} redrawn from its (seed, offset)")

    def compile_fullgraph(self, device):
        torch._dynamo.reset()
        attrs = self.attrs()

        def f(*t):
            # (in float32 at least: an op of half types alone runs in one here, and a bf16 sum
            # of its outputs rounds differently where inductor fuses it: 31.125 against 31.25)
            out = tuple(o.float() if o.is_floating_point() and o.element_size() < 4 else o
                        for o in _tuple(self.op(*t, **attrs)))
            if self.spec.random:  # a second equal call draws anew, compiled as in eager
                out = out + tuple(2 * _wide(o) for o in _tuple(self.op(*t, **attrs)))
            # the sum, and the sum of magnitudes its rounding scales with (a centred output
            # sums to about 0: its float32 sum differs by order of summation alone)
            return (sum((o * 1.5).sum() for o in out),
                    sum((o * 1.5).abs().sum() for o in out).detach())

        compiled = torch.compile(f, fullgraph=True)
        x = self.inputs((8, 4), 24, self.f32, device)
        leaves_e = [_leaf(t) for t in x]
        leaves_c = [_leaf(t) for t in x]
        self.reseed()
        eager, size = f(*leaves_e)
        self.reseed()
        got, _ = compiled(*leaves_c)
        torch.testing.assert_close(got, eager, rtol=1e-5, atol=4e-6 * float(size) + 1e-6)
        if self.spec.random:  # and the generator advanced as in eager: the next draws agree
            self.reseed()
            f(*[t.detach() for t in x])
            after_e = _tuple(self.op(*[t.detach() for t in x], **attrs))
            self.reseed()
            compiled(*[t.detach() for t in x])
            after_c = _tuple(self.op(*[t.detach() for t in x], **attrs))
            for e, c in zip(after_e, after_c):
                torch.testing.assert_close(c, e, rtol=0, atol=0)
        if not self.spec.differentiable_outputs():  # (no gradient flows: only the values)
            return
        eager.backward()
        got.backward()
        for a, e, c in zip(self.spec.inputs, leaves_e, leaves_c):
            torch.testing.assert_close(c.grad, e.grad, rtol=1e-5, atol=1e-5,
                                       msg=lambda m: f"compiled grad of {a.name}: {m}")

    def leading_dims(self, device, rank):
        lead = [(), (3,), (2, 3), (2, 1, 3)][rank - 1]
        x = self.inputs(lead, 20, self.f32, device)
        got = self.call(self.op, x)
        tols, _ = self.tolerances(x, self.f32)
        for g, w, tol in zip(got, self.reference64(x), tols):
            assert list(g.shape) == list(w.shape)
            self.close(g, w, tol, f"{self.spec.name} rank {rank}")
        gouts = self.grad_outs(got)
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, self.f32, f", rank {rank}")

    def non_contiguous(self, device):
        lead, D = (12,), 18
        x = []
        for a, t in zip(self.spec.inputs, self.inputs(lead, D, self.f32, device)):
            if full_like(a.shape) or (is_mapped(a.shape) and t.dim() >= 2):
                # same values, the last two dims' strides swapped
                t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
                assert not t.is_contiguous()
            elif a.shape == COL:
                t = torch.stack([t, t], dim=1)[:, 0]  # stride 2
                assert not t.is_contiguous()
            x.append(t)
        tols, _ = self.tolerances(x, self.f32)
        for g, w, tol in zip(self.call(self.op, x), self.reference64(x), tols):
            self.close(g, w, tol, f"{self.spec.name} non-contiguous")
        gouts = self.grad_outs(self.call(self.op, x), lambda o: torch.randn_like(o).t().contiguous(
        ).t() if o.dim() == 2 else torch.randn_like(o))
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, self.f32, ", non-contiguous")

    def empty(self, device):
        for lead, D in [((0,), 8), ((2, 0), 8), ((3,), 0)]:
            x = self.inputs(lead, D, self.f32, device, requires_grad=True)
            outs = self.call(self.op, x)
            full = self.lead_of(lead)
            for o, spec_out in zip(outs, self.spec.outputs):
                want = full if spec_out.shape == ROW else [] if spec_out.shape == SCALAR \
                    else [self.D_of(D)] if spec_out.shape == COL \
                    else [*full, chunks_of(spec_out.shape) * self.D_of(D)]
                assert list(o.shape) == want, f"{spec_out.name}: shape {list(o.shape)} != {want}"
            gouts = self.grad_outs(outs, torch.ones_like)
            try:  # torch's own max/amax reject empty rows: then the reference has no value
                want = self.reference64(x)
                want_grads = self.grads(self.reference, [_cast(t, torch.Tensor.double) for t in x],
                                        [None if g is None else g.double() for g in gouts])
            except (RuntimeError, IndexError):
                want, want_grads = None, None
            if want is not None:
                for o, w in zip(outs, want):
                    torch.testing.assert_close(o.double(), w.double(), equal_nan=True)
            _backward(outs, gouts)
            for i, (t, a) in enumerate(zip(x, self.spec.inputs)):
                if not self.spec.differentiable_outputs():  # (no gradient flows at all)
                    assert t.grad is None, f"{a.name}: got a gradient through no output"
                    continue
                if a.dtype is not None:
                    assert t.grad is None, f"{a.name}: an {a.dtype} input got a gradient"
                    continue
                assert t.grad.shape == t.shape, f"grad of {a.name}: shape {list(t.grad.shape)}"
                if want_grads is not None:
                    # Not always 0: a [...] input's gradient at D = 0 is what the formula
                    # gives without the row's elements (y = r * sum(x) + r gives 1).
                    w = want_grads[i] if want_grads[i] is not None else torch.zeros_like(t.grad)
                    torch.testing.assert_close(t.grad.double(), w.double(), equal_nan=True,
                                               msg=lambda m: f"grad of {a.name}: {m}")
                elif all(o.numel() == 0 for o in outs):
                    assert (t.grad == 0).all(), f"grad of {a.name}: a sum over no elements"

    def odd_sizes(self, device):
        # D not a multiple of the vector width, and views whose data pointer is misaligned,
        # take the scalar paths of the kernels.
        # up to D = 65536: rows that do not fit in registers take the re-reading row plan
        for lead, D in [((5,), 1), ((5,), 7), ((5,), 33), ((5,), 1023), ((2,), 65535), ((3,), 65536)]:
            x = self.inputs(lead, D, self.f16, device)
            tols, _ = self.tolerances(x, self.f16)
            for g, w, tol in zip(self.call(self.op, x), self.reference64(x), tols):
                self.close(g, w, tol, f"{self.spec.name} D={D}")
        x = [_misaligned(t) for t in self.inputs((9,), 64, self.bf16, device)]
        gouts = self.grad_outs(self.call(self.op, x))
        tols, _ = self.tolerances(x, self.bf16)
        for g, w, tol in zip(self.call(self.op, x), self.reference64(x), tols):
            self.close(g, w, tol, f"{self.spec.name} misaligned")
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, self.bf16, ", misaligned")
        # Aligned inputs, misaligned output gradients: the backward's vector width, and with
        # it the size of the [D] partial sums, follows the gradients too.
        x = self.inputs((300,), 64, self.bf16, device)
        gouts = self.grad_outs(self.call(self.op, x), lambda o: _misaligned(torch.randn_like(o)))
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, self.bf16,
                         ", misaligned output gradient")

    def wrong_arguments(self, device):
        name = self.spec.qualname
        good = self.inputs((4,), 8, self.f32, device)
        for i, a in enumerate(self.spec.inputs):
            bad = list(good)
            if a.dtype is not None:  # an integer or bool input: its own dtype, nothing else
                bad[i] = good[i].float()
                with pytest.raises(RuntimeError, match=rf"{name}: argument '{a.name}' has dtype "
                                                       f"float32, but must have dtype {a.dtype}"):
                    self.call(self.op, bad)
            else:
                bad[i] = good[i].to(torch.int32)
                with pytest.raises(RuntimeError, match=rf"{name}: argument '{a.name}' has dtype "
                                                       "int32, but this op supports"):
                    self.call(self.op, bad)
            # A mismatch with the input that defines D (or the dtype) is reported on the other
            # argument.
            culprit = a.name if i != self.spec.full_input() else r"\w+"
            type_culprit = a.name if i != self.spec.dtype_input() else r"\w+"
            if sum(b.dtype is None for b in self.spec.inputs) > 1 and a.dtype is None:
                # Another of the op's dtypes; an op of one dtype refuses any other as such.
                other = [d for d in (torch.float64, torch.float32, torch.bfloat16, torch.float16)
                         if d in self.spec.torch_dtypes() and d != self.f32]
                bad[i] = good[i].to(other[0] if other else
                                    torch.float32 if self.f32 == torch.float64 else torch.float64)
                with pytest.raises(RuntimeError, match=rf"argument '{type_culprit}' has dtype \w+, but "
                                   + (".* must have the same dtype" if other else "this op supports")):
                    self.call(self.op, bad)
            if chunks_of(a.shape) > 1:  # an odd packed last dim, or one more chunk's worth
                bad[i] = torch.cat([good[i], good[i][..., :1]], dim=-1)
                with pytest.raises(RuntimeError, match=rf"argument '{culprit}' (must have|is packed)"):
                    self.call(self.op, bad)
            elif a.shape in (FULL, COL) or (is_mapped(a.shape) and parse_shape(a.shape)[2]):
                # One more column. Changing D of the input that defines it is a mismatch only
                # for the other inputs whose shape holds D ([..., D], [D] and mapped [S, D]
                # ones); with none (e.g. x [..., D] and s [...]) the op takes the new D.
                bad[i] = torch.cat([good[i], good[i][..., :1]], dim=-1)
                holds_D = [j for j, b in enumerate(self.spec.inputs) if j != i and (
                    b.shape in (FULL, COL) or (is_mapped(b.shape) and parse_shape(b.shape)[2]))]
                if i != self.spec.full_input() or holds_D:
                    with pytest.raises(RuntimeError,
                                       match=rf"argument '{culprit}' (must have|has D = )"):
                        self.call(self.op, bad)
                elif self.spec.even_d:  # an odd D (good ones are even)
                    with pytest.raises(RuntimeError, match=r"needs an even last dim"):
                        self.call(self.op, bad)
                else:
                    self.call(self.op, bad)  # accepted
            if is_mapped(a.shape):
                # One more of its first named dim: named in the message, against the full input.
                dim = parse_shape(a.shape)[1][0]
                bad[i] = torch.cat([good[i], good[i][:1]], dim=0)
                ref = self.spec.inputs[self.spec.full_input()].name
                with pytest.raises(RuntimeError, match=rf"argument '{a.name}' has {dim} = \d+ \(dim "
                                                       rf"0 of .*\) where '{ref}' has {dim} = \d+"):
                    self.call(self.op, bad)
                bad[i] = good[i][None]  # one dim more
                with pytest.raises(RuntimeError, match=rf"argument '{a.name}' must have shape "
                                                       rf"{re.escape(a.shape)} = "):
                    self.call(self.op, bad)
            if a.shape == ROW:  # one more row than the [..., D] inputs
                bad[i] = torch.cat([good[i], good[i][:1]])
                with pytest.raises(RuntimeError, match=rf"argument '{a.name}' must have shape"):
                    self.call(self.op, bad)
            if a.shape == SCALAR:
                bad[i] = good[i].reshape(1)
                with pytest.raises(RuntimeError, match=rf"argument '{a.name}' must be a 0-dim"):
                    self.call(self.op, bad)
            if device == "cuda" and len(good) > 1:
                bad[i] = good[i].cpu()
                with pytest.raises(RuntimeError, match=r"argument '.*' is on .*; all tensor "
                                                       "arguments must be on the same device"):
                    self.call(self.op, bad)
        if self.spec.dims:  # a full input without room for the named dims before D
            full = self.spec.full_input()
            bad = list(good)
            bad[full] = good[full].reshape(-1)[:good[full].shape[-1]].reshape(
                [1] * (len(self.spec.dims) - 1) + [good[full].shape[-1]])
            with pytest.raises(RuntimeError, match=rf"argument '{self.spec.inputs[full].name}' "
                                                   rf"must have at least {len(self.spec.dims) + 1} dims"):
                self.call(self.op, bad)

    def benchmark_shape(self, device):
        """The benchmark's shape, (8, 4096, 4096) in bfloat16, against the reference in fp32:
        its 32768 rows (the named dims' sizes taking their share of them)."""
        unit = math.prod(self.NAMED_SIZES[:len(self.spec.dims)])
        self.bf16_against_fp32(self.inputs((8, 4096 // unit), 4096, self.bf16, device),
                               "at 8x4096x4096")

    def bf16_against_fp32(self, x, where):
        """Outputs and gradients of bf16 inputs x against the reference run in fp32 (an op
        without bfloat16: x in self.bf16, the reference in float32 or, for wider x, float64)."""
        dtype = x[self.spec.dtype_input()].dtype
        ref = torch.float32 if dtype in (torch.bfloat16, torch.float16) else torch.float64
        got = self.call(self.op, x)
        want = self.call(self.reference, [_cast(t, lambda t: t.to(ref)) for t in x])
        tols, _ = self.tolerances(x, dtype, ref)
        for o, g, w, tol in zip(self.spec.outputs, got, want, tols):
            self.close(g, w, tol, f"{self.spec.name}.{o.name} {where}")
        gouts = self.grad_outs(got)
        self.close_grads(self.grads(self.op, x, gouts), x, gouts, dtype, f" {where}",
                         ref_dtype=ref)

    def row_lengths(self, device):
        """Rows of every length class the CUDA plans pick a different launch configuration
        for, outputs and gradients against the reference: bf16 against fp32 from D = 32
        (several rows per warp) through a warp to 1024 threads per row (whole warps, not a
        power of 2 of them, at 2880, 5120 and 13824), rows re-read per pass
        (forwards from 32768, with softmax's shifted max-and-sum pass), and the rows of
        backwards with [D] sums split over thread block clusters of 2 to 8 blocks (sm_90; D =
        16384 to 131072) or re-read (262144); fp32 (4 elements per vector) against fp64 where
        its geometry differs. On CUDA also many rows per shape, so that blocks and clusters
        loop over rows and short rows fill whole blocks."""
        for D in (32, 64, 128, 256, 1024, 2880, 4096, 5120, 8192, 13824, 16384, 32768, 65536,
                  131072, 262144):
            self.bf16_against_fp32(self.inputs((3,), D, self.bf16, device), f"at D={D}")
        for D in (16384, 65536, 131072):
            x = self.inputs((2,), D, self.f32, device)
            got = self.call(self.op, x)
            tols, _ = self.tolerances(x, self.f32)
            for o, g, w, tol in zip(self.spec.outputs, got, self.reference64(x), tols):
                self.close(g, w, tol, f"{self.spec.name}.{o.name} float32 D={D}")
            gouts = self.grad_outs(got)
            self.close_grads(self.grads(self.op, x, gouts), x, gouts, self.f32,
                             f" float32 D={D}")
        if device == "cuda":
            for rows, D in ((1001, 64), (513, 2880), (700, 16384), (600, 32768), (300, 65536)):
                self.bf16_against_fp32(self.inputs((rows,), D, self.bf16, device),
                                       f"at {rows}x{D}")

    def column_limit(self, device):
        """An op reading the column index j computes it in the compute type: float32 rows of
        2^24 columns run (j exact) and of 2^24 + 1 raise a RuntimeError naming the argument
        that defines D; float64 rows of 2^24 + 1 run."""
        full = self.spec.full_input()
        over = self.D_of(2**24 + 1)  # (2^24 + 2 where the op needs an even D)
        cases = [(D, dtype, ok) for D, dtype, ok in ((2**24, torch.float32, True),
                                                     (over, torch.float32, False),
                                                     (over, torch.float64, True))
                 if dtype in self.spec.torch_dtypes()]
        if not cases:
            pytest.skip("float32 and float64 rows, which the op's dtypes leave out")
        for D, dtype, ok in cases:
            x = self.inputs((1,), D, dtype, device)
            if ok:
                for o, a in zip(self.call(self.op, x), self.spec.outputs):
                    assert (o.dim() == 0 if a.shape == SCALAR else o.shape[0] == 1), f"D = {D}"
                    # (a [] output of one row may be 0 / 0: a mean over no rows not ignored)
                    assert a.shape == SCALAR or torch.isfinite(_wide(o)).all(), f"D = {D}, {dtype}"
            else:
                name = self.spec.inputs[full].name
                with pytest.raises(RuntimeError, match=rf"{self.spec.qualname}: the last dim of "
                                                       rf"'{name}' is {D}; this op reads the "
                                                       "column index"):
                    self.call(self.op, x)

    def linear_plan(self, device, linear):
        """linear_<op> (the chunked plan) against the reference of the op over the whole logits
        x @ W.T + b, in float64: the reduced loss and the gradients of x, W and b, for chunks of
        1, 3 and the default number of rows, "mean" and "sum"; and its memory on CUDA: the
        chunks' logits, not the whole."""
        self.need_float64()
        rows, H, V = 10, 6, 7
        g = torch.Generator().manual_seed(3)
        x = torch.randn(2, rows // 2, H, dtype=torch.float64, generator=g).to(device)
        w = torch.randn(V, H, dtype=torch.float64, generator=g).to(device)
        b = torch.randn(V, dtype=torch.float64, generator=g).to(device)
        logits = x @ w.t() + b
        others = [t for a, t in zip(self.spec.inputs, self.inputs((2, rows // 2), V, torch.float64,
                                                                 device))
                  if a.shape != FULL]
        attrs = self.attrs()
        for reduction in ("mean", "sum"):
            leaves = [_leaf(t) for t in (x, w, b)]
            full = self.spec.full_input()
            args = list(others)
            args.insert(full, leaves[0] @ leaves[1].t() + leaves[2])
            want = self.call(self.reference, args)[0].sum()
            if reduction == "mean":
                want = want / rows
            want.backward()
            for chunk in (1, 3, None):
                got_leaves = [_leaf(t) for t in (x, w, b)]
                got = linear(got_leaves[0], got_leaves[1], *others, bias=got_leaves[2],
                             reduction=reduction, rows_per_chunk=chunk, **attrs)
                assert got.dtype == torch.float64 and got.dim() == 0
                torch.testing.assert_close(got, want.detach(), rtol=1e-9, atol=1e-9,
                                           msg=lambda m: f"linear_{self.spec.name} {reduction}, "
                                                         f"chunks of {chunk}: {m}")
                got.backward()
                for name, a, e in zip(("hidden", "weight", "bias"), got_leaves, leaves):
                    torch.testing.assert_close(
                        a.grad, e.grad, rtol=1e-9, atol=1e-9,
                        msg=lambda m: f"linear_{self.spec.name} grad of {name} ({reduction}, "
                                      f"chunks of {chunk}): {m}")
        with pytest.raises(RuntimeError, match=rf"linear_{self.spec.name}: argument 'weight' must "
                                               "have shape"):
            linear(x, w.t(), *others, **attrs)
        # torch.compile(fullgraph=True): the same loss and gradients as eager.
        torch._dynamo.reset()
        compiled = torch.compile(lambda *t: linear(*t, rows_per_chunk=3, **attrs), fullgraph=True)
        for fn in (lambda *t: linear(*t, rows_per_chunk=3, **attrs), compiled):
            leaves = [_leaf(t) for t in (x, w)]
            loss = fn(*leaves, *others)
            loss.backward()
            if fn is not compiled:
                want = [loss.detach()] + [t.grad for t in leaves]
        for g, e, what in zip([loss.detach()] + [t.grad for t in leaves], want,
                              ("loss", "grad of hidden", "grad of weight")):
            torch.testing.assert_close(g, e, rtol=1e-12, atol=1e-12,
                                       msg=lambda m: f"linear_{self.spec.name} compiled, {what}: {m}")

    def one_output_used(self, device):
        """Backward through each output alone (ops with several): the other outputs'
        gradients are undefined and must count as zeros. An input the reference does not
        reach from that output (no gradient there) must get zeros or no gradient."""
        x = self.inputs((5,), 12, self.f32, device)
        outs = self.call(self.op, x)
        for m, out in enumerate(self.spec.outputs):
            if not out.differentiable:
                continue
            gouts = [torch.ones_like(o) if i == m else None for i, o in enumerate(outs)]
            self.close_grads(self.grads(self.op, x, gouts), x, gouts, self.f32,
                             f" through {out.name} alone")

    def index_beyond_2_31(self, device, D=4096, rows=2**31 // 4096 + 2, chunk=1 << 15):
        """[..., D] tensors of just over 2^31 bf16 elements (the widest, where some are
        packed [..., n*D]), so element offsets need 64 bits:
        the outputs and the gradients of the first and last rows against the reference on
        those rows, and the [D] and [] gradients (sums over all rows) against the reference
        accumulated in float32 over chunks of rows."""
        if any(o.shape == SCALAR for o in self.spec.outputs):
            pytest.skip("[] outputs are whole-tensor values: this test compares chunks of rows")
        if self.spec.over_rows:  # (the colwise kernels' 64-bit offsets: the other ops' tests)
            pytest.skip("the op reduces over rows (colsum): each row's values depend on every "
                        "row, which a chunk's reference does not see; this test compares chunks")
        # Packed tensors ([..., n*D]): the widest one just past 2^31 elements, not n times it.
        widest = max([chunks_of(a.shape) for a in self.spec.inputs + self.spec.outputs])
        rows = rows // widest + 2
        # Named dims: whole units of them (NAMED_SIZES) in the rows and in each chunk.
        named = list(self.NAMED_SIZES[:len(self.spec.dims)])
        unit = math.prod(named)
        rows, chunk = -(-rows // unit) * unit, max(unit, chunk // unit * unit)
        lead = [rows // unit] + named if named else [rows]
        dtype = torch.bfloat16
        if dtype not in self.spec.torch_dtypes():
            pytest.skip("bfloat16 (the widest tensors in the least memory), which the op's "
                        "dtypes leave out")
        shapes = [_shape_of(a.shape, lead, D, self.spec.dims) for a in self.spec.inputs]
        x = [random_float(a, s, dtype, device).requires_grad_(True) if a.dtype is None
             else self.typed_input(a, s, D).to(device) for a, s in zip(self.spec.inputs, shapes)]
        outs = self.call(self.op, x)
        gouts = self.grad_outs(outs)
        _backward(outs, gouts)
        # A random op: the chunks' references and bounds draw the call's numbers at their rows.
        with self.drawn_with(self.rng_kwargs(x[self.spec.full_input()]).get("_rng")):
            self._rows_match(x, outs, gouts, rows, chunk, dtype, device)

    def _rows_match(self, x, outs, gouts, rows, chunk, dtype, device):
        def reference(a):
            if not self.spec.random:
                return self.reference
            self.row_base = a
            return functools.partial(self.reference, _rng=self.rng_override, _row0=a)

        named = list(self.NAMED_SIZES[:len(self.spec.dims)])

        def rows_of(ts, a, b, args):
            return [None if t is None else _rows(t.detach(), a, b, cls, named)
                    if cls == ROW or full_like(cls) else t.detach() for t, cls in zip(ts, args)]

        out_cls = [o.shape for o in self.spec.outputs]
        reduced = any(a.shape in (COL, SCALAR) or is_mapped(a.shape) for a in self.spec.inputs)
        floor = torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps
        summed = [None] * len(x)  # reference [D] / [] gradients, float32
        open_sums = {dtype: [None] * len(x), torch.float32: [None] * len(x)}  # and their bounds
        for a in range(0, rows, chunk):
            b = min(a + chunk, rows)
            xs = [_cast(t, torch.Tensor.float)
                  for t in rows_of(x, a, b, [i.shape for i in self.spec.inputs])]
            gs = [None if g is None else g.float() for g in rows_of(gouts, a, b, out_cls)]
            want_g = self.grads(reference(a), xs, gs)
            edge = a == 0 or b == rows
            if not edge and not reduced:
                continue
            bounds = {d: self._bounds([_cast(t, lambda t: t.to(dtype)) for t in xs], d,
                                      [None if g is None else g.to(dtype) for g in gs],
                                      partial=True, compensated=d == dtype) for d in open_sums}
            tols, gtols = ([None if p is None or isinstance(p, tuple) else C * (p + q) + floor
                            for p, q in zip(*(bounds[d][k] for d in open_sums))] for k in (0, 1))
            if edge:
                got = [_rows(o.detach(), a, b, cls, named) if cls == ROW or full_like(cls) else o
                       for o, cls in zip(outs, out_cls)]
                for o, g, w, tol in zip(self.spec.outputs, got, self.call(reference(a), xs), tols):
                    self.close(g, w, tol, f"{self.spec.name}.{o.name}, rows {a}:{b}")
            for i, (arg, w) in enumerate(zip(self.spec.inputs, want_g)):
                if w is None:
                    continue
                if arg.shape == ROW or full_like(arg.shape):
                    if edge:
                        self.close(_rows(x[i].grad, a, b, arg.shape, named), w, gtols[i],
                                   f"grad of {arg.name}, rows {a}:{b}")
                else:
                    summed[i] = w if summed[i] is None else summed[i] + w
                    for d, sums in open_sums.items():
                        part = bounds[d][1][i] or (0.0, 0.0, 0.0, 0)  # (None: no IR gradient)
                        sums[i] = part if sums[i] is None else _join_sums([sums[i], part])
        for i, arg in enumerate(self.spec.inputs):
            if summed[i] is not None:
                tol = C * sum(Rounding(d, [1], device).sum_rounded(*sums[i])
                              for d, sums in open_sums.items()) + floor
                self.close(x[i].grad, summed[i], tol, f"grad of {arg.name} (sum over {rows} rows)")

    def deterministic_backward(self, device):
        lead, D = ((2048,), 512) if device == "cuda" else ((256,), 64)
        x = self.inputs(lead, D, self.f32, device)
        gouts = self.grad_outs(self.call(self.op, x))
        first = self.grads(self.op, x, gouts)
        second = self.grads(self.op, x, gouts)
        for a, f, s in zip(self.spec.inputs, first, second):
            assert (f is None and s is None) or _equal(f, s), \
                f"grad of {a.name} differs between two identical runs"

    def help_shows_the_spec(self):
        """help(op): its docstring has the spec's doc, each input and output with its shape,
        each attr with its default, and the dtypes."""
        doc = self.op.__doc__ or ""
        missing = [self.spec.doc] if self.spec.doc not in doc else []
        missing += [f"{a.name} {a.shape}" for a in self.spec.inputs + self.spec.outputs
                    if f"{a.name} {a.shape}" not in doc]
        missing += [a.name for a in self.spec.attrs if f"{a.name}: " not in doc]
        missing += [d for d in self.spec.dtypes if d not in doc]
        assert not missing, f"help({self.spec.name}) lacks {missing}"

    def several_tensors(self, device):
        """The Python wrapper given several tensors for its first [..., D] input (RoPE's q and k,
        of different head counts): a tuple of the op's results on each, the other arguments
        shared."""
        full = self.spec.full_input()
        # Shared [..., D] or [...] inputs make both tensors' leading dims the same.
        alike = any(i != full and (full_like(a.shape) or a.shape == ROW) and not is_mapped(a.shape)
                    for i, a in enumerate(self.spec.inputs))
        xs = [self.inputs(lead, 16, self.f32, device)
              for lead in ((3,), (3,) if alike else (2, 5))]
        shared = list(xs[0])
        if any(is_mapped(a.shape) or a.shape == COL for a in self.spec.inputs):
            # (inputs the calls share must fit both: the same named dims and D)
            xs[1] = [t if i == full else s for i, (t, s) in enumerate(zip(xs[1], shared))]
        several = list(shared)
        several[full] = (xs[0][full], xs[1][full])
        got = self.call(self.op, several)
        assert isinstance(got, tuple) and len(got) == 2, "expected one result per tensor"
        self.reseed()  # (a random op: the calls one after the other, as the wrapper makes them)
        for k in range(2):
            args = list(shared)
            args[full] = xs[k][full]
            want = self.op(*args, **self.attrs())
            want = want if isinstance(want, tuple) else (want,)
            got_k = got[k] if isinstance(got[k], tuple) else (got[k],)
            for g, w, a in zip(got_k, want, self.spec.outputs):
                assert torch.equal(g, w), f"{self.spec.name}.{a.name} of tensor {k}"

    def side_stream(self, device):
        """CUDA: the op launches on the current stream. On a side stream made busy first, its
        inputs written there after the wait: a launch on another stream would read them before
        they are written. Outputs and gradients against the op on the default stream."""
        x = self.inputs((64,), 96, self.f32, device)
        gouts = self.grad_outs(self.call(self.op, x))
        want = self.call(self.op, [t + 1 if t.is_floating_point() else t for t in x])
        want_grads = self.grads(self.op, [t + 1 if t.is_floating_point() else t for t in x],
                                gouts)
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)  # tens of ms of a busy stream
            shifted = [t + 1 if t.is_floating_point() else t for t in x]
            got = self.call(self.op, shifted)
            got_grads = self.grads(self.op, shifted, gouts)
        torch.cuda.current_stream(device).wait_stream(side)
        for g, w, a in zip(got, want, self.spec.outputs):
            assert torch.equal(g, w), f"{self.spec.name}.{a.name}: another result on a side stream"
        for g, w, a in zip(got_grads, want_grads, self.spec.inputs):
            if w is not None:
                assert torch.equal(g, w), f"grad of {a.name}: another result on a side stream"

    def second_device(self):
        """CUDA: tensors on cuda:1 while cuda:0 is current give what they give on cuda:0: the op
        runs on its tensors' device (a device guard), and refuses tensors on two devices."""
        if torch.cuda.device_count() < 2:
            pytest.skip(f"needs 2 GPUs; {torch.cuda.device_count()} visible")
        x = self.inputs((64,), 96, self.f32, "cuda:0")
        gouts = self.grad_outs(self.call(self.op, x))
        want = self.call(self.op, x)
        want_grads = self.grads(self.op, x, gouts)
        with torch.cuda.device(0):
            x1 = [t.to("cuda:1") for t in x]
            got = self.call(self.op, x1)
            got_grads = self.grads(self.op, x1, [None if g is None else g.to("cuda:1")
                                                 for g in gouts])
        for g, w, a in zip(got, want, self.spec.outputs):
            assert g.device == torch.device("cuda:1"), f"{a.name} is on {g.device}"
            assert torch.equal(g.cpu(), w.cpu()), f"{self.spec.name}.{a.name}: another result on cuda:1"
        for g, w, a in zip(got_grads, want_grads, self.spec.inputs):
            if w is not None:
                assert torch.equal(g.cpu(), w.cpu()), f"grad of {a.name}: another result on cuda:1"
        full = self.spec.full_input()
        if len(x) > 1:  # one tensor on each device
            other = next(i for i in range(len(x)) if i != full)
            split = list(x1)
            split[other] = x[other]
            with pytest.raises(RuntimeError, match="all tensor arguments must be on the same device"):
                self.call(self.op, split)

    def cuda_graphs(self, device):
        """The op and its backward capture into a CUDA graph (torch.cuda.graph) and replay on
        new values, and run under torch.compile(mode="reduce-overhead"), which replays one:
        outputs and gradients equal an eager call's bit for bit (the same kernels, and no
        host work of the op's is frozen into the graph)."""
        if self.spec.random:
            return self.cuda_graphs_random(device)
        lead, D = (64,), 512
        attrs = self.attrs()
        static = self.inputs(lead, D, self.f32, device, requires_grad=True)
        gouts = self.grad_outs(self.call(self.op, static))

        def step():
            for t in static:
                t.grad = None
            outs = self.call(self.op, static)
            _backward(outs, gouts)
            return outs
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture, as torch.cuda.graph asks
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        for t in static:
            t.grad = None
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = self.call(self.op, static)
            _backward(outs, gouts)
        fresh = self.inputs(lead, D, self.f32, device,
                            generator=torch.Generator().manual_seed(7))
        with torch.no_grad():
            for t, f in zip(static, fresh):
                t.copy_(f)
        graph.replay()
        eager = [_leaf(f) for f in fresh]
        expected = self.call(self.op, eager)
        _backward(expected, gouts)
        torch.cuda.synchronize()
        for o, out, e in zip(self.spec.outputs, outs, expected):
            assert _equal(out, e), f"output {o.name} replayed from a CUDA graph differs"
        for a, t, e in zip(self.spec.inputs, static, eager):
            assert (t.grad is None and e.grad is None) or _equal(t.grad, e.grad), \
                f"grad of {a.name} replayed from a CUDA graph differs"

        torch._dynamo.reset()
        compiled = torch.compile(lambda *t: self.call(self.op, t, attrs), mode="reduce-overhead",
                                 fullgraph=True)
        x = [f.detach() for f in fresh]
        for _ in range(3):  # recorded on a later call, then replayed
            got = compiled(*x)
            got = [g.clone() for g in (got if isinstance(got, tuple) else (got,))]
        for o, g, e in zip(self.spec.outputs, got, expected):
            assert _equal(g, e.detach()), f"output {o.name} under reduce-overhead differs"

    def cuda_graphs_random(self, device):
        """A random op captured into a CUDA graph draws anew at each replay (the generator's
        offset advances through the graph-safe Philox state), and each replay's outputs are the
        reference's with the (seed, offset) that replay returned."""
        lead, D = (64,), 512
        attrs = self.attrs()
        raw = getattr(_support.op_namespace(), self.spec.name).default
        static = self.inputs(lead, D, self.f32, device)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                raw(*static, **attrs)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            results = _tuple(raw(*static, **attrs))
        replays = []
        for _ in range(2):
            graph.replay()
            torch.cuda.synchronize()
            replays.append([r.clone() for r in results])
        assert not _equal(replays[0][-1], replays[1][-1]), "the replays drew the same numbers"
        for k, got in enumerate(replays):
            with self.drawn_with(got[-1]):
                tols, _ = self.tolerances(static, self.f32)
            want = self.reference(*[_cast(t, torch.Tensor.double) for t in static], **attrs,
                                  _rng=got[-1])
            for o, g, w, tol in zip(self.spec.outputs, got, _tuple(want), tols):
                self.close(g, w, tol, f"{self.spec.name}.{o.name}, CUDA graph replay {k}")

    # ---- torch.func transforms ---------------------------------------------------------
    def _vmap_cases(self, x):
        """(in_dims, batched inputs) pairs: each input alone batched at dim 0 and (where it
        has dims) at its last dim, then all inputs batched at dim 0."""
        B = self.VMAP_BATCH
        cases = []
        for i, t in enumerate(x):
            for dim in sorted({0, t.dim()}):
                dims = [None] * len(x)
                dims[i] = dim
                cases.append(dims)
        cases.append([0] * len(x))
        for dims in cases:
            yield dims, [t if d is None else
                         torch.stack([_cast(t, lambda t: t * (1 + 0.25 * b)) if t.is_floating_point()
                                      else t.roll(b) for b in range(B)], d)
                         for t, d in zip(x, dims)]

    @staticmethod
    def _loop(fn, dims, args, out_dims):
        """fn over the samples one by one, results stacked at out_dims: what vmap promises."""
        B = next(t.shape[d] for t, d in zip(args, dims) if d is not None)
        runs = [fn(*[t if d is None else t.select(d, b) for t, d in zip(args, dims)])
                for b in range(B)]
        return [torch.stack(col, out_dims) for col in zip(*runs)]

    def _compare_vmap(self, fn, dims, args, what):
        """vmap(fn) against the loop, at out_dims 0 and -1, without the per-sample fallback. A
        random op: vmap with randomness="different" draws per sample in order, as the loop does
        from the same seed."""
        random = {"randomness": "different"} if self.spec.random else {}
        for out_dims in (0, -1):
            self.reseed()
            with _no_vmap_fallback():
                got = torch.vmap(fn, in_dims=tuple(dims), out_dims=out_dims, **random)(*args)
            self.reseed()
            want = self._loop(fn, dims, args, out_dims)
            for k, (g, w) in enumerate(zip(got, want)):  # (a NaN the loop gives: a row
                torch.testing.assert_close(                # masked whole, as in the reference)
                    g, w, equal_nan=True,
                    msg=lambda m: f"{what}, in_dims={dims}, out_dims={out_dims}, result {k}: {m}")

    def vmap_forward(self, device, dtype):
        """torch.vmap over the op (every input class batched, at dim 0 and at its last dim)
        equals a loop of per-sample calls, without PyTorch's per-sample fallback."""
        attrs = self.attrs()
        fn = lambda *t: _tuple(self.op(*t, **attrs))  # noqa: E731
        if self.spec.random:  # torch.vmap's default randomness="error" refuses a random op
            x = self.inputs((2, 3), 5, dtype, device)
            dims = tuple(0 if full_like(a.shape) else None for a in self.spec.inputs)
            with pytest.raises(RuntimeError, match="randomness='different'"):
                torch.vmap(fn, in_dims=dims)(*x)
        for dims, args in self._vmap_cases(self.inputs((2, 3), 5, dtype, device)):
            self._compare_vmap(fn, dims, args, f"vmap({self.spec.name})")
        raw = getattr(_support.op_namespace(), self.spec.name).default  # the statistics too
        for dims, args in self._vmap_cases(self.inputs((4,), 6, dtype, device)):
            self._compare_vmap(lambda *t: _tuple(raw(*t, **attrs)), dims, args,
                               f"vmap(torch.ops.{_support.NAMESPACE}.{self.spec.name})")

    def vmap_backward(self, device, dtype):
        """torch.vmap over <op>_backward (each gradient requested alone and all at once:
        output_mask), over torch.func.vjp of the op, and torch.autograd through vmap's
        result, against loops."""
        attrs = self.attrs()  # keyword-only in the op's schema, positional in the backward's
        fwd = getattr(_support.op_namespace(), self.spec.name).default
        bwd = getattr(_support.op_namespace(), self.spec.name + "_backward").default
        n_in, n_out = len(self.spec.inputs), len(self.spec.outputs)
        masks = [[k == i for k in range(n_in)] for i in range(n_in)] + [[True] * n_in]

        def backward(mask):
            def fn(*t):  # (inputs, output gradients)
                # A random op: one forward's statistics and (seed, offset) for every sample, so
                # that fn is a function of t (its per-sample shapes are x's)
                saved = saved0 if self.spec.random else _tuple(fwd(*t[:n_in], **attrs))[n_out:]
                return _tuple(bwd(*t[n_in:], *t[:n_in], *saved, *attrs.values(), mask))
            return fn

        floats = [i for i, a in enumerate(self.spec.inputs) if a.dtype is None]

        def vjp(*t):  # over the floating inputs (integer and bool ones held fixed)
            def fn(*f):
                args = list(t[:n_in])
                for i, v in zip(floats, f):
                    args[i] = v
                return self.differentiable(_tuple(self.op(*args, **attrs)))  # (draws in order)
            _, pull = torch.func.vjp(fn, *[t[i] for i in floats])
            return pull(t[n_in:])

        def outer_grads(dims, args, vmapped):  # torch.autograd through vmap's result
            leaves = [_leaf(t) for t in args[:n_in]]
            fn = lambda *t: self.differentiable(_tuple(self.op(*t, **attrs)))  # noqa: E731
            random = {"randomness": "different"} if self.spec.random else {}
            self.reseed()
            outs = (torch.vmap(fn, in_dims=tuple(dims[:n_in]), **random)(*leaves) if vmapped
                    else self._loop(fn, dims[:n_in], leaves, 0))
            g = [torch.stack([t] * self.VMAP_BATCH) if d is None else t.movedim(d, 0)
                 for t, d in zip(args[n_in:], dims[n_in:])]
            wanted = [t for t in leaves if t.requires_grad]  # (not integer or bool inputs)
            got = iter(torch.autograd.grad(outs, wanted, g, allow_unused=True))
            return [next(got) if t.requires_grad else None for t in leaves]

        x = self.inputs((2, 3), 5, dtype, device)
        gouts = [g for g in self.grad_outs(self.call(self.op, x)) if g is not None]
        saved0 = _tuple(fwd(*x, **attrs))[n_out:]
        for dims, args in self._vmap_cases(x + gouts):
            # A random op whose inputs are not all batched runs once under vmap (torch calls a
            # custom op without its batching rule when no input is batched, one draw for all
            # samples) but once per sample in the loop: compared where every input is batched.
            draws = not self.spec.random or all(d is not None for d in dims[:n_in])
            if any(d is not None for d in dims[:n_in]) and draws:
                with _no_vmap_fallback():
                    got = outer_grads(dims, args, True)
                for a, g, w in zip(self.spec.inputs, got, outer_grads(dims, args, False)):
                    torch.testing.assert_close(
                        g, w, equal_nan=True,
                        msg=lambda m: f"autograd through vmap, in_dims={dims}, {a.name}: {m}")
            for mask in masks:
                self._compare_vmap(backward(mask), dims, args,
                                   f"vmap({self.spec.name}_backward), mask {mask}")
            if draws:
                self._compare_vmap(vjp, dims, args, f"vmap(vjp({self.spec.name}))")

    def func_transforms(self, device):
        """torch.func.grad, vjp and jacrev of the op against those of its reference (float64);
        forward mode (jvp) and nested grads raise instead of returning wrong values. The
        transforms take the floating inputs (integer and bool ones are held fixed)."""
        self.need_float64()
        x = self.inputs((2, 3), 4, torch.float64, device)
        floats = [i for i, t in enumerate(x) if t.is_floating_point()]
        names = [self.spec.inputs[i].name for i in floats]
        argnums = tuple(range(len(floats)))

        def over_floats(fn):  # fn with the floating inputs as its arguments
            def call(*f):
                args = list(x)
                for i, t in zip(floats, f):
                    args[i] = t
                return self.call(fn, args)
            return call
        xf = [x[i] for i in floats]
        for k, out in enumerate(self.spec.outputs):
            if not out.differentiable:  # (an output of its own type has no derivative)
                continue

            def pick(fn):
                return lambda *t: over_floats(fn)(*t)[k]
            with _no_vmap_fallback():
                got = torch.func.jacrev(pick(self.op), argnums)(*xf)
            want = torch.func.jacrev(pick(self.reference), argnums)(*xf)
            for name, g, w in zip(names, got, want):
                torch.testing.assert_close(g, w, msg=lambda m: f"jacrev of {out.name} in "
                                                               f"{name}: {m}")
            weights = torch.randn_like(self.call(self.op, x)[k])

            def loss(fn):
                return lambda *t: (pick(fn)(*t) * weights).sum()
            got = torch.func.grad(loss(self.op), argnums)(*xf)
            want = torch.func.grad(loss(self.reference), argnums)(*xf)
            for name, g, w in zip(names, got, want):
                torch.testing.assert_close(g, w, msg=lambda m: f"grad of {name}: {m}")
        tangents = [torch.randn_like(t) for t in xf]
        with pytest.raises(RuntimeError, match="forward-mode AD .* is not supported"):
            torch.func.jvp(over_floats(self.op), tuple(xf), tuple(tangents))
        # Second derivatives by nested torch.func grads raise (torch.autograd's create_graph
        # has them: gradgradcheck), never come back as zeros.
        def total(*t):
            return sum((o * torch.randn_like(o)).sum()
                       for o in self.differentiable(over_floats(self.op)(*t)))
        if not self.spec.differentiable_outputs():
            return
        with pytest.raises(RuntimeError, match="nested torch.func transforms"):
            torch.func.grad(lambda *t: torch.func.grad(total)(*t).sum())(*xf)
        # Reverse over reverse (jacrev of jacrev: an inner backward differentiated at the outer
        # level) and ordinary autograd of a torch.func.grad result match the reference's with
        # the ATen glue; a stable ABI build, whose autograd is Python of one level, refuses the
        # first and warns of the second; hessian (forward over reverse) raises. None may come
        # back as zeros or wrong values in silence.
        weights = [torch.randn_like(o) for o in self.differentiable(over_floats(self.op)(*xf))]

        def fixed(fn):
            return lambda *t: sum((o * w).sum() for o, w in
                                  zip(self.differentiable(over_floats(fn)(*t)), weights))
        with pytest.raises(RuntimeError, match="forward-mode AD .* is not supported"):
            torch.func.hessian(fixed(self.op))(*xf)
        stable = _support.stable_abi()

        def through_grad(fn):  # torch.autograd.grad of a torch.func.grad's result
            leaves = [t.clone().requires_grad_() for t in xf]
            g = [v for v in torch.func.grad(fixed(fn), argnums)(*leaves) if v.requires_grad]
            if not g:  # (a gradient that does not depend on the inputs: a linear op's)
                return [None] * len(leaves)
            return torch.autograd.grad(sum((v * v).sum() for v in g), leaves, allow_unused=True)
        if stable:
            with pytest.raises(RuntimeError, match="nested torch.func transforms"):
                torch.func.jacrev(torch.func.jacrev(fixed(self.op)))(*xf)
            with pytest.warns(UserWarning, match="does not record this op"):
                through_grad(self.op)
            return
        torch.testing.assert_close(
            torch.func.jacrev(torch.func.jacrev(fixed(self.op)))(*xf),
            torch.func.jacrev(torch.func.jacrev(fixed(self.reference)))(*xf),
            msg=lambda m: f"jacrev of jacrev: {m}")
        for name, g, w in zip(names, through_grad(self.op), through_grad(self.reference)):
            if g is None or w is None:  # (no dependency on one side: zeros on the other)
                other = g if w is None else w
                assert other is None or not other.any(), f"autograd of grad, {name}: nonzero"
            else:
                torch.testing.assert_close(g, w, msg=lambda m: f"autograd of grad, {name}: {m}")


def _tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _sharding_worker(rank: int, name: str, port: int) -> None:
    """One of the 2 CPU processes of OpChecks.sharding (gloo): the op on DTensor inputs placed as
    each of its sharding strategies (_support.register_sharding) against the op on whole tensors."""
    import importlib

    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        checks = importlib.import_module(f"{_support.PACKAGE}.{name}.test_{name}").CHECKS
        spec = checks.spec
        mesh = init_device_mesh("cpu", (2,))
        torch.manual_seed(0)  # the same inputs in both processes
        x = checks.inputs((4,), 8, torch.float64, "cpu")
        outs = checks.call(checks.op, x)
        gouts = checks.grad_outs(outs)
        want = checks.grads(checks.op, x, gouts)
        ndim = x[spec.full_input()].dim()
        classes = [a.shape for a in spec.inputs]
        results = [o.shape for o in spec.outputs]
        for d in _support._sharding_dims(spec, ndim):
            where = f"{name}: sharded on dim {d}"
            places = _support._placements(spec, classes, d, ndim, False)
            dx = [distribute_tensor(_leaf(t), mesh, [p]) for t, p in zip(x, places)]
            with CommDebugMode() as comm:
                douts = checks.call(checks.op, dx)
            assert comm.get_total_counts() == 0, \
                f"{where}: the forward ran {comm.get_comm_counts()}, a local strategy runs none"
            oplaces = _support._placements(spec, results, d, ndim, False)
            for o, w, a, p in zip(douts, outs, spec.outputs, oplaces):
                assert isinstance(o, DTensor), f"{where}: output {a.name} is not a DTensor"
                assert tuple(o.placements) == (p,), f"{where}: output {a.name} is {o.placements}"
                # (this process's shard, as DTensor splits: gloo gathers no FP8 tensors)
                local = w.chunk(2, p.dim)[rank] if p.is_shard() else w
                torch.testing.assert_close(o.to_local(), local, rtol=0, atol=0,
                                           msg=lambda m: f"{where}, output {a.name}: {m}")
            dg = [None if g is None else distribute_tensor(g, mesh, [p])
                  for g, p in zip(gouts, oplaces)]
            _backward(douts, dg)
            for t, w, a in zip(dx, want, spec.inputs):
                if w is None:
                    continue
                got = t.grad.full_tensor()
                # A gradient summed over shards (Partial, then reduced) adds in another order.
                tol = 1e-12 if is_mapped(a.shape) or a.shape in (COL, SCALAR, ROW) else 0
                torch.testing.assert_close(got, w, rtol=tol, atol=tol,
                                           msg=lambda m: f"{where}, gradient of {a.name}: {m}")
    finally:
        dist.destroy_process_group()
    # Done: leave without the interpreter's teardown, where a thread of the process group's
    # could still be joinable (about one run in three aborted there, after every check passed).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _backward(outs, grad_outs):
    """torch.autograd.backward through the outputs with a gradient (not None): an output of its
    own type has none, and an op with only such outputs no backward at all."""
    used = [(o, g) for o, g in zip(outs, grad_outs) if g is not None]
    if used:
        torch.autograd.backward([o for o, _ in used], [g for _, g in used])


def _wide(t):
    """An FP8 tensor as float32 (exact), which every op of torch computes on; others as given."""
    return t.float() if t is not None and t.is_floating_point() and t.element_size() == 1 else t


def _equal(a, b):
    """torch.equal, bit for bit for FP8 tensors (which torch.equal does not take)."""
    if a.is_floating_point() and a.element_size() == 1 and a.dtype == b.dtype:
        return torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    return torch.equal(a, b)


@contextlib.contextmanager
def _no_vmap_fallback():
    """PyTorch's per-sample vmap fallback is off (an op without a batching rule raises; the
    fallback's own warning goes to the C++ log, not to Python), and warnings are errors."""
    torch._C._functorch._set_vmap_fallback_enabled(False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            yield
    finally:
        torch._C._functorch._set_vmap_fallback_enabled(True)
