"""Benchmarks every installed fusegen op on the GPU: fusegen's kernel, the generated eager
reference, torch.compile of the reference, the spec's PyTorch built-in formula (F.rms_norm,
F.layer_norm, F.gelu, torch.softmax, ...) and Liger-Kernel where it has the op (when
liger_kernel is importable), forward and forward+backward, with peak memory, plus the
device-to-device copy bandwidth of the same run. Writes bench.json, bench.md and bench.png.

    python3 bench/run.py --out bench/results/latest [--dtype bfloat16] [--ops bias_gelu,...]
    python3 bench/run.py --merge RUN1 RUN2 ... --out DIR    (combine runs, no GPU needed)
"""
import argparse
import datetime
import importlib
import json
import os
import sys

import torch

import fusegen_ops
from fusegen_ops import benchmark


def liger_impls():
    """Liger-Kernel's autograd functions for the ops it has, called like fusegen's ops."""
    try:
        from liger_kernel.ops.geglu import LigerGELUMulFunction
        from liger_kernel.ops.layer_norm import LigerLayerNormFunction
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction
    except ImportError as e:
        print(f"bench/run.py: Liger-Kernel not available ({e}); timing without it")
        return {}
    return {
        "rmsnorm": lambda x, w, eps: LigerRMSNormFunction.apply(x, w, eps, 0.0, "llama", False),
        "rmsnorm_gemma": lambda x, w, eps: LigerRMSNormFunction.apply(x, w, eps, 1.0, "gemma",
                                                                      False),
        "layernorm": lambda x, w, b, eps: LigerLayerNormFunction.apply(x, w, b, eps),
        "softmax": lambda x: LigerSoftmaxFunction.apply(x),
        "swiglu": lambda gate, up: LigerSiLUMulFunction.apply(gate, up),
        "geglu": lambda gate, up: LigerGELUMulFunction.apply(gate, up),
    }


def plot(results, path, copy_gbps):
    """Forward and forward+backward bandwidth against size, one panel per op and direction."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ops = sorted({r["op"] for r in results})
    # One color per implementation in every panel (the legend is drawn once).
    colors = {impl: f"C{i}" for i, impl in enumerate(sorted({r["impl"] for r in results}))}
    fig, axes = plt.subplots(len(ops), 2, figsize=(10, 2.6 * len(ops)), squeeze=False)
    for row, op in enumerate(ops):
        for col, key in enumerate(["fwd_GBps", "fwd_bwd_GBps"]):
            ax = axes[row][col]
            for impl in sorted({r["impl"] for r in results if r["op"] == op}):
                pts = sorted((r["rows"] * r["D"], r[key]) for r in results
                             if r["op"] == op and r["impl"] == impl and r[key] is not None)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=impl,
                            color=colors[impl])
            ax.axhline(copy_gbps, color="gray", linestyle="--", linewidth=0.8)
            if ax.lines[:-1]:  # (an op without gradient has no forward+backward points)
                ax.set_xscale("log")
            ax.set_title(f"{op} {'forward' if col == 0 else 'forward+backward'}", fontsize=9)
            ax.set_ylabel("GB/s")
    axes[-1][0].set_xlabel("elements")
    axes[-1][1].set_xlabel("elements")
    from matplotlib.lines import Line2D
    fig.legend(handles=[Line2D([], [], color=c, marker="o", label=i) for i, c in colors.items()],
               loc="upper center", ncol=len(colors), fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / len(ops)))
    fig.savefig(path, dpi=80)


def write_outputs(results, meta, out):
    """bench.json, bench.md (one row per op, shape and implementation) and bench.png."""
    dtype = results[0]["dtype"].replace("torch.", "")
    with open(os.path.join(out, "bench.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    lines = [f"# fusegen benchmark: {meta['gpu']}, torch {meta['torch']}, {meta['date']}", "",
             f"dtype {dtype}; device-to-device copy: {meta['copy_GBps']:.0f} GB/s "
             "(read + write). Median times, L2 flushed; GB/s from the minimum bytes moved.", ""]
    if meta.get("note"):
        lines += [meta["note"], ""]
    lines += ["| op | shape | impl | fwd ms | fwd GB/s | % copy | fwd+bwd ms | fwd+bwd GB/s | % copy "
              "| peak MiB |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        backward = ("- | - | - | - (no gradient) |" if r["fwd_bwd_ms"] is None else
                    f"{r['fwd_bwd_ms']:.4f} | {r['fwd_bwd_GBps']:.0f} | "
                    f"{100 * r['fwd_bwd_GBps'] / meta['copy_GBps']:.0f} | "
                    f"{r['fwd_bwd_peak_MiB']:.0f} |")
        lines.append(f"| {r['op']} | {r['rows']}x{r['D']} | {r['impl']} | {r['fwd_ms']:.4f} | "
                     f"{r['fwd_GBps']:.0f} | {100 * r['fwd_GBps'] / meta['copy_GBps']:.0f} | "
                     + backward)
    with open(os.path.join(out, "bench.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    plot(results, os.path.join(out, "bench.png"), meta["copy_GBps"])


def merge(dirs, out, note):
    """Combines the bench.json of several runs (of one GPU and torch) into one set of
    outputs; a later run's row replaces an earlier one's for the same op, shape and impl."""
    rows, metas = {}, []
    for d in dirs:
        with open(os.path.join(d, "bench.json")) as f:
            data = json.load(f)
        metas.append(data["meta"])
        for r in data["results"]:
            rows[(r["op"], r["rows"], r["D"], r["impl"])] = r
    if len({(m["gpu"], m["torch"]) for m in metas}) != 1:
        sys.exit("bench/run.py --merge: the runs are from different GPUs or torch versions")
    meta = dict(metas[-1])
    meta["copy_GBps"] = min(m["copy_GBps"] for m in metas)
    dates = sorted(d for m in metas for d in m["date"].split(" to "))  # runs may be merges
    meta["date"] = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    meta["merged_from"] = list(dirs)
    meta["note"] = note
    os.makedirs(out, exist_ok=True)
    order = ["fusegen", "eager", "torch.compile", "pytorch", "liger"]
    results = sorted(rows.values(), key=lambda r: (r["op"], r["rows"] * r["D"], r["rows"],
                                                   order.index(r["impl"]) if r["impl"] in order
                                                   else len(order)))
    write_outputs(results, meta, out)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True, help="directory for bench.json and bench.md")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--ops", default=",".join(fusegen_ops.OPS))
    p.add_argument("--shapes", default="512x4096,32768x4096,16384x8192")
    p.add_argument("--merge", nargs="+", metavar="DIR",
                   help="no timing: combine these runs' bench.json into --out")
    p.add_argument("--note", default="", help="with --merge: a line for bench.md")
    args = p.parse_args()
    if args.merge:
        return merge(args.merge, args.out, args.note)
    if not torch.cuda.is_available():
        sys.exit("bench/run.py: no CUDA device")
    os.makedirs(args.out, exist_ok=True)
    entries = [importlib.import_module(f"fusegen_ops.{op}.bench_{op}").ENTRY
               for op in args.ops.split(",")]
    liger = liger_impls()
    extra = {op: {"liger": fn} for op, fn in liger.items()}
    results = benchmark.main(entries, ["--dtype", args.dtype, "--shapes", args.shapes,
                                       "--json", os.path.join(args.out, "bench.json")], extra)
    with open(os.path.join(args.out, "bench.json")) as f:
        meta = json.load(f)["meta"]
    meta["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    write_outputs(results, meta, args.out)


if __name__ == "__main__":
    main()
