"""Host cost per call: every installed fusegen op at a launch-bound shape (default 16 rows of
64, bf16), side by side with its eager reference and Liger where Liger has the op (and, with
--impls, torch.compile of the reference), as the time per call of a steady-state loop of many calls (the GPU runs them
asynchronously; each takes a few microseconds of GPU time, so the loop's time per call is what
the host spends issuing it). Forward, and forward+backward through torch.autograd.grad.

    python3 bench/host_cost.py --out DIR [--ops rmsnorm,softmax] [--calls 1000] [--shape 16x64]
        [--impls fusegen,eager,liger,torch.compile]

Writes DIR/host_cost.json ({"meta": {"gpu", "torch", "date", "calls", "shape"}, "results":
[{"op", "impl", "fwd_us", "fwd_bwd_us"}]}, medians of 5 loops) and DIR/host_cost.md."""
import argparse
import datetime
import importlib
import json
import os
import statistics
import sys
import time


def per_call_us(fn, calls, sync, reduce=statistics.median):
    """The median (or `reduce`) over 5 loops of the wall time per call of `calls` calls of
    fn, the device drained (sync) before and after each loop."""
    for _ in range(20):  # warm-up: caches, autotuning, compilation
        fn()
    times = []
    for _ in range(5):
        sync()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return reduce(times)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--ops", default="")
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--impls", default="fusegen,eager,liger")
    p.add_argument("--shape", default="16x64")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--device", default="cuda", help="cpu: a check of the script itself")
    args = p.parse_args()

    import torch

    import fusegen_ops
    from fusegen_ops import benchmark

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import run as bench_run  # bench/run.py: Liger's functions

    liger = bench_run.liger_impls()
    rows, D = (int(v) for v in args.shape.split("x"))
    dtype = getattr(torch, args.dtype)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    if args.device != "cuda":
        liger = {}
    results = []
    for name in args.ops.split(",") if args.ops else fusegen_ops.OPS:
        mod = importlib.import_module(f"fusegen_ops.{name}")
        spec = mod.SPEC
        attrs = {a.name: a.default for a in spec.attrs if a.default is not None}
        wanted = args.impls.split(",")
        impls = {"fusegen": getattr(mod, name), "eager": mod.reference}
        if name in liger:
            impls["liger"] = liger[name]
        if "torch.compile" in wanted:
            impls["torch.compile"] = torch.compile(mod.reference, dynamic=False)
        for impl, fn in impls.items():
            if impl not in wanted:
                continue
            x = benchmark.make_inputs(spec, rows, D, dtype, args.device)
            xg = benchmark.make_inputs(spec, rows, D, dtype, args.device, requires_grad=True)
            out = fn(*xg, **attrs)
            outs = out if isinstance(out, tuple) else (out,)
            gouts = [torch.randn_like(o) for o in outs]

            def forward():
                fn(*x, **attrs)

            def forward_backward():
                o = fn(*xg, **attrs)
                o = o if isinstance(o, tuple) else (o,)
                torch.autograd.grad(o, xg, gouts, allow_unused=True)

            r = {"op": name, "impl": impl, "fwd_us": per_call_us(forward, args.calls, sync),
                 "fwd_bwd_us": per_call_us(forward_backward, args.calls, sync)}
            results.append(r)
            print(json.dumps(r), flush=True)
    meta = {"gpu": torch.cuda.get_device_name() if args.device == "cuda" else args.device, "torch": torch.__version__,
            "glue": benchmark.glue(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "calls": args.calls, "shape": f"{rows}x{D} {args.dtype}"}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "host_cost.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    impls = [i for i in ("fusegen", "eager", "liger", "torch.compile")
             if any(r["impl"] == i for r in results)]
    lines = [f"# Host cost per call: {meta['gpu']}, torch {meta['torch']}, {meta['date']}", "",
             f"Microseconds per call of a loop of {args.calls} calls at {meta['shape']}, "
             "forward / forward+backward (median of 5 loops; bench/host_cost.py).", "",
             "| op | " + " | ".join(impls) + " | fusegen at or below eager |",
             "| --- |" + " ---: |" * len(impls) + " --- |"]
    by = {(r["op"], r["impl"]): r for r in results}
    for op in dict.fromkeys(r["op"] for r in results):
        cells = [f"{by[(op, i)]['fwd_us']:.1f} / {by[(op, i)]['fwd_bwd_us']:.1f}"
                 if (op, i) in by else "" for i in impls]
        f, e = by[(op, "fusegen")], by[(op, "eager")]
        ok = "yes" if f["fwd_us"] <= e["fwd_us"] and f["fwd_bwd_us"] <= e["fwd_bwd_us"] else "no"
        lines.append(f"| {op} | " + " | ".join(cells) + f" | {ok} |")
    with open(os.path.join(args.out, "host_cost.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"bench/host_cost.py: {len(results)} rows in {args.out}")


if __name__ == "__main__":
    main()
