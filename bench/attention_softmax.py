"""Attention-score softmaxes side by side on the GPU (issue #17), as Megatron-LM's fused
kernels compute them: fusegen's scaled_masked_softmax (scores [B, H, S, D] times a scale plus
an additive [S, D] mask shared by batch and heads) and causal_softmax (query s sees keys
j <= s, no mask tensor) against eager PyTorch and torch.compile of the same formulas, bf16,
forward and forward+backward (the gradient of the scores), with the device-to-device copy
bandwidth of the same run. Bandwidth counts the minimum bytes: the forward reads the scores
and writes the probabilities (the mask, S x D, once); the backward reads the output gradient
and the probabilities (or the scores) and writes the scores' gradient. Writes bench.json and
bench.md to --out.

    python3 bench/attention_softmax.py --out bench/results/DIR [--shapes 8x32x2048x2048]
        [--baseline PKG]   # also the same ops from another fusegen package (an A/B in one run)
"""
import argparse
import datetime
import importlib
import json
import os

import torch

from fusegen_ops import benchmark
from fusegen_ops.causal_softmax import causal_softmax
from fusegen_ops.scaled_masked_softmax import scaled_masked_softmax

import timing

SCALE = 0.125


def masked_eager(x, mask):
    return torch.softmax(x * SCALE + mask, -1)


def causal_eager(x):
    hidden = torch.ones(x.shape[-2], x.shape[-1], dtype=torch.bool, device=x.device).triu(1)
    return torch.softmax((x * SCALE).masked_fill(hidden, float("-inf")), -1)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", default="8x32x2048x2048")
    p.add_argument("--plain", action="store_true", help="also fusegen's softmax, unmasked")
    p.add_argument("--baseline", default=None,
                   help="a fusegen package (--package) of the same specs built from other "
                        "sources: its ops run beside these as 'fusegen (PKG)'")
    p.add_argument("--no-peers", action="store_true", help="fusegen alone (no compile, eager)")
    timing.add_rounds_argument(p)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    copy = benchmark.copy_bandwidth("cuda")
    ops = {
        "scaled_masked_softmax": {
            "fusegen": lambda x, m: scaled_masked_softmax(x, m, scale=SCALE),
            "torch.compile": torch.compile(masked_eager), "eager": masked_eager},
        "causal_softmax": {
            "fusegen": lambda x, m: causal_softmax(x, scale=SCALE),
            "torch.compile": torch.compile(lambda x, m: causal_eager(x)),
            "eager": lambda x, m: causal_eager(x)},
    }
    if args.baseline:
        base_masked = importlib.import_module(
            args.baseline + ".scaled_masked_softmax").scaled_masked_softmax
        base_causal = importlib.import_module(args.baseline + ".causal_softmax").causal_softmax
        ops["scaled_masked_softmax"][f"fusegen ({args.baseline})"] = \
            lambda x, m: base_masked(x, m, scale=SCALE)
        ops["causal_softmax"][f"fusegen ({args.baseline})"] = \
            lambda x, m: base_causal(x, scale=SCALE)
    if args.no_peers:
        for impls in ops.values():
            impls.pop("torch.compile", None)
    if args.plain:  # the same rows without mask or scale: what the row plan does unmasked
        from fusegen_ops.softmax import softmax
        ops["softmax (no mask, for comparison)"] = {
            "fusegen": lambda x, m: softmax(x), "eager": lambda x, m: torch.softmax(x, -1)}
    rows_out = []
    for shape in args.shapes.split(","):
        B, H, S, D = (int(v) for v in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, generator=g)
        mask = torch.where(torch.rand(S, D, device="cuda", generator=g) < 0.2, -10000.0,
                           0.0).bfloat16()
        xg = x.clone().requires_grad_(True)
        gy = torch.randn_like(x)
        for op, impls in ops.items():
            want = impls["eager"](x.float(), mask.float())
            timed, errs = {}, {}
            for name, fn in impls.items():
                errs[name] = float((fn(x, mask).float() - want).abs().max())  # a sanity check

                def step(fn=fn):
                    torch.autograd.grad(fn(xg, mask), [xg], gy)
                timed[name] = {"fwd": lambda fn=fn: fn(x, mask), "fwd_bwd": step}
            times = timing.in_rounds(timed, args.rounds)
            for name in impls:
                fwds, boths = times[name]["fwd"], times[name]["fwd_bwd"]
                fwd, both, err = timing.median(fwds), timing.median(boths), errs[name]
                n = x.numel() * 2
                r = {"op": op, "impl": name, "shape": shape, "fwd_ms": fwd, "fwd_bwd_ms": both,
                     "fwd_ms_rounds": fwds, "fwd_bwd_ms_rounds": boths,
                     "fwd_GBps": 2 * n / fwd / 1e6, "fwd_bwd_GBps": 5 * n / both / 1e6,
                     "max_abs_err_vs_fp32": err}
                r["fwd_copy_pct"] = 100 * r["fwd_GBps"] / copy
                r["fwd_bwd_copy_pct"] = 100 * r["fwd_bwd_GBps"] / copy
                rows_out.append(r)
                print(f"{op:22} {shape:>15} {name:14} fwd {fwd:7.3f} ms "
                      f"{r['fwd_copy_pct']:5.1f}% ({timing.spread(fwds)})  f+b {both:7.3f} ms "
                      f"{r['fwd_bwd_copy_pct']:5.1f}% ({timing.spread(boths)})  err {err:.2e}",
                      flush=True)
            del want
            torch.cuda.empty_cache()
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "glue": benchmark.glue(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "copy_GBps": copy, "dtype": "bfloat16", "scale": SCALE}
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"meta": meta, "results": rows_out}, f, indent=1)
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(f"# attention softmaxes, {meta['gpu']}, torch {meta['torch']}, {meta['date']}\n\n"
                f"bf16 scores [B, H, S, D], scale {SCALE}, an additive [S, D] mask (-10000 at "
                f"a fifth of the keys) or the causal mask; copy {copy:.0f} GB/s. % of copy by "
                "the minimum bytes (forward: scores read, probabilities written; "
                f"forward+backward: 5 x the scores' bytes). {timing.rounds_note(args.rounds)}\n\n"
                "| op | shape | impl | fwd ms | fwd % copy | fwd+bwd ms | fwd+bwd % copy |\n"
                "|---|---|---|---:|---:|---:|---:|\n")
        for r in rows_out:
            f.write(f"| {r['op']} | {r['shape']} | {r['impl']} | "
                    f"{timing.cell(r['fwd_ms'], r['fwd_ms_rounds'])} | {r['fwd_copy_pct']:.1f} | "
                    f"{timing.cell(r['fwd_bwd_ms'], r['fwd_bwd_ms_rounds'])} | "
                    f"{r['fwd_bwd_copy_pct']:.1f} |\n")


if __name__ == "__main__":
    main()
