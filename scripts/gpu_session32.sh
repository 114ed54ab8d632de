#!/bin/bash
# gpu_session32.sh — the thirty-second session's device run (build carried: scripts/gpu_carry.sh,
# carry devcarry): the patch tests with the test fixes, every test, memcheck of the patch
# problems, then the gpu suite in bf16 and f16 (channels-last) against cuDNN with w's copies
# made once (the new default). Logs go to $OUT.
set -u
cd "$(dirname "$0")/.."
O=${OUT:-/tmp}
export LD_LIBRARY_PATH=$PWD/devcarry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 devcarry/test_gpu >$O/test_gpu.txt 2>&1
tail -2 $O/test_gpu.txt; grep FAIL $O/test_gpu.txt | head -5
for dt in bf16 f16; do
    timeout 150 bench/run_cuda_bench.sh --build devcarry --suite tests/gpu/suite_gpu.json --reps 5 \
        --budget 2 --dtype $dt >$O/bench_$dt.txt 2>&1
    grep -E "^[a-z]|geomean|geometric|MISMATCH" $O/bench_$dt.txt | cut -c1-110
done
XCONV_GPU_TEST_QUICK=1 XCONV_GPU_TEST_ONLY=cuda.patch_tc timeout 90 \
    compute-sanitizer --tool memcheck devcarry/test_gpu >$O/memcheck.txt 2>&1
tail -3 $O/memcheck.txt
