"""Issue #15's targets checked against sweep results: for every fusegen point of the runs
(rows x D of at least 2^24 elements), forward >= 95% of copy from D = 256 (90% below) and
forward+backward >= 90% (85% below), and no slower than any peer timed at the same op, dtype and
D (beyond 2%). Prints and writes OUT/targets.md, one line per point that misses.

    python3 bench/sweep_targets.py --out DIR RUN_DIR [RUN_DIR ...]   (one GPU's runs)"""
import argparse
import json
import os


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("runs", nargs="+")
    args = p.parse_args()
    points, gpus = {}, set()
    for d in args.runs:
        run = json.load(open(os.path.join(d, "sweep.json")))
        gpus.add(run["meta"]["gpu"])
        for r in run["results"]:
            if r["rows"] * r["D"] >= 1 << 24:
                points.setdefault((r["op"], r["dtype"], r["D"]), {})[r["impl"]] = r
    if len(gpus) != 1:
        raise SystemExit(f"bench/sweep_targets.py: runs of different GPUs: {sorted(gpus)}")
    misses, met = [], 0
    for (op, dtype, D), impls in sorted(points.items()):
        if "fusegen" not in impls:
            continue
        f = impls["fusegen"]
        fwd_target, both_target = (95, 90) if D >= 256 else (90, 85)
        why = []
        if f["fwd_pct"] < fwd_target:
            why.append(f"forward {f['fwd_pct']:.0f}% < {fwd_target}%")
        if f["fwd_bwd_pct"] < both_target:
            why.append(f"forward+backward {f['fwd_bwd_pct']:.0f}% < {both_target}%")
        for key, what in (("fwd_ms", "forward"), ("fwd_bwd_ms", "forward+backward")):
            ahead = [i for i, r in impls.items()
                     if i not in ("fusegen", "eager") and r[key] * 1.02 < f[key]]
            if ahead:
                why.append(f"{what} behind {', '.join(sorted(ahead))}")
        if why:
            misses.append(f"| {op} | {dtype} | {D} | {'; '.join(why)} |")
        else:
            met += 1
    lines = [f"# Issue #15 targets on {gpus.pop()}", "",
             f"From {', '.join(args.runs)}: {met} points meet every target, {len(misses)} miss.",
             "", "| op | dtype | D | misses |", "| --- | --- | ---: | --- |"] + misses
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "targets.md"), "w") as out:
        out.write("\n".join(lines) + "\n")
    print("\n".join(lines[:3]))


if __name__ == "__main__":
    main()
