#!/usr/bin/env bash
# A/B of two fusegen versions' kernels on one GPU in one command: the generated package of each
# version is built and installed in turn, and bench/build_flag_ab.py times the installed ops'
# own kernels (forward, forward+backward), in the order A B A B so that the two runs of one
# version measure the noise. On the device machine:
#   bash bench/package_ab.sh OUT A_LABEL A_FUSEGEN A_DIR B_LABEL B_FUSEGEN B_DIR
# X_FUSEGEN is a fusegen binary, X_DIR a folder holding that version's templates/ and
# generated/ (the generated/ folder is built as it is). Writes OUT/<label>-<i>.json and the
# comparisons OUT/ab-1, OUT/ab-2 (A against B) and OUT/noise-A, OUT/noise-B (a version
# against itself). FUSEGEN_AB_SHAPES (default 512x4096,32768x256,4096x4096,16384x8192) and
# FUSEGEN_AB_OPS (default all) narrow it; FUSEGEN_AB_KERNEL_TIME=1 adds the GPU time of
# fusegen's kernels per call (build_flag_ab.py --kernel-time).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(realpath -m "$1")
REPO=$PWD
mkdir -p "$OUT"
shapes=${FUSEGEN_AB_SHAPES:-512x4096,32768x256,4096x4096,16384x8192}
labels=("$2" "$5")
binaries=("$3" "$6")
dirs=("$4" "$7")
for round in 1 2; do
  for v in 0 1; do
    dir=${dirs[$v]}
    FUSEGEN_TEMPLATES="$dir/templates" "${binaries[$v]}" --build --install -o "$dir/generated" \
      -j "$(nproc)" >"$OUT/build-${labels[$v]}-$round.log" 2>&1
    (cd /tmp && python3 "$REPO/bench/build_flag_ab.py" --label "${labels[$v]}" \
       --json "$OUT/${labels[$v]}-$round.json" --shapes "$shapes" \
       ${FUSEGEN_AB_OPS:+--ops "$FUSEGEN_AB_OPS"} ${FUSEGEN_AB_KERNEL_TIME:+--kernel-time}) >"$OUT/time-${labels[$v]}-$round.log" 2>&1
  done
  python3 bench/build_flag_ab.py --compare "$OUT/${labels[0]}-$round.json" \
    "$OUT/${labels[1]}-$round.json" --out "$OUT/ab-$round" >/dev/null
done
for v in 0 1; do
  python3 bench/build_flag_ab.py --compare "$OUT/${labels[$v]}-1.json" "$OUT/${labels[$v]}-2.json" \
    --out "$OUT/noise-${labels[$v]}" >/dev/null
done
echo "package_ab: $OUT"
