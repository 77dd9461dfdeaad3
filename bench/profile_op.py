"""One forward and one backward of an op, for a profiler to look at: fusegen's installed op,
its eager reference, torch.compile of the reference or Liger-Kernel's (bench/run.py's
liger_impls), after a warm-up, between cudaProfilerStart and cudaProfilerStop:

    ncu --profile-from-start off --clock-control none \\
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \\
        --section WarpStateStats python3 bench/profile_op.py rmsnorm 32768x4096 --impl liger

bf16 inputs of the spec's shapes, random; the output gradients are random too.
--forward-only leaves the backward out.
"""
import argparse
import importlib
import os
import sys

import torch

import fusegen_ops  # noqa: F401  (registers the ops)
from fusegen_ops import benchmark

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import liger_impls  # noqa: E402  (bench/run.py)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("op")
    p.add_argument("shape", help="ROWSxD")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--impl", default="fusegen",
                   choices=["fusegen", "eager", "torch.compile", "liger"])
    p.add_argument("--forward-only", action="store_true")
    args = p.parse_args()
    rows, D = (int(v) for v in args.shape.split("x"))
    entry = importlib.import_module(f"fusegen_ops.{args.op}.bench_{args.op}").ENTRY
    if args.impl == "liger":
        fn = liger_impls().get(args.op)
        if fn is None:
            sys.exit(f"profile_op.py: Liger-Kernel has no {args.op}")
    else:
        fn = benchmark.implementations(entry)[args.impl]
    forward, forward_backward, xg = benchmark.timed_steps(entry.spec, fn, rows, D,
                                                          getattr(torch, args.dtype), "cuda")

    def step():
        if args.forward_only:
            return forward()
        forward_backward()
        for x in xg:  # no gradient accumulation kernels in the profile
            x.grad = None

    for _ in range(3):  # compiles Triton kernels, fills caches
        step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    step()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
