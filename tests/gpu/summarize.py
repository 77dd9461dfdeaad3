"""Summarizes a pytest JUnit XML of the generated ops' tests into gpu-tests.json and
gpu-tests.md: passed / failed / skipped per op and device, with the GPU name, the torch
version and the date, for committing under bench/results/."""
import argparse
import collections
import datetime
import json
import os
import re
import xml.etree.ElementTree as ET

import torch


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("junit", help="junit XML files, comma-separated")
    p.add_argument("out_dir")
    p.add_argument("--build-seconds", type=float)
    args = p.parse_args()
    counts = collections.defaultdict(lambda: collections.Counter())
    failures = []
    for case in (c for j in args.junit.split(",") for c in ET.parse(j).getroot().iter("testcase")):
        op = case.get("classname", "").split(".")[-1].removeprefix("test_")
        m = re.search(r"\[(cpu|cuda)\b", case.get("name", ""))
        device = m.group(1) if m else "any"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
            failures.append(f"{case.get('classname')}::{case.get('name')}")
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        counts[(op, device)][outcome] += 1
    total = collections.Counter()
    for c in counts.values():
        total.update(c)
    meta = {
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "build_seconds": args.build_seconds,
    }
    rows = [{"op": op, "device": dev, **dict(c)} for (op, dev), c in sorted(counts.items())]
    with open(os.path.join(args.out_dir, "gpu-tests.json"), "w") as f:
        json.dump({"meta": meta, "total": dict(total), "by_op": rows, "failures": failures}, f,
                  indent=1)
    lines = [f"# GPU test run: {meta['gpu']}, torch {meta['torch']} (CUDA {meta['cuda']}), "
             f"{meta['date']}", "",
             f"`fusegen --build --install` of all shipped specs: {meta['build_seconds']} s", "",
             f"Total: {total['passed']} passed, {total['failed']} failed, "
             f"{total['skipped']} skipped", "",
             "| op | device | passed | failed | skipped |", "| --- | --- | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['device']} | {r.get('passed', 0)} | {r.get('failed', 0)} "
                     f"| {r.get('skipped', 0)} |")
    if failures:
        lines += ["", "Failures:", ""] + [f"- `{f}`" for f in failures]
    with open(os.path.join(args.out_dir, "gpu-tests.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
