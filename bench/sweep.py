"""The shape sweep: every installed fusegen op over the row lengths users run, side by side with
Liger-Kernel, QuACK (where importable and where they have the op), torch.compile of the
reference (compiled for each shape) and eager, forward and forward+backward, as a share of the
device-to-device copy bandwidth of the same run. Writes DIR/sweep.json and DIR/sweep.png.

    python3 bench/sweep.py --out DIR [--ops rmsnorm,softmax] [--dtypes bfloat16,float32]
        [--Ds 64,128,...] [--totals 26,28] [--few-rows 16] [--impls fusegen,liger,...]
    python3 bench/sweep.py --merge DIR1 DIR2 ... --out DIR     (combine runs; no GPU needed)

Each D runs at 2^total elements per tensor (rows = 2^total / D, at least 1) and, with
--few-rows, at that many rows. sweep.json is {"meta": {"gpu", "torch", "date", "copy_GBps"},
"results": [{"op", "impl", "dtype", "rows", "D", "fwd_ms", "fwd_bwd_ms", "fwd_pct",
"fwd_bwd_pct", "peak_MiB"}]} and DIR/sweep.md its tables: pct is the share of copy bandwidth achieved on the minimum bytes
the op must move (fusegen_ops.benchmark.min_bytes); times are medians with the L2 flushed."""
import argparse
import datetime
import importlib
import json
import os
import sys

# Powers of two from 64 to 262144, and hidden and vocabulary sizes of common models.
DEFAULT_DS = [1 << k for k in range(6, 19)] + [2880, 5120, 13824, 151936]


def quack_impls():
    """QuACK's autograd functions for the ops it has, called like fusegen's ops."""
    try:
        from quack.rmsnorm import rmsnorm
        from quack.softmax import softmax
    except ImportError as e:
        print(f"bench/sweep.py: QuACK not available ({e}); timing without it")
        return {}
    return {
        "rmsnorm": lambda x, w, eps: rmsnorm(x, w, eps=eps),
        "rmsnorm_gemma": lambda x, w, eps: rmsnorm(x, w, eps=eps, weight_offset=1.0),
        "softmax": lambda x: softmax(x),
    }


def measure(args):
    import torch

    import fusegen_ops
    from fusegen_ops import benchmark

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run as bench_run  # bench/run.py: Liger's functions

    peers = {"liger": bench_run.liger_impls(), "quack": quack_impls()}
    copy = benchmark.copy_bandwidth("cuda")
    wanted = set(args.impls.split(","))
    results = []
    for name in args.ops.split(","):
        mod = importlib.import_module(f"fusegen_ops.{name}")
        entry = benchmark.Entry(mod.SPEC, getattr(mod, name), mod.reference)
        for dtype_name in args.dtypes.split(","):
            dtype = getattr(torch, dtype_name)
            elem = torch.empty((), dtype=dtype).element_size()
            for D in [int(d) for d in args.Ds.split(",")]:
                rows_list = [max(1, (1 << int(t)) // D) for t in args.totals.split(",")]
                rows_list += [int(r) for r in args.few_rows.split(",") if r]
                for rows in sorted(set(rows_list)):
                    impls = {"fusegen": entry.op, "eager": entry.reference}
                    # Compiled for this shape, as a user's model is once its shapes settle.
                    torch._dynamo.reset()
                    impls["torch.compile"] = torch.compile(entry.reference, dynamic=False)
                    for peer, table in peers.items():
                        if name in table:
                            impls[peer] = table[name]
                    for impl, fn in impls.items():
                        if impl not in wanted:
                            continue
                        try:
                            fwd, both, peak = benchmark.measure(mod.SPEC, fn, rows, D, dtype,
                                                                "cuda")
                        except Exception as e:  # a peer's limit (shape, dtype): recorded, not fatal
                            print(f"{name} {impl} {dtype_name} {rows}x{D}: {type(e).__name__}: "
                                  f"{str(e)[:200]}", flush=True)
                            continue
                        r = {"op": name, "impl": impl, "dtype": dtype_name, "rows": rows,
                             "D": D, "fwd_ms": fwd, "fwd_bwd_ms": both, "peak_MiB": peak}
                        r["fwd_pct"] = 100 * benchmark.min_bytes(
                            mod.SPEC, rows, D, elem, False) / r["fwd_ms"] / 1e6 / copy
                        r["fwd_bwd_pct"] = 100 * benchmark.min_bytes(
                            mod.SPEC, rows, D, elem, True) / r["fwd_bwd_ms"] / 1e6 / copy
                        results.append(r)
                        print(json.dumps(r), flush=True)
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "glue": benchmark.glue(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "copy_GBps": copy}
    return {"meta": meta, "results": results}


def merge(dirs):
    runs = [json.load(open(os.path.join(d, "sweep.json"))) for d in dirs]
    gpus = {r["meta"]["gpu"] for r in runs}
    if len(gpus) != 1:
        raise SystemExit(f"bench/sweep.py --merge: runs of different GPUs: {sorted(gpus)}")
    meta = dict(runs[0]["meta"])
    meta["copy_GBps"] = min(r["meta"]["copy_GBps"] for r in runs)
    meta["merged"] = [r["meta"] for r in runs]
    # pct stays as each run measured it, against its own copy bandwidth.
    return {"meta": meta, "results": [x for r in runs for x in r["results"]]}


def plot(sweep, path):
    """% of copy bandwidth against D, one panel per op, dtype, row count class and direction,
    one line per implementation."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    res = sweep["results"]
    panels = sorted({(r["op"], r["dtype"], "few" if r["rows"] * r["D"] < 1 << 24 else "many")
                     for r in res})
    fig, axes = plt.subplots(len(panels), 2, figsize=(11, 2.8 * len(panels)), squeeze=False)
    for row, (op, dtype, size) in enumerate(panels):
        pts = [r for r in res if r["op"] == op and r["dtype"] == dtype and
               ("few" if r["rows"] * r["D"] < 1 << 24 else "many") == size]
        for col, key in enumerate(["fwd_pct", "fwd_bwd_pct"]):
            ax = axes[row][col]
            for impl in sorted({r["impl"] for r in pts}):
                line = {}
                for r in pts:  # the largest total per D for "many"
                    if r["impl"] == impl and (r["D"] not in line or r["rows"] > line[r["D"]][0]):
                        line[r["D"]] = (r["rows"], r[key])
                xs = sorted(line)
                ax.plot(xs, [line[x][1] for x in xs], marker="o", markersize=3, label=impl)
            ax.set_xscale("log", base=2)
            ax.set_ylim(0, 105)
            ax.axhline(100, color="gray", linestyle="--", linewidth=0.8)
            ax.set_title(f"{op} {dtype} {'few rows' if size == 'few' else 'many rows'} "
                         f"{'forward' if col == 0 else 'forward+backward'}", fontsize=9)
            ax.set_xlabel("D")
            ax.set_ylabel("% of copy")
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def markdown(sweep):
    """One table per op, dtype and row class: fwd% / fwd+bwd% of copy per implementation and D
    (rows: the largest measured per D for "many rows", the fixed count for "few rows")."""
    res, meta = sweep["results"], sweep["meta"]
    impls = [i for i in ("fusegen", "quack", "liger", "torch.compile", "eager")
             if any(r["impl"] == i for r in res)]
    lines = [f"# Row-length sweep: {meta['gpu']}, torch {meta['torch']}, {meta['date']}", "",
             f"% of device-to-device copy bandwidth ({meta['copy_GBps']:.0f} GB/s) on the "
             "minimum bytes, forward / forward+backward; medians with the L2 flushed "
             "(bench/sweep.py). Empty: the implementation refused the shape.", ""]
    few = lambda r: r["rows"] * r["D"] < 1 << 24
    for op, dtype, f in sorted({(r["op"], r["dtype"], few(r)) for r in res}):
        pts = [r for r in res if r["op"] == op and r["dtype"] == dtype and few(r) == f]
        best = {}
        for r in pts:
            key = (r["D"], r["impl"])
            if key not in best or r["rows"] > best[key]["rows"]:
                best[key] = r
        Ds = sorted({D for D, _ in best})
        lines += [f"## {op}, {dtype}, {'few rows' if f else 'many rows'}", "",
                  "| D | rows | " + " | ".join(impls) + " |",
                  "| ---: | ---: |" + " --- |" * len(impls)]
        for D in Ds:
            rows = max(r["rows"] for (d, _), r in best.items() if d == D)
            cells = [f"{best[(D, i)]['fwd_pct']:.0f} / {best[(D, i)]['fwd_bwd_pct']:.0f}"
                     if (D, i) in best else "" for i in impls]
            lines.append(f"| {D} | {rows} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--ops", default="rmsnorm,layernorm,softmax,log_softmax,logsumexp,bias_gelu")
    p.add_argument("--dtypes", default="bfloat16,float32")
    p.add_argument("--Ds", default=",".join(str(d) for d in DEFAULT_DS))
    p.add_argument("--totals", default="26,28", help="log2 of the elements per tensor")
    p.add_argument("--few-rows", default="16", help="row counts timed at every D too")
    p.add_argument("--impls", default="fusegen,liger,quack,torch.compile,eager")
    p.add_argument("--merge", nargs="+", metavar="DIR")
    args = p.parse_args()
    sweep = merge(args.merge) if args.merge else measure(args)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump(sweep, f, indent=1)
    with open(os.path.join(args.out, "sweep.md"), "w") as f:
        f.write(markdown(sweep))
    try:
        plot(sweep, os.path.join(args.out, "sweep.png"))
    except ImportError as e:
        print(f"bench/sweep.py: no plot ({e})")
    print(f"bench/sweep.py: {len(sweep['results'])} points in {args.out}")


if __name__ == "__main__":
    main()
