"""masked_softmax side by side on the GPU (issue #16, a [..., D] bool input): fusegen's
masked_softmax against eager PyTorch (softmax of x.masked_fill(~mask, -inf), NaN of fully
masked rows set to 0) and torch.compile of the same, bf16 scores with a bool mask keeping
half of each row at random, forward and forward+backward (torch.autograd.grad of x), with the
device-to-device copy bandwidth of the same run. Bandwidth counts the minimum bytes: forward
reads x (2 bytes per element) and the mask (1) and writes y (2); the backward reads the
output gradient, x and the mask and writes x's gradient (7 more). Writes bench.json and
bench.md to --out.

    python3 bench/masked_softmax.py --out bench/results/DIR [--shapes 16384x4096,4096x16384]
"""
import argparse
import datetime
import json
import os

import torch

from fusegen_ops import benchmark
from fusegen_ops.masked_softmax import masked_softmax


def eager(x, mask):
    return torch.softmax(x.masked_fill(~mask, float("-inf")), -1).nan_to_num(0.0)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", default="16384x4096,4096x16384")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    copy = benchmark.copy_bandwidth("cuda")
    impls = {"fusegen": masked_softmax, "torch.compile": torch.compile(eager), "eager": eager}
    rows_out = []
    for shape in args.shapes.split(","):
        rows, D = (int(v) for v in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(rows, D, device="cuda", dtype=torch.bfloat16, generator=g)
        mask = torch.rand(rows, D, device="cuda", generator=g) < 0.5
        xg = x.clone().requires_grad_(True)
        want = eager(x.float(), mask)
        for name, fn in impls.items():
            err = float((fn(x, mask).float() - want).abs().max())  # a sanity check, not a test
            gy = torch.randn_like(x)

            def step():
                torch.autograd.grad(fn(xg, mask), [xg], gy)
            fwd = benchmark._time(lambda: fn(x, mask))
            both = benchmark._time(step)
            n = rows * D
            r = {"impl": name, "shape": shape, "fwd_ms": fwd, "fwd_bwd_ms": both,
                 "fwd_GBps": 5 * n / fwd / 1e6, "fwd_bwd_GBps": 12 * n / both / 1e6,
                 "max_abs_err_vs_fp32": err}
            r["fwd_copy_pct"] = 100 * r["fwd_GBps"] / copy
            r["fwd_bwd_copy_pct"] = 100 * r["fwd_bwd_GBps"] / copy
            rows_out.append(r)
            print(f"{shape:>11} {name:14} fwd {fwd:7.3f} ms {r['fwd_copy_pct']:5.1f}%  "
                  f"f+b {both:7.3f} ms {r['fwd_bwd_copy_pct']:5.1f}%  err {err:.2e}", flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "glue": benchmark.glue(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "copy_GBps": copy, "dtype": "bfloat16"}
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"meta": meta, "results": rows_out}, f, indent=1)
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(f"# masked_softmax, {meta['gpu']}, torch {meta['torch']}, {meta['date']}\n\n"
                f"bf16 scores, bool mask keeping half of each row; copy {copy:.0f} GB/s. % of copy "
                "by the minimum bytes (forward: x and the mask read, y written, 5 bytes per "
                "element; forward+backward: 12).\n\n"
                "| shape | impl | fwd ms | fwd % copy | fwd+bwd ms | fwd+bwd % copy |\n"
                "|---|---|---:|---:|---:|---:|\n")
        for r in rows_out:
            f.write(f"| {r['shape']} | {r['impl']} | {r['fwd_ms']:.3f} | {r['fwd_copy_pct']:.1f} | "
                    f"{r['fwd_bwd_ms']:.3f} | {r['fwd_bwd_copy_pct']:.1f} |\n")


if __name__ == "__main__":
    main()
