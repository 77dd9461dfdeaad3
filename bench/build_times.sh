#!/usr/bin/env bash
# Measures `fusegen --build --install` on this machine (issue #5's cases) and writes
# RESULTS/build-times.json and RESULTS/build-times.md:
#   first build with this torch (bias_gelu)  fusegen's cache is empty too: torch is asked for
#                                            its compilers and flags (one torch import) and the
#                                            shared autograd object is compiled
#   cold, one pointwise spec (bias_gelu)     fresh output directory, nothing of this package
#                                            built before (fusegen's cache is warm)
#   cold, one row spec (rmsnorm)
#   nothing changed                          the same command again: the build key matches
#   one spec of three changed                leaky_relu's attr default edited, then rebuilt:
#                                            the objects ninja compiled are counted
# Usage: bench/build_times.sh [RESULTS_DIR]   (default: $OUT, else bench/results/build)
# FUSEGEN (default build/fusegen) is the fusegen binary; JOBS (default: all cores).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
RESULTS=${1:-${OUT:-bench/results/build}}
FUSEGEN=${FUSEGEN:-build/fusegen}
JOBS=${JOBS:-$(nproc)}
WORK=$(mktemp -d)
export FUSEGEN_CACHE_DIR="$WORK/cache" # the toolchain cache starts empty
mkdir -p "$RESULTS"
trap 'rm -rf "$WORK"' EXIT
: >"$WORK/cases.tsv"

# case NAME OUTDIR [SPECS...]: times one fusegen call and records the objects it compiled.
case_() {
  local name=$1 dir=$2
  shift 2
  local start end status objects
  start=$(date +%s.%N)
  "$FUSEGEN" "$@" -o "$dir" --build --install -j "$JOBS" >"$WORK/log" 2>&1
  status=$?
  end=$(date +%s.%N)
  cat "$WORK/log"
  # fusegen prints "[n/m] compiling FILE" per object compiled; none when the key matched.
  objects=$(grep -cE '\[[0-9]+/[0-9]+\] compiling ' "$WORK/log")
  printf '%s\t%s\t%s\t%s\n' "$name" "$(python3 -c "print(round($end - $start, 2))")" \
    "${objects:-0}" "$status" >>"$WORK/cases.tsv"
  [ "$status" -eq 0 ] || echo "build_times.sh: '$name' failed (exit $status)" >&2
}

# A cold case starts with no fusegen_ops installed: an installed package built from the same
# sources would match the build key, and nothing would be compiled.
uninstall() { python3 -m pip uninstall -y -q fusegen-ops >/dev/null 2>&1; }

uninstall
case_ "first build with this torch (bias_gelu)" "$WORK/first" specs/bias_gelu.yaml
uninstall
case_ "cold, one pointwise spec (bias_gelu)" "$WORK/bias_gelu" specs/bias_gelu.yaml
case_ "nothing changed (bias_gelu again)" "$WORK/bias_gelu" specs/bias_gelu.yaml
uninstall
case_ "cold, one row spec (rmsnorm)" "$WORK/rmsnorm" specs/rmsnorm.yaml
cp specs/bias_gelu.yaml specs/rmsnorm.yaml specs/leaky_relu.yaml "$WORK/"
uninstall
case_ "cold, three specs (bias_gelu, rmsnorm, leaky_relu)" "$WORK/three" \
  "$WORK/bias_gelu.yaml" "$WORK/rmsnorm.yaml" "$WORK/leaky_relu.yaml"
sed -i 's/default: 0.01/default: 0.02/' "$WORK/leaky_relu.yaml"
case_ "one spec of three changed (leaky_relu's default)" "$WORK/three" \
  "$WORK/bias_gelu.yaml" "$WORK/rmsnorm.yaml" "$WORK/leaky_relu.yaml"

python3 - "$WORK/cases.tsv" "$RESULTS" "$JOBS" <<'EOF'
import datetime, json, os, platform, subprocess, sys
tsv, results, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
cases = []
for line in open(tsv):
    name, seconds, objects, status = line.rstrip("\n").split("\t")
    cases.append({"case": name, "seconds": float(seconds), "objects_compiled": int(objects),
                  "exit": int(status)})
def ask(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
meta = {
    "date": datetime.date.today().isoformat(),
    "host_cpus": os.cpu_count(), "jobs": jobs, "machine": platform.node(),
    "torch": ask("python3 -c 'import torch; print(torch.__version__)'"),
    "nvcc": ask("nvcc --version | tail -n 1"),
    "gpu": ask("nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1") or "none",
}
json.dump({"meta": meta, "cases": cases}, open(os.path.join(results, "build-times.json"), "w"),
          indent=2)
with open(os.path.join(results, "build-times.md"), "w") as f:
    f.write(f"# `fusegen --build --install` timings, {meta['date']}\n\n"
            f"GPU: {meta['gpu']}; {meta['host_cpus']} CPUs, -j{jobs}; torch {meta['torch']}; "
            f"{meta['nvcc']}. Made by `bench/build_times.sh`.\n\n"
            "| case | seconds | objects compiled | exit |\n| --- | ---: | ---: | ---: |\n")
    for c in cases:
        f.write(f"| {c['case']} | {c['seconds']:.2f} | {c['objects_compiled']} | {c['exit']} |\n")
print(open(os.path.join(results, "build-times.md")).read())
sys.exit(1 if any(c["exit"] for c in cases) else 0)
EOF
