"""Timing of generated ops against their eager reference and torch.compile of it.

`python -m <package>.<op>.bench_<op>` runs one op; bench/run.py runs them all and writes
bench/results/. Times are medians of CUDA-event timings after warm-up, with the L2 cache
flushed between runs (triton.testing.do_bench); bandwidth counts the minimum bytes the op
must move: every input read once and every output written once (forward), plus the
gradient traffic (forward+backward)."""
import argparse
import json
import platform
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import torch

from ._support import COL, FULL, ROW, SCALAR, OpInfo, random_float, random_typed, stable_abi


@dataclass
class Entry:
    spec: OpInfo
    op: Callable
    reference: Callable
    independent: Optional[Callable] = None  # the spec's hand-written PyTorch (built-ins)


DEFAULT_SHAPES = [(512, 4096), (4096, 4096), (16384, 8192)]


def make_inputs(spec: OpInfo, rows: int, D: int, dtype, device, requires_grad=False):
    """Random inputs: floats N(0, 1) in dtype (uniform within a declared range); integer inputs
    indices in [0, D) (class indices), bool inputs coin flips, neither requiring grad."""
    shapes = {FULL: [rows, D], COL: [D], ROW: [rows], SCALAR: []}
    out = []
    for a in spec.inputs:
        shape = shapes[a.shape]
        if a.dtype is not None:
            out.append(random_typed(a, shape, D, device))
        else:
            out.append(random_float(a, shape, dtype, device).requires_grad_(requires_grad))
    return out


def min_bytes(spec: OpInfo, rows: int, D: int, elem: int, backward: bool) -> int:
    """The bytes an op must move at least: its inputs read and outputs written once; with
    backward, the inputs and output gradients read again and the floating inputs' gradients
    written (outputs of their own type, FP8 or float32, have no gradient)."""
    size = {FULL: rows * D, COL: D, ROW: rows, SCALAR: 1}

    def width(a):  # bytes per element: the call's dtype's, or the argument's own
        return elem if a.dtype is None else getattr(torch, a.dtype).itemsize
    reads = sum(size[a.shape] * width(a) for a in spec.inputs)
    writes = sum(size[o.shape] * width(o) for o in spec.outputs)
    grad_outs = sum(size[o.shape] for o in spec.differentiable_outputs()) * elem
    grads = sum(size[a.shape] for a in spec.inputs if a.dtype is None) * elem
    return reads + writes + ((reads + grad_outs + grads) if backward else 0)


def _time(fn, grad_to_none=None) -> float:
    """Median ms. grad_to_none: tensors whose .grad is reset before every run, as an optimizer's
    zero_grad() does; otherwise each backward would add into the last one's gradients, an
    extra elementwise add over every input gradient."""
    from triton.testing import do_bench
    return do_bench(fn, warmup=25, rep=200, grad_to_none=grad_to_none, return_mode="median")


def glue() -> str:
    """The glue this package was built with (_build_info.py): forward+backward timings depend
    on it wherever the host's time per call shows, as the stable ABI build's autograd is a
    Python function (bench/results/2026-12-05-h100/README.md)."""
    return "stable ABI" if stable_abi() else "ATen"


def copy_bandwidth(device) -> float:
    """Device-to-device copy of 1 GiB, GB/s counting bytes read and written."""
    src = torch.empty(1 << 29, dtype=torch.float16, device=device)
    dst = torch.empty_like(src)
    ms = _time(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size() / ms / 1e6


def implementations(entry: Entry, extra: Optional[Dict[str, Callable]] = None):
    """Name -> callable(*tensors, **attrs) of everything timed for an entry."""
    impls = {"fusegen": entry.op, "eager": entry.reference,
             "torch.compile": torch.compile(entry.reference)}
    if entry.independent is not None and entry.independent(
            *make_inputs(entry.spec, 2, 8, torch.float32, "cpu"),
            **{a.name: a.default for a in entry.spec.attrs if a.default is not None}) is not None:
        impls["pytorch"] = entry.independent
    impls.update(extra or {})
    return impls


def timed_steps(spec: OpInfo, fn: Callable, rows: int, D: int, dtype, device):
    """What a benchmark times for fn at rows x D: (forward, forward_backward, grad_inputs).
    forward runs on inputs that need no gradient; forward_backward on inputs that do
    (grad_inputs, whose .grad the caller resets between runs), with fixed random output
    gradients; None when no output is differentiable."""
    attrs = {a.name: a.default for a in spec.attrs if a.default is not None}
    x = make_inputs(spec, rows, D, dtype, device)
    xg = make_inputs(spec, rows, D, dtype, device, requires_grad=True)
    out = fn(*xg, **attrs)
    used = [m for m, o in enumerate(spec.outputs) if o.differentiable]
    gouts = [torch.randn_like((out if isinstance(out, tuple) else (out,))[m]) for m in used]

    def forward():
        return fn(*x, **attrs)

    def forward_backward():
        o = fn(*xg, **attrs)
        o = o if isinstance(o, tuple) else (o,)
        torch.autograd.backward([o[m] for m in used], gouts)
    return forward, forward_backward if used else None, xg


def measure(spec: OpInfo, fn: Callable, rows: int, D: int, dtype, device):
    """(forward ms, forward+backward ms, peak MiB of one forward+backward beyond its inputs
    and output gradients) of fn at rows x D."""
    forward, step, xg = timed_steps(spec, fn, rows, D, dtype, device)
    fwd = _time(forward)
    if step is None:  # (no gradient: forward only)
        return fwd, None, None
    both = _time(step, grad_to_none=xg)
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    for t in xg:
        t.grad = None
    return fwd, both, peak / 2**20


def bench_entry(entry: Entry, shapes: Sequence, dtype, device,
                extra: Optional[Dict[str, Callable]] = None) -> List[dict]:
    spec = entry.spec
    rows_out = []
    for rows, D in shapes:
        for name, fn in implementations(entry, extra).items():
            fwd, both, peak = measure(spec, fn, rows, D, dtype, device)
            elem = torch.empty((), dtype=dtype).element_size()
            rows_out.append({
                "op": spec.name, "impl": name, "rows": rows, "D": D, "dtype": str(dtype),
                "fwd_ms": fwd, "fwd_bwd_ms": both, "fwd_bwd_peak_MiB": peak,
                "fwd_GBps": min_bytes(spec, rows, D, elem, False) / fwd / 1e6,
                "fwd_bwd_GBps": None if both is None else min_bytes(spec, rows, D, elem, True) / both / 1e6,
            })
    return rows_out


def main(entries: Sequence[Entry], argv=None, extra: Optional[Dict[str, Dict[str, Callable]]] = None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--shapes", default=",".join(f"{r}x{d}" for r, d in DEFAULT_SHAPES))
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("fusegen benchmark: no CUDA device; benchmarks run on a GPU")
    dtype = getattr(torch, args.dtype)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    copy = copy_bandwidth("cuda")
    results = []
    for e in entries:
        results += bench_entry(e, shapes, dtype, "cuda", (extra or {}).get(e.spec.name))
    print(f"{'op':14} {'impl':14} {'shape':>12} {'fwd ms':>9} {'fwd GB/s':>9} {'f+b ms':>9} "
          f"{'f+b GB/s':>9}   (copy {copy:.0f} GB/s)")
    for r in results:
        print(f"{r['op']:14} {r['impl']:14} {str(r['rows']) + 'x' + str(r['D']):>12} "
              f"{r['fwd_ms']:9.4f} {r['fwd_GBps']:9.0f} "
              + ("      (no gradient)" if r['fwd_bwd_ms'] is None else
                 f"{r['fwd_bwd_ms']:9.4f} {r['fwd_bwd_GBps']:9.0f}"))
    if args.json:
        meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                "python": platform.python_version(), "copy_GBps": copy}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
    return results
