"""Linear cross-entropy (the chunked plan over an output projection, issue #16) side by side
on the GPU: fusegen's cross_entropy.linear_cross_entropy, Liger-Kernel's
LigerFusedLinearCrossEntropyFunction, and the plain PyTorch chain (x @ W.T, then
F.cross_entropy), eager and under torch.compile. bf16 hidden states [rows, H], weight [V, H],
int64 targets (a tenth ignore_index), the loss the mean over non-ignored rows; forward+backward
time and peak memory beyond the inputs (and the gradients, which every implementation
writes). Writes bench.json and bench.md to --out.

    python3 bench/linear_cross_entropy.py --out bench/results/DIR [--shape 8192x4096x128256]
"""
import argparse
import datetime
import json
import os

import torch
import torch.nn.functional as F

from fusegen_ops import benchmark
from fusegen_ops.cross_entropy import linear_cross_entropy


def impls(chunks):
    def fusegen(rows_per_chunk):
        return lambda x, w, t: linear_cross_entropy(x, w, t, normalizer=(t != -100).sum(),
                                                    rows_per_chunk=rows_per_chunk)

    def plain(x, w, t):
        return F.cross_entropy((x @ w.t()).float(), t)

    out = {"fusegen": fusegen(None)}
    for c in chunks:  # other chunk sizes than the plan's
        out[f"fusegen chunk {c}"] = fusegen(c)
    try:
        from liger_kernel.ops.fused_linear_cross_entropy import \
            LigerFusedLinearCrossEntropyFunction
        out["liger"] = lambda x, w, t: LigerFusedLinearCrossEntropyFunction.apply(x, w, t)[0]
    except ImportError as e:
        print(f"bench/linear_cross_entropy.py: Liger-Kernel not available ({e})")
    out["torch.compile"] = torch.compile(plain)
    out["eager"] = plain
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--shape", default="8192x4096x128256")
    p.add_argument("--chunks", default="", help="also time fusegen with these rows per chunk")
    args = p.parse_args()
    rows, H, V = (int(v) for v in args.shape.split("x"))
    os.makedirs(args.out, exist_ok=True)
    g = torch.Generator(device="cuda").manual_seed(0)
    x = (torch.randn(rows, H, device="cuda", generator=g) / H**0.5).to(torch.bfloat16)
    w = torch.randn(V, H, device="cuda", generator=g).to(torch.bfloat16)
    t = torch.randint(0, V, (rows,), device="cuda", generator=g)
    t[torch.rand(rows, device="cuda", generator=g) < 0.1] = -100
    want = None
    results = []
    for name, fn in impls([int(c) for c in args.chunks.split(",") if c]).items():
        xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)

        def step():
            fn(xg, wg, t).backward()
        loss = fn(xg, wg, t)
        want = float(loss.detach()) if want is None else want
        ms = benchmark._time(step, grad_to_none=[xg, wg])
        step()  # the gradients exist before the peak is measured: every impl writes them
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
        xg.grad = wg.grad = None
        r = {"impl": name, "shape": args.shape, "fwd_bwd_ms": ms, "peak_MiB": peak,
             "loss": float(loss.detach()), "loss_vs_fusegen": float(loss.detach()) - want}
        results.append(r)
        print(f"{args.shape} {name:20} f+b {ms:8.3f} ms  peak {peak:9.1f} MiB  loss "
              f"{float(loss.detach()):.6f}",
              flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "glue": benchmark.glue(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(f"# linear cross-entropy, {meta['gpu']}, torch {meta['torch']}, {meta['date']}\n\n"
                f"bf16 hidden [{rows}, {H}], weight [{V}, {H}], int64 targets (10% ignore_index), "
                "mean over non-ignored rows. Peak: memory beyond the inputs and the gradients "
                "during one forward+backward.\n\n| impl | fwd+bwd ms | peak MiB | loss |\n"
                "|---|---:|---:|---:|\n")
        for r in results:
            f.write(f"| {r['impl']} | {r['fwd_bwd_ms']:.2f} | {r['peak_MiB']:.0f} | "
                    f"{r['loss']:.6f} |\n")


if __name__ == "__main__":
    main()
