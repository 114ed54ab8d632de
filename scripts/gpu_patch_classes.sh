#!/bin/bash
# gpu_patch_classes.sh — the thirty-first session's cuda.patch_tc work, checked and measured on
# the device machine with a build carried from here (scripts/gpu_carry.sh; carry devcarry):
# the patch tests alone, qwenvl_patch under w's single copy (`w`) and the row classes (`c`),
# each with w's copies made at every run (PREPACK=0) or once per plan (=1), then every test.
set -u
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/devcarry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== test_gpu, patch problems only"
XCONV_GPU_TEST_ONLY=cuda.patch_tc timeout 120 devcarry/test_gpu 2>&1 | tail -8
cat >devcarry/qwen.json <<'JSON'
{"gpu": [{"name": "qwenvl_patch", "op": "conv3d", "n": 16384, "cin": 3, "cout": 1152, "in": [2, 14, 14], "k": [2, 14, 14], "stride": [2, 14, 14], "pad": [0, 0, 0], "dil": [1, 1, 1], "groups": 1}]}
JSON
B="bench/run_cuda_bench.sh --build devcarry --suite devcarry/qwen.json --reps 5 --budget 2 --peers none --dtype bf16"
for layout in channels_last channels_first; do
    for kp in w0 w1 c0 c1; do
        echo "$layout XCONV_PATCH_PAD=${kp:0:1} XCONV_PATCH_PREPACK=${kp:1:1}"
        XCONV_PATCH_PAD=${kp:0:1} XCONV_PATCH_PREPACK=${kp:1:1} timeout 60 $B --layout $layout 2>&1 |
            grep -E "^qwen|rror|MISMATCH"
    done
done
echo "=== test_gpu"
timeout 300 devcarry/test_gpu 2>&1 | tail -22
echo "=== memcheck, patch problems (quick set)"
XCONV_GPU_TEST_QUICK=1 XCONV_GPU_TEST_ONLY=cuda.patch_tc timeout 200 \
    compute-sanitizer --tool memcheck devcarry/test_gpu 2>&1 | tail -4
