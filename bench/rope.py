"""RoPE side by side on the GPU (issue #17): fusegen's rope (x [..., S, H, D] by cos and sin
[S, D], called once for q and once for k) against Liger-Kernel's LigerRopeFunction (q and k in
one call), torch.compile of transformers' apply_rotary_pos_emb (q and k in one compiled
function) and eager PyTorch, bf16, forward and forward+backward (gradients of q and k; the
tables need none), with the device-to-device copy bandwidth of the same run.

q and k are laid out [B, S, H, D] in memory, as a projection writes them; Liger and the
transformers formula take them as [B, H, S, D] views (transpose(1, 2), no copy: Liger
transposes back before its kernel). Bandwidth counts the minimum bytes: the forward reads q
and k and writes both (the tables are read once: 2 x S x D x 2 bytes each); the backward reads
the output gradients and writes the input gradients. Every implementation is timed once per
round, --rounds rounds (the medians reported, the rounds' range beside them). Writes bench.json
and bench.md to --out.

    python3 bench/rope.py --out bench/results/DIR [--shapes 8x4096x32x8x128]
        [--baseline PKG]   # also the rope of another fusegen package (an A/B in one run)
        [--no-peers]       # fusegen alone (no Liger, compile, eager)
        [--rounds 3]
"""
import argparse
import datetime
import importlib
import json
import os

import torch

from fusegen_ops import benchmark
from fusegen_ops.rope import rope

import timing


def rotate_half(x):  # transformers' modeling_llama.rotate_half
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):  # transformers' formula
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def fusegen_qk(op):
    def qk(q, k, cos, sin):
        """q, k as [B, H, S, D] views of [B, S, H, D] memory; cos, sin [1, S, D]."""
        c, s = cos[0], sin[0]
        return op(q.transpose(1, 2), c, s).transpose(1, 2), op(k.transpose(1, 2), c, s).transpose(1, 2)
    return qk


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", default="8x4096x32x8x128",
                   help="B x S x query heads x key heads x head dim, comma-separated")
    p.add_argument("--baseline", default=None,
                   help="a fusegen package (--package) with rope built from other sources: its "
                        "op runs beside this one as 'fusegen (PKG)'")
    p.add_argument("--no-peers", action="store_true", help="fusegen alone (and eager)")
    timing.add_rounds_argument(p)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    copy = benchmark.copy_bandwidth("cuda")
    impls = {"fusegen": fusegen_qk(rope)}
    if args.baseline:
        impls[f"fusegen ({args.baseline})"] = fusegen_qk(
            importlib.import_module(args.baseline + ".rope").rope)
    if not args.no_peers:
        impls["torch.compile"] = torch.compile(apply_rotary_pos_emb)
    impls["eager"] = apply_rotary_pos_emb
    try:
        if not args.no_peers:
            from liger_kernel.ops.rope import LigerRopeFunction
            impls["liger"] = lambda q, k, cos, sin: LigerRopeFunction.apply(q, k, cos, sin)
    except ImportError as e:
        print(f"liger-kernel not importable ({e}); left out", flush=True)
    rows_out = []
    for shape in args.shapes.split(","):
        B, S, HQ, HK, D = (int(v) for v in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)

        def qk(grad=False):
            q = torch.randn(B, S, HQ, D, device="cuda", dtype=torch.bfloat16, generator=g)
            k = torch.randn(B, S, HK, D, device="cuda", dtype=torch.bfloat16, generator=g)
            return (q.requires_grad_(grad).transpose(1, 2), k.requires_grad_(grad).transpose(1, 2))
        angle = torch.arange(S, device="cuda")[:, None] * torch.rand(D // 2, device="cuda")
        angle = torch.cat([angle, angle], -1)[None]
        cos, sin = angle.cos().bfloat16(), angle.sin().bfloat16()
        q0, k0 = qk()
        want = apply_rotary_pos_emb(q0.float(), k0.float(), cos.float(), sin.float())
        timed = {}
        for name, fn in impls.items():
            q, k = (t.clone() for t in (q0, k0))  # (Liger rotates its arguments in place)
            try:
                got = fn(q.transpose(1, 2).contiguous().transpose(1, 2),
                         k.transpose(1, 2).contiguous().transpose(1, 2), cos, sin)
            except Exception as e:  # a peer's limit (a head dim it refuses): noted, not fatal
                print(f"{shape:>18} {name:14} refused: {type(e).__name__}: {str(e)[:160]}",
                      flush=True)
                continue
            err = max(float((a.float() - b).abs().max()) for a, b in zip(got, want))
            qg, kg = qk(grad=True)
            gq, gk = torch.randn_like(q0), torch.randn_like(k0)

            def step(fn=fn, qg=qg, kg=kg, gq=gq, gk=gk):
                out = fn(qg, kg, cos, sin)
                torch.autograd.grad(out, [qg, kg], [gq, gk])
            timed[name] = (lambda fn=fn, q=q, k=k: fn(q, k, cos, sin), step, err)
        times = timing.in_rounds({name: {"fwd": f, "fwd_bwd": st}
                                  for name, (f, st, _err) in timed.items()}, args.rounds)
        for name, (_fwd_fn, _step, err) in timed.items():
            fwds, boths = times[name]["fwd"], times[name]["fwd_bwd"]
            fwd, both = timing.median(fwds), timing.median(boths)
            n = (B * S * (HQ + HK) * D) * 2  # bytes of q and k
            tables = 2 * S * D * 2
            r = {"impl": name, "shape": shape, "fwd_ms": fwd, "fwd_bwd_ms": both,
                 "fwd_ms_rounds": fwds, "fwd_bwd_ms_rounds": boths,
                 "fwd_GBps": (2 * n + tables) / fwd / 1e6,
                 "fwd_bwd_GBps": (4 * n + 2 * tables) / both / 1e6, "max_abs_err_vs_fp32": err}
            r["fwd_copy_pct"] = 100 * r["fwd_GBps"] / copy
            r["fwd_bwd_copy_pct"] = 100 * r["fwd_bwd_GBps"] / copy
            rows_out.append(r)
            print(f"{shape:>18} {name:14} fwd {fwd:7.3f} ms {r['fwd_copy_pct']:5.1f}% "
                  f"({timing.spread(fwds)})  f+b {both:7.3f} ms {r['fwd_bwd_copy_pct']:5.1f}% "
                  f"({timing.spread(boths)})  err {err:.2e}", flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "glue": benchmark.glue(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "copy_GBps": copy, "dtype": "bfloat16"}
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"meta": meta, "results": rows_out}, f, indent=1)
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(f"# rope, {meta['gpu']}, torch {meta['torch']}, {meta['date']}\n\n"
                f"bf16 q and k [B, S, H, D] (shape B x S x query heads x key heads x head dim), "
                f"cos and sin [S, D]; copy {copy:.0f} GB/s. % of copy by the minimum bytes "
                "(forward: q and k read and written, the tables read; forward+backward: twice "
                "that). fusegen calls its op once for q and once for k. "
                f"{timing.rounds_note(args.rounds)}\n\n"
                "| shape | impl | fwd ms | fwd % copy | fwd+bwd ms | fwd+bwd % copy |\n"
                "|---|---|---:|---:|---:|---:|\n")
        for r in rows_out:
            f.write(f"| {r['shape']} | {r['impl']} | "
                    f"{timing.cell(r['fwd_ms'], r['fwd_ms_rounds'])} | {r['fwd_copy_pct']:.1f} | "
                    f"{timing.cell(r['fwd_bwd_ms'], r['fwd_bwd_ms_rounds'])} | "
                    f"{r['fwd_bwd_copy_pct']:.1f} |\n")


if __name__ == "__main__":
    main()
