"""Nsight Compute readings of fusegen's kernels at chosen shapes: the profiler's reason
behind a point of the sweep that misses its target. Each point is OP:ROWSxD:PHASE[:CONFIG]
(PHASE fwd or step, forward+backward; CONFIG a FUSEGEN_ROW_CONFIG). On a GPU machine:

    python3 bench/profile_rows.py --out DIR softmax:512x131072:fwd rmsnorm:4096x16384:step

runs ncu once per point (the op runs once untimed, then once between cudaProfilerStart and
Stop: only that call's kernels are read) and writes DIR/profile.json and DIR/profile.md, a
row per kernel: time, DRAM throughput, L2 hit rate, occupancy and the main warp stalls.
"""
import argparse
import csv
import importlib
import io
import json
import os
import subprocess
import sys

# (column, ncu metric); stalls are warps stalled per issued instruction.
METRICS = [
    ("us", "gpu__time_duration.sum"),
    ("dram %", "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("L2 hit %", "lts__t_sector_hit_rate.pct"),
    ("SM %", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    ("occupancy %", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    ("theoretical %", "sm__maximum_warps_per_active_cycle_pct"),
    ("grid", "launch__grid_size"),
    ("block", "launch__block_size"),
    ("regs", "launch__registers_per_thread"),
    ("smem KiB", "launch__shared_mem_per_block_dynamic"),
]
STALLS = ["long_scoreboard", "barrier", "short_scoreboard", "wait", "math_pipe_throttle",
          "mio_throttle", "lg_throttle", "not_selected", "selected", "membar"]
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def run_point(point):
    """Runs one point's op once, then once under the profiler's start/stop."""
    import torch
    import fusegen_ops  # noqa: F401
    from fusegen_ops import benchmark
    op, shape, phase = point.split(":")[:3]
    rows, D = (int(n) for n in shape.split("x"))
    entry = importlib.import_module(f"fusegen_ops.{op}.bench_{op}").ENTRY
    forward, step, xg = benchmark.timed_steps(entry.spec, entry.op, rows, D, torch.bfloat16,
                                              "cuda")
    fn = forward if phase == "fwd" else step
    fn()
    for t in xg:  # as the benchmark does: no accumulation into earlier gradients
        t.grad = None
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def profile(point, out):
    metrics = [m for _, m in METRICS] + [STALL_METRIC.format(s) for s in STALLS]
    env = dict(os.environ)
    parts = point.split(":")
    if len(parts) > 3:
        env["FUSEGEN_ROW_CONFIG"] = parts[3]
    cmd = ["ncu", "--profile-from-start", "off", "--csv", "--page", "raw",
           "--metrics", ",".join(metrics), sys.executable, os.path.abspath(__file__),
           "--run", point]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/tmp")
    with open(os.path.join(out, point.replace(":", "_").replace(",", "-") + ".log"), "w") as f:
        f.write(done.stdout + done.stderr)
    text = done.stdout[done.stdout.find('"ID"'):]
    rows = list(csv.DictReader(io.StringIO(text)))
    kernels = []
    for r in rows[1:]:  # the first row holds the units
        k = {"point": point, "kernel": r["Kernel Name"].split("(")[0][:60]}
        for name, m in METRICS:
            k[name] = r.get(m, "")
        k["stalls"] = sorted(((s, float(r.get(STALL_METRIC.format(s)) or 0)) for s in STALLS),
                             key=lambda p: -p[1])[:3]
        kernels.append(k)
    return kernels


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--run":
        run_point(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("points", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    kernels = []
    for point in args.points:
        kernels += profile(point, args.out)
        print(f"profiled {point}", flush=True)
    with open(os.path.join(args.out, "profile.json"), "w") as f:
        json.dump(kernels, f, indent=1)
    cols = ["point", "kernel"] + [n for n, _ in METRICS] + ["top stalls (warps per issue)"]
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for k in kernels:
        stalls = ", ".join(f"{s} {v:.1f}" for s, v in k["stalls"])
        lines.append("| " + " | ".join([str(k[c]) for c in cols[:-1]] + [stalls]) + " |")
    with open(os.path.join(args.out, "profile.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
