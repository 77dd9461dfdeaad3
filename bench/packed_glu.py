"""Packed GLUs side by side on the GPU (issue #17): fusegen's swiglu_packed and geglu_packed
(one [..., 2*D] input, gate then up) against Liger-Kernel's LigerSiLUMulFunction and
LigerGELUMulFunction (two [..., D] tensors: the layout it is written for, separate gate and up
projections), torch.compile and eager PyTorch of the same formula over the chunks of the
packed tensor, bf16, forward and forward+backward (the gradient of the packed input, or of gate
and up), with the device-to-device copy bandwidth of the same run. Bandwidth counts the minimum
bytes: the forward reads 2 x D and writes D per row; the backward reads the packed input and
the output gradient and writes the packed gradient (5 x D). Writes bench.json and bench.md.

    python3 bench/packed_glu.py --out bench/results/DIR [--shapes 16384x14336]
"""
import argparse
import datetime
import json
import os

import torch
import torch.nn.functional as F

from fusegen_ops import benchmark
from fusegen_ops.geglu_packed import geglu_packed
from fusegen_ops.swiglu_packed import swiglu_packed


def swiglu_eager(gu):
    a, b = gu.chunk(2, -1)
    return F.silu(a) * b


def geglu_eager(gu):
    a, b = gu.chunk(2, -1)
    return F.gelu(a, approximate="tanh") * b


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--shapes", default="16384x14336")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    copy = benchmark.copy_bandwidth("cuda")
    ops = {"swiglu_packed": {"fusegen": swiglu_packed, "torch.compile": torch.compile(swiglu_eager),
                             "eager": swiglu_eager},
           "geglu_packed": {"fusegen": geglu_packed, "torch.compile": torch.compile(geglu_eager),
                            "eager": geglu_eager}}
    try:
        from liger_kernel.ops.geglu import LigerGELUMulFunction
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction
        liger = {"swiglu_packed": LigerSiLUMulFunction, "geglu_packed": LigerGELUMulFunction}
    except ImportError as e:
        print(f"liger-kernel not importable ({e}); left out", flush=True)
        liger = {}
    rows_out = []
    for shape in args.shapes.split(","):
        rows, D = (int(v) for v in shape.split("x"))
        g = torch.Generator(device="cuda").manual_seed(0)
        gu = torch.randn(rows, 2 * D, device="cuda", dtype=torch.bfloat16, generator=g)
        gy = torch.randn(rows, D, device="cuda", dtype=torch.bfloat16, generator=g)
        for op, impls in ops.items():
            want = impls["eager"](gu.float())
            timed = dict(impls)
            if op in liger:  # separate gate and up tensors: Liger's layout
                a, b = (t.contiguous() for t in gu.chunk(2, -1))
                timed["liger"] = lambda gu, a=a, b=b, f=liger[op]: f.apply(a, b)
            for name, fn in timed.items():
                err = float((fn(gu).float() - want).abs().max())  # a sanity check
                if name == "liger":
                    ag, bg = (t.clone().requires_grad_(True) for t in gu.chunk(2, -1))
                    leaves = [ag, bg]

                    def step():
                        torch.autograd.grad(liger[op].apply(ag, bg), leaves, gy)
                else:
                    gug = gu.clone().requires_grad_(True)

                    def step():
                        torch.autograd.grad(fn(gug), [gug], gy)
                fwd = benchmark._time(lambda: fn(gu))
                both = benchmark._time(step)
                n = rows * D * 2
                r = {"op": op, "impl": name, "shape": shape, "fwd_ms": fwd, "fwd_bwd_ms": both,
                     "fwd_GBps": 3 * n / fwd / 1e6, "fwd_bwd_GBps": 8 * n / both / 1e6,
                     "max_abs_err_vs_fp32": err}
                r["fwd_copy_pct"] = 100 * r["fwd_GBps"] / copy
                r["fwd_bwd_copy_pct"] = 100 * r["fwd_bwd_GBps"] / copy
                rows_out.append(r)
                print(f"{op:14} {shape:>12} {name:14} fwd {fwd:7.3f} ms {r['fwd_copy_pct']:5.1f}%  "
                      f"f+b {both:7.3f} ms {r['fwd_bwd_copy_pct']:5.1f}%  err {err:.2e}", flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "glue": benchmark.glue(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "copy_GBps": copy, "dtype": "bfloat16"}
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"meta": meta, "results": rows_out}, f, indent=1)
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write(f"# packed GLUs, {meta['gpu']}, torch {meta['torch']}, {meta['date']}\n\n"
                f"bf16 packed input [rows, 2 x D] (shape rows x D); Liger on separate gate and up "
                f"tensors; copy {copy:.0f} GB/s. % of copy by the minimum bytes (forward: 3 x D "
                "per row; forward+backward: 8 x D).\n\n"
                "| op | shape | impl | fwd ms | fwd % copy | fwd+bwd ms | fwd+bwd % copy |\n"
                "|---|---|---|---:|---:|---:|---:|\n")
        for r in rows_out:
            f.write(f"| {r['op']} | {r['shape']} | {r['impl']} | {r['fwd_ms']:.3f} | "
                    f"{r['fwd_copy_pct']:.1f} | {r['fwd_bwd_ms']:.3f} | "
                    f"{r['fwd_bwd_copy_pct']:.1f} |\n")


if __name__ == "__main__":
    main()
