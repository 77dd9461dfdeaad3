#!/usr/bin/env python3
"""Merges the summary.json of several difffuzz runs into one summary.json and summary.md:

    python3 tests/difffuzz/aggregate.py --out bench/results/difffuzz-DATE /tmp/dfz/bulk/s*/ ...

Each failure keeps its op, seed, kind, first messages and the open findings (`known`) that
may explain it; a `--notes FILE.json` maps op names to a diagnosis for the table."""
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
    notes = json.load(open(args.notes)) if args.notes else {}
    runs = []
    for r in args.runs:
        p = os.path.join(r, "summary.json") if os.path.isdir(r) else r
        if os.path.exists(p):
            s = json.load(open(p))
            s["path"] = os.path.dirname(os.path.abspath(p))
            runs.append(s)
    total = {"passed": 0, "failed": 0, "skipped": 0, "specs": 0}
    time_s = {"make_specs_s": 0.0, "fusegen_s": 0.0, "build_s": 0.0, "check_s": 0.0}
    failures = []
    for s in runs:
        total["passed"] += s["passed"]
        total["failed"] += s["failed"]
        total["skipped"] += s.get("skipped", 0)
        total["specs"] += s["count"]
        for k in time_s:
            time_s[k] += s["timings"].get(k, 0.0)
        for f in s["failures"]:
            failures.append({"op": f["op"], "seed": s["seed"], "device": s["device"], "kind": f["kind"],
                             "known": f.get("known"), "note": notes.get(f["op"]),
                             "messages": [m[:1500] for m in f["messages"][:3]]})
    out = {"runs": [{"seed": s["seed"], "count": s["count"], "device": s["device"], "passed": s["passed"],
                     "failed": s["failed"], "skipped": s.get("skipped", 0), "timings": s["timings"],
                     "fusegen_version": s.get("fusegen_version")} for s in runs],
           "totals": total, "time_s": {k: round(v, 1) for k, v in time_s.items()},
           "per_spec_s": round(sum(time_s.values()) / max(total["specs"], 1), 1),
           "failures": failures}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(out, f, indent=1)
    md = [f"# {args.title}", "",
          f"{total['specs']} specs in {len(runs)} batches: **{total['passed']} passed, {total['failed']} failed**"
          + (f", {total['skipped']} skipped" if total["skipped"] else "") + ".", "",
          "| seed | device | specs | passed | failed | skipped | build s | check s | s per spec |",
          "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in runs:
        t = s["timings"]
        md.append(f"| {s['seed']} | {s['device']} | {s['count']} | {s['passed']} | {s['failed']} | "
                  f"{s.get('skipped', 0)} | {t.get('build_s', 0):.0f} | {t.get('check_s', 0):.0f} | "
                  f"{t.get('per_spec_s', 0)} |")
    md += ["", "## Failures", "", "| op | seed | device | kind | diagnosis | first message |",
           "| --- | ---: | --- | --- | --- | --- |"]
    for f in failures:
        lines = [l for m in f["messages"] for l in m.splitlines()] or [""]
        line = next((l for l in lines if "error:" in l), lines[0])
        line = line.replace("|", "\\|")[:200]
        md.append(f"| {f['op']} | {f['seed']} | {f['device']} | {f['kind']} | {f['note'] or ''} | {line} |")
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"{total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped in {len(runs)} runs")


if __name__ == "__main__":
    sys.exit(main())
