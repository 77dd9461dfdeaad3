#!/usr/bin/env python3
"""A long difffuzz run: many seeded batches (run.py) at once within a time limit, resumable.

    python3 tests/difffuzz/long_run.py --seeds 30-39 --count 200 --batch 25 --parallel 4 --jobs 4 \\
        --time-limit 560 --fusegen build/fusegen --out /tmp/dfz-long [--device cuda] [--skip-known]

Spec indices first..first+count-1 of every seed, in batches of --batch specs, each batch a
run.py into OUT/s<seed>_<first>/ (its own package, built and checked with --jobs), --parallel
batches at a time (so one batch's serial steps, fusegen and the workers' start-up, overlap the
others' builds and checks). Past --time-limit seconds no batch starts and the running ones stop
(run.py --time-limit); every run.py writes its summary.json after each spec, and this script
merges them (aggregate.py) into OUT/summary.json and OUT/summary.md after every batch, so a
run killed at a device's time limit keeps what it checked.

Rerun the same command to resume: finished batches are skipped, unfinished ones rerun with
run.py --reuse (their built package kept: only the checks again). On a fresh machine, where
OUT is gone, resume by index: the last line names the first batch not finished (`next: seed S
from spec I`): rerun with `--seeds S --first I` for it. `--aggregate-only` merges what OUT holds."""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import aggregate  # noqa: E402


def parse_seeds(text):
    seeds = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        seeds += list(range(int(a), int(b or a) + 1))
    return seeds


def batch_dir(out, seed, first):
    return os.path.join(out, f"s{seed}_{first:05d}")


def finished(path):
    try:
        return json.load(open(os.path.join(path, "summary.json"))).get("complete", False)
    except (OSError, ValueError):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", required=True, help="e.g. 30-39 or 1,5,7-9")
    ap.add_argument("--first", type=int, default=0, help="index of the first spec of each seed")
    ap.add_argument("--count", type=int, default=40, help="specs per seed")
    ap.add_argument("--batch", type=int, default=20, help="specs per batch (one package)")
    ap.add_argument("--parallel", type=int, default=1, help="batches at a time")
    ap.add_argument("--jobs", type=int, default=2, help="run.py --jobs of each batch")
    ap.add_argument("--time-limit", type=float, help="seconds for the whole run")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--fusegen", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip-known", action="store_true")
    ap.add_argument("--nice", type=int, default=0, help="run the batches at this niceness")
    ap.add_argument("--aggregate-only", action="store_true")
    ap.add_argument("--run-args", default="", help="more run.py options, e.g. '--no-features names'")
    args = ap.parse_args()
    start = time.time()
    deadline = start + args.time_limit if args.time_limit else None
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    todo = [(s, f, min(args.batch, args.first + args.count - f))
            for s in parse_seeds(args.seeds) for f in range(args.first, args.first + args.count, args.batch)]
    dirs = [batch_dir(out, s, f) for s, f, _ in todo]

    def merge():
        runs = [d for d in dirs if os.path.exists(os.path.join(d, "summary.json"))]
        if runs:
            aggregate.aggregate(runs, out, title=f"difffuzz long run: seeds {args.seeds}, {args.device}",
                                quiet=True)
        return runs

    if args.aggregate_only:
        merge()
        return report(out, todo, dirs)
    pending = [b for b, d in zip(todo, dirs) if not finished(d)]
    print(f"long_run: {len(todo)} batches of up to {args.batch} specs, {len(todo) - len(pending)} finished "
          f"already; {args.parallel} at a time, --jobs {args.jobs}, device {args.device}", flush=True)
    running = []  # (Popen, batch, started)
    durations = []
    while pending or running:
        left = None if deadline is None else deadline - time.time()
        estimate = max(durations) if durations else 60
        while pending and len(running) < args.parallel and (left is None or left > min(estimate, 120)):
            seed, first, n = pending.pop(0)
            d = batch_dir(out, seed, first)
            cmd = [sys.executable, os.path.join(HERE, "run.py"), "--seed", str(seed), "--first", str(first),
                   "--count", str(n), "--jobs", str(args.jobs), "--device", args.device,
                   "--fusegen", args.fusegen, "--out", d, *args.run_args.split()]
            if args.skip_known:
                cmd.append("--skip-known")
            if os.path.isdir(os.path.join(d, "pkg")):
                cmd.append("--reuse")
            if left is not None:
                cmd += ["--time-limit", str(int(left))]
            if args.nice:
                cmd = ["nice", "-n", str(args.nice), *cmd]
            os.makedirs(os.path.dirname(d), exist_ok=True)
            log = open(d + ".log", "w")
            running.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), (seed, first, n), time.time()))
        if not running:
            break  # out of time
        time.sleep(1)
        for item in list(running):
            p, (seed, first, n), t0 = item
            if p.poll() is None:
                continue
            running.remove(item)
            durations.append(time.time() - t0)
            with open(batch_dir(out, seed, first) + ".log") as f:
                last = (f.read().strip().splitlines() or [""])[-1]
            print(f"seed {seed} specs {first}..{first + n - 1}: {last} ({time.time() - t0:.0f} s)", flush=True)
            merge()
    merge()
    return report(out, todo, dirs)


def report(out, todo, dirs):
    try:
        s = json.load(open(os.path.join(out, "summary.json")))
    except OSError:
        s = {"totals": {"passed": 0, "failed": 0, "skipped": 0, "not_run": 0}}
    t = s["totals"]
    left = [(seed, first) for (seed, first, _), d in zip(todo, dirs) if not finished(d)]
    if left:
        print(f"next: seed {left[0][0]} from spec {left[0][1]} ({len(left)} batches not finished)")
    print(f"{t['passed']} passed, {t['failed']} failed" + (f", {t['skipped']} skipped" if t["skipped"] else "")
          + (f", {t['not_run']} not run" if t.get("not_run") else ""))
    return 1 if t["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
