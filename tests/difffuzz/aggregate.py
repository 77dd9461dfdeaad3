#!/usr/bin/env python3
"""Merges the summary.json of several difffuzz runs into one summary.json and summary.md:

    python3 tests/difffuzz/aggregate.py --out bench/results/difffuzz-DATE /tmp/dfz/bulk/s*/ ...

Each failure keeps its op, seed, kind, first messages and the open findings (`known`) that
may explain it; a `--notes FILE.json` maps op names to a diagnosis for the table. A run cut
by a time limit (run.py --time-limit, or killed) counts the specs it checked; its `not_run`
are counted apart. long_run.py calls aggregate() after every batch."""
import argparse
import glob
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--notes", help="JSON: {op: diagnosis}")
    ap.add_argument("--title", default="difffuzz run")
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    aggregate(args.runs, args.out, json.load(open(args.notes)) if args.notes else {}, args.title)


def aggregate(run_paths, out_dir, notes=None, title="difffuzz run", quiet=False):
    notes = notes or {}
    runs = []
    for r in run_paths:
        p = os.path.join(r, "summary.json") if os.path.isdir(r) else r
        if os.path.exists(p):
            s = json.load(open(p))
            s["path"] = os.path.dirname(os.path.abspath(p))
            runs.append(s)
    total = {"passed": 0, "failed": 0, "skipped": 0, "specs": 0, "not_run": 0}
    time_s = {"make_specs_s": 0.0, "fusegen_s": 0.0, "build_s": 0.0, "check_s": 0.0}
    failures = []
    for s in runs:
        total["passed"] += s["passed"]
        total["failed"] += s["failed"]
        total["skipped"] += s.get("skipped", 0)
        total["specs"] += s["count"]
        total["not_run"] += len(s.get("not_run", []))
        for k in time_s:
            time_s[k] += s["timings"].get(k, 0.0)
        for f in s["failures"]:
            failures.append({"op": f["op"], "seed": s["seed"], "device": s["device"], "kind": f["kind"],
                             "known": f.get("known"), "note": notes.get(f["op"]),
                             "messages": [m[:1500] for m in f["messages"][:3]]})
    out = {"runs": [{"seed": s["seed"], "count": s["count"], "device": s["device"], "passed": s["passed"],
                     "failed": s["failed"], "skipped": s.get("skipped", 0), "first": s.get("first"),
                     "not_run": len(s.get("not_run", [])), "timings": s["timings"],
                     "fusegen_version": s.get("fusegen_version")} for s in runs],
           "totals": total, "time_s": {k: round(v, 1) for k, v in time_s.items()},
           "per_spec_s": round(sum(time_s.values()) / max(total["specs"], 1), 1),
           "failures": failures}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(out, f, indent=1)
    md = [f"# {title}", "",
          f"{total['specs']} specs in {len(runs)} batches: **{total['passed']} passed, {total['failed']} failed**"
          + (f", {total['skipped']} skipped" if total["skipped"] else "")
          + (f" ({total['not_run']} more not run: time limit)" if total["not_run"] else "") + ".", "",
          "| seed | first | device | specs | passed | failed | skipped | build s | check s | s per spec |",
          "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in runs:
        t = s["timings"]
        md.append(f"| {s['seed']} | {s.get('first', 0)} | {s['device']} | {s['count']} | {s['passed']} | {s['failed']} | "
                  f"{s.get('skipped', 0)} | {t.get('build_s', 0):.0f} | {t.get('check_s', 0):.0f} | "
                  f"{t.get('per_spec_s', 0)} |")
    md += ["", "## Failures", "", "| op | seed | device | kind | diagnosis | first message |",
           "| --- | ---: | --- | --- | --- | --- |"]
    for f in failures:
        lines = [l for m in f["messages"] for l in m.splitlines()] or [""]
        line = next((l for l in lines if "error:" in l), lines[0])
        line = line.replace("|", "\\|")[:200]
        md.append(f"| {f['op']} | {f['seed']} | {f['device']} | {f['kind']} | {f['note'] or ''} | {line} |")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    if not quiet:
        print(f"{total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped in {len(runs)} runs")


if __name__ == "__main__":
    sys.exit(main())
