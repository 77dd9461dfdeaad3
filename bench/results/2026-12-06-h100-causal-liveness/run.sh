#!/usr/bin/env bash
# Device run: liveness of products (causal_softmax's backward reads no gradient past the query).
set -u
xz -dc .device/fusegen.xz > /tmp/fusegen && chmod +x /tmp/fusegen
export FUSEGEN_TEMPLATES=$PWD/templates FUSEGEN_REQUIRE_CUDA=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s)
/tmp/fusegen --build --install -o .device/pkg_new -j 16 > $OUT/build_new.log 2>&1; echo "new build rc=$? $(( $(date +%s) - t0 ))s"
/tmp/fusegen --build --install -o .device/pkg_base -j 16 > $OUT/build_base.log 2>&1; echo "base build rc=$? $(( $(date +%s) - t0 ))s"
tail -2 $OUT/build_new.log $OUT/build_base.log
python3 -c "import xdist" 2>/dev/null && par="-n 8" || par=""
(cd /tmp && timeout 200 python3 -m pytest --pyargs fusegen_ops.causal_softmax -q -p no:cacheprovider -W ignore::DeprecationWarning $par -k "not cpu and not index_beyond_2_31 and not benchmark_shape") > $OUT/cuda_tests.txt 2>&1; tail -3 $OUT/cuda_tests.txt
(cd /tmp && timeout 120 python3 -m pytest --pyargs fusegen_ops.causal_softmax -q -p no:cacheprovider -W ignore::DeprecationWarning -k "not cpu and (index_beyond_2_31 or benchmark_shape)") > $OUT/cuda_tests_big.txt 2>&1; tail -3 $OUT/cuda_tests_big.txt
echo "tests done $(( $(date +%s) - t0 ))s"
timeout 150 python3 tests/difffuzz/run.py --device cuda --jobs 8 --fusegen /tmp/fusegen --out /tmp/dfz tests/difffuzz/handwritten/alibi_causal_softmax.yaml tests/difffuzz/handwritten/sliding_window_softmax.yaml tests/difffuzz/handwritten/biased_head_standardize.yaml > $OUT/difffuzz_cuda.txt 2>&1; tail -4 $OUT/difffuzz_cuda.txt
echo "difffuzz done $(( $(date +%s) - t0 ))s"
cd bench && timeout 200 python3 attention_softmax.py --out $OUT/bench --baseline base_ops --shapes 8x32x2048x2048,4x16x1024x1024,1x16x4096x4096 2>&1 | grep -v Warning | tail -30
echo "all done $(( $(date +%s) - t0 ))s"
