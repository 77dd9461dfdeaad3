"""Benchmarks every installed fusegen op on the GPU: fusegen's kernel, the generated eager
reference and torch.compile of the reference, forward and forward+backward, plus the
device-to-device copy bandwidth of the same run. Writes JSON and a Markdown table.

    python3 bench/run.py --out bench/results/latest [--dtype bfloat16] [--ops bias_gelu,...]
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


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True, help="directory for bench.json and bench.md")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--ops", default=",".join(fusegen_ops.OPS))
    p.add_argument("--shapes", default="512x4096,4096x4096,16384x8192")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/run.py: no CUDA device")
    os.makedirs(args.out, exist_ok=True)
    entries = [importlib.import_module(f"fusegen_ops.{op}.bench_{op}").ENTRY
               for op in args.ops.split(",")]
    results = benchmark.main(entries, ["--dtype", args.dtype, "--shapes", args.shapes,
                                       "--json", os.path.join(args.out, "bench.json")])
    with open(os.path.join(args.out, "bench.json")) as f:
        meta = json.load(f)["meta"]
    meta["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with open(os.path.join(args.out, "bench.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    lines = [f"# fusegen benchmark: {meta['gpu']}, torch {meta['torch']}, {meta['date']}", "",
             f"dtype {args.dtype}; device-to-device copy: {meta['copy_GBps']:.0f} GB/s "
             "(read + write). Median times, L2 flushed; GB/s from the minimum bytes moved.", "",
             "| op | shape | impl | fwd ms | fwd GB/s | % copy | fwd+bwd ms | fwd+bwd GB/s | % copy |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        lines.append(f"| {r['op']} | {r['rows']}x{r['D']} | {r['impl']} | {r['fwd_ms']:.4f} | "
                     f"{r['fwd_GBps']:.0f} | {100 * r['fwd_GBps'] / meta['copy_GBps']:.0f} | "
                     f"{r['fwd_bwd_ms']:.4f} | {r['fwd_bwd_GBps']:.0f} | "
                     f"{100 * r['fwd_bwd_GBps'] / meta['copy_GBps']:.0f} |")
    with open(os.path.join(args.out, "bench.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
