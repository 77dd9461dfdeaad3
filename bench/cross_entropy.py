"""Cross-entropy against class indices, side by side on the GPU (issue #16): fusegen's
cross_entropy, QuACK's quack.cross_entropy, Liger-Kernel's LigerCrossEntropyFunction,
torch.compile of F.cross_entropy and eager F.cross_entropy, all per-row losses
(reduction="none"; with --reduction mean, fusegen's cross_entropy_mean and everyone's mean
over the rows not ignored) of bf16 logits [rows, V] against int64 targets (a tenth of them
ignore_index), forward and forward+backward (the backward of the mean over rows), plus the
device-to-device copy bandwidth of the same run. Bandwidth counts the minimum bytes: the
logits read once forward; read twice and the gradient written once forward+backward. Writes
bench.json and bench.md to --out.

    python3 bench/cross_entropy.py --out bench/results/DIR [--shapes 8192x128256,16384x32000]
"""
import argparse
import datetime
import json
import os

import torch
import torch.nn.functional as F

from fusegen_ops import benchmark
from fusegen_ops.cross_entropy import cross_entropy as fusegen_ce
from fusegen_ops.cross_entropy_mean import cross_entropy_mean as fusegen_ce_mean


def impls(reduction):
    out = {"fusegen": fusegen_ce if reduction == "none" else fusegen_ce_mean}
    try:
        from quack.cross_entropy import cross_entropy as quack_ce
        out["quack"] = lambda x, t: quack_ce(x, t, reduction=reduction)
    except ImportError as e:
        print(f"bench/cross_entropy.py: QuACK not available ({e})")
    try:
        from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
        out["liger"] = lambda x, t: LigerCrossEntropyFunction.apply(x, t, None, -100, 0.0, 0.0,
                                                                    reduction)[0]
    except ImportError as e:
        print(f"bench/cross_entropy.py: Liger-Kernel not available ({e})")
    eager = lambda x, t: F.cross_entropy(x, t, reduction=reduction)  # noqa: E731
    out["torch.compile"] = torch.compile(eager)
    out["eager"] = eager
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", default="8192x128256,16384x32000")
    p.add_argument("--reduction", default="none", choices=["none", "mean"])
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    copy = benchmark.copy_bandwidth("cuda")
    rows_out = []
    for shape in args.shapes.split(","):
        rows, V = (int(v) for v in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(rows, V, device="cuda", dtype=torch.bfloat16, generator=g)
        t = torch.randint(0, V, (rows,), device="cuda", generator=g)
        t[torch.rand(rows, device="cuda", generator=g) < 0.1] = -100
        dloss = (torch.full((rows,), 1.0 / rows, device="cuda") if args.reduction == "none"
                 else torch.ones((), device="cuda"))
        want = F.cross_entropy(x.float(), t, reduction=args.reduction)
        xg = x.clone().requires_grad_(True)
        for name, fn in impls(args.reduction).items():
            got = fn(x, t)
            err = float((got.float() - want).abs().max())  # a sanity check, not a test

            def step():
                fn(xg, t).backward(dloss)
            fwd = benchmark._time(lambda: fn(x, t))
            both = benchmark._time(step, grad_to_none=[xg])
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            step()
            torch.cuda.synchronize()
            peak = (torch.cuda.max_memory_allocated() - base) / 2**20
            xg.grad = None
            logits = rows * V * 2
            r = {"impl": name, "shape": shape, "fwd_ms": fwd, "fwd_bwd_ms": both,
                 "fwd_GBps": logits / fwd / 1e6, "fwd_bwd_GBps": 3 * logits / both / 1e6,
                 "peak_MiB": peak, "max_abs_err_vs_fp32": err}
            r["fwd_copy_pct"] = 100 * r["fwd_GBps"] / copy
            r["fwd_bwd_copy_pct"] = 100 * r["fwd_bwd_GBps"] / copy
            rows_out.append(r)
            print(f"{shape:>13} {name:14} fwd {fwd:7.3f} ms {r['fwd_copy_pct']:5.1f}%  "
                  f"f+b {both:7.3f} ms {r['fwd_bwd_copy_pct']:5.1f}%  peak {peak:8.1f} MiB  "
                  f"err {err:.2e}", flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "glue": benchmark.glue(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "copy_GBps": copy, "dtype": "bfloat16", "reduction": args.reduction}
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"meta": meta, "results": rows_out}, f, indent=1)
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(f"# cross_entropy, {meta['gpu']}, torch {meta['torch']}, {meta['date']}\n\n"
                f"bf16 logits, int64 targets (10% ignore_index), reduction {args.reduction}; copy "
                f"{copy:.0f} GB/s. % of copy by the minimum bytes (logits read once forward; "
                "read twice and the gradient written once forward+backward).\n\n"
                "| shape | impl | fwd ms | fwd % copy | fwd+bwd ms | fwd+bwd % copy | peak MiB |\n"
                "|---|---|---:|---:|---:|---:|---:|\n")
        for r in rows_out:
            f.write(f"| {r['shape']} | {r['impl']} | {r['fwd_ms']:.3f} | {r['fwd_copy_pct']:.1f} | "
                    f"{r['fwd_bwd_ms']:.3f} | {r['fwd_bwd_copy_pct']:.1f} | {r['peak_MiB']:.0f} |\n")


if __name__ == "__main__":
    main()
