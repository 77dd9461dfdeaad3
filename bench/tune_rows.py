"""Sweeps the CUDA row plan's launch configuration (vectors per thread kept in registers x
threads per row) for the installed row ops and writes the measurements the heuristic in
templates/runtime/fusegen_row_cuda.cuh is chosen from: tune-rows.json and tune-rows.md.

Each configuration runs in its own process with FUSEGEN_ROW_CONFIG="ITEMS,GROUP" (the row
plan reads it once); "heuristic" is the plan's own choice. Times are medians of
triton.testing.do_bench (L2 flushed), forward and forward+backward.

    python3 bench/tune_rows.py --out DIR [--ops rmsnorm,layernorm,softmax] [--D 1024,4096,8192]
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

ITEMS_GROUPS = [(1, g) for g in (64, 128, 256, 512)] + [(2, g) for g in (64, 128, 256, 512)] + \
               [(4, g) for g in (32, 64, 128, 256)] + [(0, 256), (0, 512)]


def child(args):
    import torch
    import fusegen_ops  # noqa: F401  (registers the ops)
    import importlib
    from fusegen_ops import benchmark
    out = []
    for op in args.ops.split(","):
        entry = importlib.import_module(f"fusegen_ops.{op}.bench_{op}").ENTRY
        for D in (int(d) for d in args.D.split(",")):
            items, group = args.items, args.group
            vectors = D // 8  # bf16: 8 elements per 128-bit vector
            if items > 0 and items * group < vectors:
                continue  # this configuration cannot hold the row
            if items > 0 and items * group >= 2 * vectors:
                continue  # half the threads would idle
            rows = args.elements // D
            forward, step, xg = benchmark.timed_steps(entry.spec, entry.op, rows, D,
                                                      torch.bfloat16, "cuda")
            fwd = benchmark._time(forward)
            both = benchmark._time(step, grad_to_none=xg)
            out.append({"op": op, "rows": rows, "D": D, "config": args.config,
                        "fwd_ms": fwd, "fwd_bwd_ms": both})
    json.dump(out, sys.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out")
    p.add_argument("--ops", default="rmsnorm,layernorm,softmax")
    p.add_argument("--D", default="1024,4096,8192")
    p.add_argument("--elements", type=int, default=1 << 27, help="rows x D of every shape")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--config", default="heuristic", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        args.items, args.group = (0, 0) if args.config == "heuristic" else \
            (int(v) for v in args.config.split(","))
        return child(args)
    if not args.out:
        p.error("--out is required")
    results = []
    for config in ["heuristic"] + [f"{i},{g}" for i, g in ITEMS_GROUPS]:
        env = dict(os.environ)
        env.pop("FUSEGEN_ROW_CONFIG", None)
        if config != "heuristic":
            env["FUSEGEN_ROW_CONFIG"] = config
        cmd = [sys.executable, __file__, "--child", "--config", config, "--ops", args.ops,
               "--D", args.D, "--elements", str(args.elements)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"tune_rows.py: config {config} failed:\n{r.stderr[-2000:]}", file=sys.stderr)
            continue
        results += json.loads(r.stdout)
        print(f"config {config}: {len(json.loads(r.stdout))} measurements", flush=True)
    import torch
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "glue": benchmark.glue(),
            "date": datetime.date.today().isoformat(), "dtype": "bfloat16",
            "elements": args.elements}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tune-rows.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    lines = [f"# Row plan configurations, {meta['gpu']}, torch {meta['torch']}, {meta['date']}",
             "", "bf16, rows x D = %d; ms (median), best per column in bold. "
             "Config = vectors per thread in registers (0: re-read per pass), threads per row."
             % args.elements, ""]
    for op in args.ops.split(","):
        for D in (int(d) for d in args.D.split(",")):
            rs = [r for r in results if r["op"] == op and r["D"] == D]
            if not rs:
                continue
            best_f = min(r["fwd_ms"] for r in rs)
            best_b = min(r["fwd_bwd_ms"] for r in rs)
            best_d = min(r["fwd_bwd_ms"] - r["fwd_ms"] for r in rs)
            lines += [f"## {op}, {rs[0]['rows']} x {D}", "",
                      "| config | forward | forward+backward | difference (backward) |",
                      "| --- | ---: | ---: | ---: |"]
            for r in rs:
                f = f"{r['fwd_ms']:.4f}"
                b = f"{r['fwd_bwd_ms']:.4f}"
                d = r["fwd_bwd_ms"] - r["fwd_ms"]
                ds = f"{d:.4f}"
                lines.append(f"| {r['config']} | {'**' + f + '**' if r['fwd_ms'] == best_f else f} | "
                             f"{'**' + b + '**' if r['fwd_bwd_ms'] == best_b else b} | "
                             f"{'**' + ds + '**' if d == best_d else ds} |")
            lines.append("")
    with open(os.path.join(args.out, "tune-rows.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
