"""One forward and one backward of an installed fusegen op, for a profiler to look at:

    ncu --clock-control none -k regex:'rowProgram|colwise|flat|finalize' \\
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \\
        python3 bench/profile_op.py rmsnorm 32768x4096

bf16 inputs of the spec's shapes, random; the output gradients are random too.
"""
import argparse
import importlib

import torch

import fusegen_ops  # noqa: F401  (registers the ops)
from fusegen_ops import benchmark


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("op")
    p.add_argument("shape", help="ROWSxD")
    p.add_argument("--dtype", default="bfloat16")
    args = p.parse_args()
    rows, D = (int(v) for v in args.shape.split("x"))
    entry = importlib.import_module(f"fusegen_ops.{args.op}.bench_{args.op}").ENTRY
    attrs = {a.name: a.default for a in entry.spec.attrs if a.default is not None}
    xs = benchmark.make_inputs(entry.spec, rows, D, getattr(torch, args.dtype), "cuda", True)
    out = entry.op(*xs, **attrs)
    outs = out if isinstance(out, tuple) else (out,)
    torch.autograd.backward(outs, [torch.randn_like(o) for o in outs])
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
