"""A/B timing of one build flag: the installed fusegen ops' own kernels only (no references, no
torch.compile), forward and forward+backward, so that two builds of the same sources can be
compared. Run it once per build in one device command, then compare:

    python3 bench/build_flag_ab.py --label fmad-off --json A.json [--ops rmsnorm,...]
    (rebuild with the other flag, reinstall)
    python3 bench/build_flag_ab.py --label fmad-on --json B.json
    python3 bench/build_flag_ab.py --compare A.json B.json --out DIR   (JSON + Markdown)

Times are fusegen_ops.benchmark's (medians of CUDA-event timings, L2 flushed). At small shapes
those are bound by the host (autograd, launches); --kernel-time adds the GPU time of fusegen's
own kernels per call (torch.profiler, the fg::cuda kernels only, averaged over 50 calls), which
the comparison reports too."""
import argparse
import datetime
import json
import os


def kernel_us(fn, grad_to_none=None, iters=50):
    """Microseconds of GPU time per call of fn in fusegen's kernels (names in fg::cuda)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    def call():
        for t in grad_to_none or []:
            t.grad = None
        fn()
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            call()
        torch.cuda.synchronize()
    total = sum(e.self_device_time_total for e in prof.key_averages() if "fg::cuda" in e.key)
    return total / iters


def measure(args):
    import importlib

    import torch

    import fusegen_ops
    from fusegen_ops import benchmark

    ops = args.ops.split(",") if args.ops else fusegen_ops.__all__
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    dtype = getattr(torch, args.dtype)
    rows = []
    for name in ops:
        mod = importlib.import_module(f"fusegen_ops.{name}")
        spec, op = mod.SPEC, getattr(mod, name)
        for r, d in shapes:
            forward, step, xg = benchmark.timed_steps(spec, op, r, d, dtype, "cuda")
            # (step is None for an op without a differentiable output: forward only)
            rows.append({"op": name, "rows": r, "D": d, "fwd_ms": benchmark._time(forward),
                         "fwd_bwd_ms": benchmark._time(step, grad_to_none=xg) if step else None})
            if args.kernel_time:
                rows[-1]["fwd_kernel_us"] = kernel_us(forward)
                if step:
                    rows[-1]["fwd_bwd_kernel_us"] = kernel_us(step, grad_to_none=xg)
            print(json.dumps(rows[-1]), flush=True)
    meta = {"label": args.label, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "glue": benchmark.glue(),
            "dtype": args.dtype, "date": datetime.date.today().isoformat(),
            "copy_GBps": benchmark.copy_bandwidth("cuda")}
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "results": rows}, f, indent=1)


def compare(paths, out):
    a, b = (json.load(open(p)) for p in paths)
    key = lambda r: (r["op"], r["rows"], r["D"])  # noqa: E731
    bres = {key(r): r for r in b["results"]}
    la, lb = a["meta"]["label"], b["meta"]["label"]
    if la == lb:  # one build timed twice: the noise
        la, lb = la + " (1st)", lb + " (2nd)"
    lines = [f"# {la} against {lb}", "",
             f"{a['meta']['gpu']}, torch {a['meta']['torch']}, {a['meta']['dtype']}, {a['meta']['date']}; "
             f"ratio = time with {la} / time with {lb} (above 1: {la} is slower).", "",
             "| op | shape | fwd ms " + la + " | fwd ms " + lb + " | fwd ratio | f+b ms " + la + " | f+b ms "
             + lb + " | f+b ratio |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    kernels = all("fwd_kernel_us" in r for r in a["results"] + b["results"])
    if kernels:
        lines[-2] += " kernel us fwd " + la + " | " + lb + " | ratio | kernel us f+b " + la + " | " + lb + " | ratio |"
        lines[-1] += " ---: | ---: | ---: | ---: | ---: | ---: |"
    rows = []
    for r in a["results"]:
        o = bres.get(key(r))
        if o is None:
            continue
        fr = r["fwd_ms"] / o["fwd_ms"]
        br = r["fwd_bwd_ms"] / o["fwd_bwd_ms"] if r["fwd_bwd_ms"] and o["fwd_bwd_ms"] else None
        fb = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
        row = {"op": r["op"], "rows": r["rows"], "D": r["D"], "fwd_ratio": fr, "fwd_bwd_ratio": br,
               la: r, lb: o}
        line = (f"| {r['op']} | {r['rows']}x{r['D']} | {r['fwd_ms']:.4f} | {o['fwd_ms']:.4f} | {fr:.3f} | "
                f"{fb(r['fwd_bwd_ms'])} | {fb(o['fwd_bwd_ms'])} | {'-' if br is None else f'{br:.3f}'} |")
        if kernels:
            row["fwd_kernel_ratio"] = r["fwd_kernel_us"] / o["fwd_kernel_us"]
            line += f" {r['fwd_kernel_us']:.1f} | {o['fwd_kernel_us']:.1f} | {row['fwd_kernel_ratio']:.3f} |"
            if "fwd_bwd_kernel_us" in r and "fwd_bwd_kernel_us" in o:
                row["fwd_bwd_kernel_ratio"] = r["fwd_bwd_kernel_us"] / o["fwd_bwd_kernel_us"]
                line += (f" {r['fwd_bwd_kernel_us']:.1f} | {o['fwd_bwd_kernel_us']:.1f} |"
                         f" {row['fwd_bwd_kernel_ratio']:.3f} |")
            else:
                line += " - | - | - |"
        rows.append(row)
        lines.append(line)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "ab.json"), "w") as f:
        json.dump({"meta": {"a": a["meta"], "b": b["meta"]}, "rows": rows}, f, indent=1)
    with open(os.path.join(out, "ab.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label")
    ap.add_argument("--json")
    ap.add_argument("--ops", default="")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--shapes", default="4096x4096,16384x8192")
    ap.add_argument("--kernel-time", action="store_true")
    ap.add_argument("--compare", nargs=2, metavar="JSON")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    if args.compare:
        compare(args.compare, args.out)
    else:
        measure(args)


if __name__ == "__main__":
    main()
