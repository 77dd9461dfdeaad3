"""A/B of two builds of the same specs in one run: the ops of package A (built from one version
of fusegen or its runtime, `fusegen ... --package A --namespace A`) against package B's (another
version), interleaved, each timed twice (A, B, A, B) so that the spread of a measurement shows
beside the difference. Ops of the [rows, D] shape classes (benchmark.make_inputs), bf16.

    python3 bench/ab_packages.py --a fgbase --b fusegen_ops --ops rmsnorm,softmax \
        --shapes 32768x4096,4096x16384 --out DIR

Writes DIR/ab.json and DIR/ab.md (ms of each run, B / A of the medians)."""
import argparse
import datetime
import importlib
import json
import os
import statistics

import torch


def entry(package: str, op: str):
    module = importlib.import_module(f"{package}.{op}")
    return module.SPEC, getattr(module, op)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--a", required=True)
    p.add_argument("--b", required=True)
    p.add_argument("--ops", required=True)
    p.add_argument("--shapes", default="32768x4096")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    benchmark = importlib.import_module(f"{args.b}.benchmark")
    dtype = getattr(torch, args.dtype)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    copy = benchmark.copy_bandwidth("cuda")
    rows_out = []
    for op in args.ops.split(","):
        for rows, D in shapes:
            runs = {"a": [], "b": []}
            for _ in range(2):
                for side in ("a", "b"):
                    spec, fn = entry(getattr(args, side), op)
                    runs[side].append(benchmark.measure(spec, fn, rows, D, dtype, "cuda")[:2])
            r = {"op": op, "rows": rows, "D": D}
            for side in ("a", "b"):
                r[side + "_fwd_ms"] = [f for f, _ in runs[side]]
                r[side + "_fwd_bwd_ms"] = [b for _, b in runs[side]]
            r["fwd_ratio"] = statistics.median(r["b_fwd_ms"]) / statistics.median(r["a_fwd_ms"])
            if r["a_fwd_bwd_ms"][0] is not None:
                r["fwd_bwd_ratio"] = (statistics.median(r["b_fwd_bwd_ms"])
                                      / statistics.median(r["a_fwd_bwd_ms"]))
            rows_out.append(r)
            fb = (f"f+b A {r['a_fwd_bwd_ms']} B {r['b_fwd_bwd_ms']} B/A "
                  f"{r['fwd_bwd_ratio']:.3f}" if "fwd_bwd_ratio" in r else "")
            print(f"{op:22} {rows}x{D:<7} fwd A {['%.4f' % v for v in r['a_fwd_ms']]} "
                  f"B {['%.4f' % v for v in r['b_fwd_ms']]} B/A {r['fwd_ratio']:.3f}  "
                  + fb.replace("None", "-"), flush=True)
            torch.cuda.empty_cache()
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "a": args.a,
            "b": args.b, "copy_GBps": copy, "dtype": args.dtype,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    with open(os.path.join(args.out, "ab.json"), "w") as f:
        json.dump({"meta": meta, "results": rows_out}, f, indent=1)
    with open(os.path.join(args.out, "ab.md"), "w") as f:
        f.write(f"# A/B: {args.a} (A) against {args.b} (B), {meta['gpu']}, torch {meta['torch']}, "
                f"{meta['date']}\n\n{args.dtype}; ms of two runs each, interleaved A B A B; "
                "B / A of the medians (below 1: B faster).\n\n"
                "| op | shape | A fwd | B fwd | B/A fwd | A f+b | B f+b | B/A f+b |\n"
                "|---|---|---|---|---:|---|---|---:|\n")
        for r in rows_out:
            def ms(v):
                return " / ".join("-" if x is None else f"{x:.4f}" for x in v)
            f.write(f"| {r['op']} | {r['rows']}x{r['D']} | {ms(r['a_fwd_ms'])} | "
                    f"{ms(r['b_fwd_ms'])} | {r['fwd_ratio']:.3f} | {ms(r['a_fwd_bwd_ms'])} | "
                    f"{ms(r['b_fwd_bwd_ms'])} | "
                    f"{r.get('fwd_bwd_ratio', float('nan')):.3f} |\n")


if __name__ == "__main__":
    main()
