"""batchnorm_train side by side on the GPU (issue #17): fusegen's batchnorm_train (channels
last: x [rows, C], statistics per column over every row) against eager PyTorch's
F.batch_norm(training=True) on the same [rows, C] tensor (cuDNN or ATen's Welford kernels) and
torch.compile of it, bf16, forward and forward+backward (the gradients of x, weight and bias),
with the device-to-device copy bandwidth of the same run. Bandwidth counts the minimum bytes:
the forward reads x and writes y (2 x rows x C), the backward reads x and the output gradient
and writes the gradient of x (3 x); the [C] vectors are negligible. Also checks the batch
statistics against torch's. With --kernels, also fusegen's kernels one by one (torch.profiler,
the mean over 20 calls) at the first shape: where the time of each pass over x goes. Writes
bench.json and bench.md.

    python3 bench/batchnorm.py --out bench/results/DIR [--shapes 65536x1024] [--kernels]
"""
import argparse
import datetime
import json
import os

import torch
import torch.nn.functional as F

from fusegen_ops import benchmark
from fusegen_ops.batchnorm_train import batchnorm_train

import timing


def eager(x, w, b):
    return F.batch_norm(x, None, None, w, b, True, 0.0, 1e-5)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", default="65536x1024,16384x4096,262144x256")
    p.add_argument("--kernels", action="store_true", help="fusegen's kernels one by one")
    timing.add_rounds_argument(p)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    copy = benchmark.copy_bandwidth("cuda")
    impls = {"fusegen": lambda x, w, b: batchnorm_train(x, w, b)[0],
             "torch.compile": torch.compile(eager), "eager": eager}
    rows_out = []
    for shape in args.shapes.split(","):
        rows, C = (int(v) for v in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(rows, C, device="cuda", dtype=torch.bfloat16, generator=g) * 2 + 0.5
        w = torch.randn(C, device="cuda", dtype=torch.bfloat16, generator=g)
        b = torch.randn(C, device="cuda", dtype=torch.bfloat16, generator=g)
        gy = torch.randn(rows, C, device="cuda", dtype=torch.bfloat16, generator=g)
        want = eager(x.float(), w.float(), b.float())
        _, mean, var = batchnorm_train(x, w, b)
        stats_err = max(float((mean - x.float().mean(0)).abs().max()),
                        float((var - x.float().var(0, unbiased=False)).abs().max()))
        timed, errs = {}, {}
        for name, fn in impls.items():
            errs[name] = float((fn(x, w, b).float() - want).abs().max())  # a sanity check
            leaves = [t.clone().requires_grad_(True) for t in (x, w, b)]

            def step(fn=fn, leaves=leaves):
                torch.autograd.grad(fn(*leaves), leaves, gy)
            timed[name] = {"fwd": lambda fn=fn: fn(x, w, b), "fwd_bwd": step}
        times = timing.in_rounds(timed, args.rounds)
        for name in impls:
            fwds, boths = times[name]["fwd"], times[name]["fwd_bwd"]
            fwd, both, err = timing.median(fwds), timing.median(boths), errs[name]
            n = rows * C * 2
            r = {"op": "batchnorm_train", "impl": name, "shape": shape, "fwd_ms": fwd,
                 "fwd_bwd_ms": both, "fwd_ms_rounds": fwds, "fwd_bwd_ms_rounds": boths,
                 "fwd_GBps": 2 * n / fwd / 1e6, "fwd_bwd_GBps": 5 * n / both / 1e6,
                 "max_abs_err_vs_fp32": err}
            if name == "fusegen":
                r["stats_max_abs_err_vs_fp32"] = stats_err
            r["fwd_copy_pct"] = 100 * r["fwd_GBps"] / copy
            r["fwd_bwd_copy_pct"] = 100 * r["fwd_bwd_GBps"] / copy
            rows_out.append(r)
            print(f"{shape:>12} {name:14} fwd {fwd:7.3f} ms {r['fwd_copy_pct']:5.1f}% "
                  f"({timing.spread(fwds)})  f+b {both:7.3f} ms {r['fwd_bwd_copy_pct']:5.1f}% "
                  f"({timing.spread(boths)})  err {err:.2e}", flush=True)
    kernels = kernel_times(args.shapes.split(",")[0]) if args.kernels else []
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "glue": benchmark.glue(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "copy_GBps": copy, "dtype": "bfloat16"}
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"meta": meta, "results": rows_out, "kernels": kernels}, f, indent=1)
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(f"# batchnorm_train, {meta['gpu']}, torch {meta['torch']}, {meta['date']}\n\n"
                f"bf16 x [rows, C] (shape rows x C), statistics per column; copy {copy:.0f} GB/s. "
                "% of copy by the minimum bytes (forward: read x, write y; forward+backward: "
                f"5 x the elements of x). {timing.rounds_note(args.rounds)}\n\n"
                "| shape | impl | fwd ms | fwd % copy | fwd+bwd ms | fwd+bwd % copy |\n"
                "|---|---|---:|---:|---:|---:|\n")
        for r in rows_out:
            f.write(f"| {r['shape']} | {r['impl']} | "
                    f"{timing.cell(r['fwd_ms'], r['fwd_ms_rounds'])} | {r['fwd_copy_pct']:.1f} | "
                    f"{timing.cell(r['fwd_bwd_ms'], r['fwd_bwd_ms_rounds'])} | "
                    f"{r['fwd_bwd_copy_pct']:.1f} |\n")
        if kernels:
            f.write(f"\nfusegen's kernels at {args.shapes.split(',')[0]} (torch.profiler, mean "
                    "of 20 calls of the forward and the backward):\n\n"
                    "| direction | kernel | us |\n|---|---|---:|\n")
            for k in kernels:
                f.write(f"| {k['direction']} | `{k['kernel'][:90]}` | {k['us']:.1f} |\n")


def kernel_times(shape, calls=20):
    """fusegen's CUDA kernels in the forward and in the backward at `shape`, by name, in us
    per call (the mean over `calls`)."""
    rows, C = (int(v) for v in shape.split("x"))
    x = torch.randn(rows, C, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(C, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(C, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    gy = torch.randn(rows, C, device="cuda", dtype=torch.bfloat16)
    out = []
    for direction in ("forward", "backward"):
        y = batchnorm_train(x, w, b)[0]
        torch.autograd.grad(y, (x, w, b), gy, retain_graph=True)  # warm
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                if direction == "forward":
                    batchnorm_train(x.detach(), w.detach(), b.detach())
                else:
                    torch.autograd.grad(y, (x, w, b), gy, retain_graph=True)
            torch.cuda.synchronize()
        for e in prof.key_averages():
            if e.device_type == torch.autograd.DeviceType.CUDA or getattr(e, "device_time_total", 0):
                us = getattr(e, "device_time_total", 0) / calls
                if us > 0:
                    out.append({"direction": direction, "kernel": e.key, "us": us})
                    print(f"  {direction:8} {us:8.1f} us  {e.key[:100]}", flush=True)
    return out


if __name__ == "__main__":
    main()
