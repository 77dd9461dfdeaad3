"""Host cost per call of small, launch-bound shapes: fusegen's op against its eager reference.

At 512x4096 a kernel takes a few microseconds, so forward+backward time is what the CPU
spends between launches (dispatcher, autograd, allocations). For each op this times a loop
of calls back to back (no L2 flush, one synchronize at the end: microseconds per call, the
host's throughput), then lists the CPU time per function of one op's forward+backward from
torch.profiler, for fusegen and eager.

    python3 bench/host_overhead.py --ops sigmoid,mul,leaky_relu --profile sigmoid
"""
import argparse
import importlib
import time

import torch

import fusegen_ops  # noqa: F401  (registers the ops)
from fusegen_ops import benchmark


def steps(entry, impl, rows, D, dtype, device):
    """benchmark.timed_steps of fusegen's op or the eager reference; the forward+backward
    resets the input gradients, as a loop of training steps would."""
    fn = entry.op if impl == "fusegen" else entry.reference
    forward, forward_backward, xg = benchmark.timed_steps(entry.spec, fn, rows, D, dtype, device)

    def step():
        forward_backward()
        for x in xg:
            x.grad = None
    return forward, step


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def per_call_us(f, calls, device):
    for _ in range(50):
        f()
    sync(device)
    start = time.perf_counter()
    for _ in range(calls):
        f()
    sync(device)
    return (time.perf_counter() - start) / calls * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", default="sigmoid,mul,leaky_relu,softplus,bias_gelu")
    p.add_argument("--shape", default="512x4096")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--profile", default="", help="op whose forward+backward is profiled")
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    rows, D = (int(v) for v in args.shape.split("x"))
    where = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(f"{where}, torch {torch.__version__}, bf16 {args.shape}, "
          f"microseconds per call, {args.calls} calls back to back")
    print("| op | fusegen fwd | eager fwd | fusegen fwd+bwd | eager fwd+bwd |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for op in args.ops.split(","):
        entry = importlib.import_module(f"fusegen_ops.{op}.bench_{op}").ENTRY
        cells = {}
        for impl in ("fusegen", "eager"):
            fwd, fwd_bwd = steps(entry, impl, rows, D, torch.bfloat16, args.device)
            cells[impl] = (per_call_us(fwd, args.calls, args.device),
                           per_call_us(fwd_bwd, args.calls, args.device))
        print(f"| {op} | {cells['fusegen'][0]:.1f} | {cells['eager'][0]:.1f} | "
              f"{cells['fusegen'][1]:.1f} | {cells['eager'][1]:.1f} |", flush=True)
    if args.profile:
        entry = importlib.import_module(f"fusegen_ops.{args.profile}.bench_{args.profile}").ENTRY
        for impl in ("fusegen", "eager"):
            _, fwd_bwd = steps(entry, impl, rows, D, torch.bfloat16, args.device)
            per_call_us(fwd_bwd, 100, args.device)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                for _ in range(100):
                    fwd_bwd()
                sync(args.device)
            print(f"\n{args.profile}, {impl}, forward+backward x 100:")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))


if __name__ == "__main__":
    main()
