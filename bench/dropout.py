"""Fused dropouts side by side on the GPU (issue #16): fusegen's bias_dropout_add and
dropout_add_rmsnorm against eager PyTorch (F.dropout, then the add and F.rms_norm) and
torch.compile of the same eager code, bf16, p = 0.1, forward and forward+backward, with the
peak memory of forward+backward and the device-to-device copy bandwidth of the same run.
Bandwidth counts the minimum bytes: forward reads x (x0) and the residual and writes the
output(s); the backward reads the output gradient(s) and writes the input gradients (the
weight's and bias's [D] sums are negligible) but not the residual's of bias_dropout_add, which
is the output's gradient itself; dropout_add_rmsnorm's backward reads the new residual.
Forward+backward is the forward and torch.autograd.grad of every input (all implementations
alike: no .grad accumulation). Writes bench.json and bench.md to --out.

    python3 bench/dropout.py --out bench/results/DIR [--shapes 16384x4096,8192x8192]
"""
import argparse
import datetime
import json
import os

import torch
import torch.nn.functional as F

from fusegen_ops import benchmark
from fusegen_ops.bias_dropout_add import bias_dropout_add
from fusegen_ops.dropout_add_rmsnorm import dropout_add_rmsnorm

P = 0.1


def eager_bda(x, bias, residual):
    return residual + F.dropout(x + bias, P, training=True)


def eager_darms(x0, residual, weight):
    h = F.dropout(x0, P, training=True) + residual
    return F.rms_norm(h, (h.shape[-1],), weight, 1e-6), h


CASES = {
    # name: (impls, inputs, full tensors read and written at least, forward / backward)
    "bias_dropout_add": ({"fusegen": lambda x, b, r: bias_dropout_add(x, b, r, p=P),
                          "torch.compile": torch.compile(eager_bda), "eager": eager_bda},
                         ["x", "bias", "residual"], (3, 2)),
    "dropout_add_rmsnorm": ({"fusegen": lambda x, r, w: dropout_add_rmsnorm(x, r, w, p=P),
                             "torch.compile": torch.compile(eager_darms), "eager": eager_darms},
                            ["x0", "residual", "weight"], (4, 5)),
}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", default="16384x4096,8192x8192")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    copy = benchmark.copy_bandwidth("cuda")
    rows_out = []
    for case, (impls, names, (fwd_full, bwd_full)) in CASES.items():
        for shape in args.shapes.split(","):
            rows, D = (int(v) for v in shape.split("x"))
            g = torch.Generator(device="cuda").manual_seed(0)
            xs = [torch.randn((D,) if n in ("bias", "weight") else (rows, D), device="cuda",
                              dtype=torch.bfloat16, generator=g) for n in names]
            leaves = [t.clone().requires_grad_(True) for t in xs]
            for name, fn in impls.items():
                out = fn(*xs)
                outs = out if isinstance(out, tuple) else (out,)
                gouts = [torch.randn_like(o) for o in outs]

                def step():  # (grad, not backward: no AccumulateGrad copy of a passed-on
                    o = fn(*leaves)  # gradient, such as the residual's, into .grad)
                    torch.autograd.grad(o if isinstance(o, tuple) else (o,), leaves, gouts)
                fwd = benchmark._time(lambda: fn(*xs))
                both = benchmark._time(step, grad_to_none=leaves)
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                step()
                torch.cuda.synchronize()
                peak = (torch.cuda.max_memory_allocated() - base) / 2**20
                for t in leaves:
                    t.grad = None
                full = rows * D * 2
                r = {"op": case, "impl": name, "shape": shape, "fwd_ms": fwd, "fwd_bwd_ms": both,
                     "fwd_GBps": fwd_full * full / fwd / 1e6,
                     "fwd_bwd_GBps": (fwd_full + bwd_full) * full / both / 1e6,
                     "peak_MiB": peak}
                r["fwd_copy_pct"] = 100 * r["fwd_GBps"] / copy
                r["fwd_bwd_copy_pct"] = 100 * r["fwd_bwd_GBps"] / copy
                rows_out.append(r)
                print(f"{case:20} {shape:>11} {name:14} fwd {fwd:7.3f} ms {r['fwd_copy_pct']:5.1f}%"
                      f"  f+b {both:7.3f} ms {r['fwd_bwd_copy_pct']:5.1f}%  peak {peak:8.1f} MiB",
                      flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "glue": benchmark.glue(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "copy_GBps": copy, "dtype": "bfloat16", "p": P}
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"meta": meta, "results": rows_out}, f, indent=1)
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(f"# fused dropouts, {meta['gpu']}, torch {meta['torch']}, {meta['date']}\n\n"
                f"bf16, p = {P}; copy {copy:.0f} GB/s. % of copy by the minimum bytes "
                "(bias_dropout_add: 3 full tensors forward, 2 more backward; "
                "dropout_add_rmsnorm: 4 forward, 5 more backward). Peak: memory allocated "
                "during forward+backward above what was allocated before it.\n\n"
                "| op | shape | impl | fwd ms | fwd % copy | fwd+bwd ms | fwd+bwd % copy | "
                "peak MiB |\n|---|---|---|---:|---:|---:|---:|---:|\n")
        for r in rows_out:
            f.write(f"| {r['op']} | {r['shape']} | {r['impl']} | {r['fwd_ms']:.3f} | "
                    f"{r['fwd_copy_pct']:.1f} | {r['fwd_bwd_ms']:.3f} | "
                    f"{r['fwd_bwd_copy_pct']:.1f} | {r['peak_MiB']:.0f} |\n")


if __name__ == "__main__":
    main()
