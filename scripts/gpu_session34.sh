#!/bin/bash
# gpu_session34.sh — the thirty-fourth session's device run (build carried: scripts/gpu_carry.sh,
# carry devcarry): dw_slide's i8 / u8 rows through dp4a and its fp8 y rounded by the hardware's
# conversion. Many depthwise problems, every test, memcheck of the depthwise problems, then
# mbv2_dw_144s2 against the copy rate (no peers) and cuDNN, and Nsight Compute on the kernels.
# Logs go to $OUT.
set -u
cd "$(dirname "$0")/.."
O=${OUT:-/tmp}
export LD_LIBRARY_PATH=$PWD/devcarry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name --format=csv,noheader
XCONV_GPU_TEST_ONLY=cuda.depthwise XCONV_GPU_TEST_SPECIAL=3000 timeout 120 devcarry/test_gpu \
    >$O/test_dw.txt 2>&1
tail -2 $O/test_dw.txt; grep FAIL $O/test_dw.txt | head -5
timeout 200 devcarry/test_gpu >$O/test_gpu.txt 2>&1
tail -2 $O/test_gpu.txt; grep FAIL $O/test_gpu.txt | head -5
XCONV_GPU_TEST_QUICK=1 XCONV_GPU_TEST_ONLY=cuda.depthwise timeout 60 \
    compute-sanitizer --tool memcheck devcarry/test_gpu >$O/memcheck.txt 2>&1
tail -3 $O/memcheck.txt
timeout 60 bench/run_cuda_bench.sh --build devcarry --suite tests/gpu/suite_gpu.json --reps 5 \
    --budget 2 --peers none --filter mbv2 \
    --dtype i8,u8,i8:i32,u8:i32,f8e4m3,f8e5m2,f32,i16 >$O/bench_dw.txt 2>&1
grep -E "^[a-z]|MISMATCH" $O/bench_dw.txt | cut -c1-110
timeout 40 bench/run_cuda_bench.sh --build devcarry --suite tests/gpu/suite_gpu.json --reps 5 \
    --budget 2 --filter mbv2 --dtype bf16,f16 >$O/bench_dw_cudnn.txt 2>&1
grep -E "^[a-z]|MISMATCH" $O/bench_dw_cudnn.txt | cut -c1-110
for d in i8 f8e4m3; do
    timeout 60 ncu --target-processes all --kernel-name regex:dw_slide --launch-skip 3 \
        --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis \
        bench/run_cuda_bench.sh --build devcarry --suite tests/gpu/suite_gpu.json --reps 1 \
        --budget 0.2 --peers none --filter mbv2 --dtype $d >$O/ncu_$d.txt 2>&1
    grep -E "Duration|Throughput|Issue Slots|Eligible|Achieved Occupancy|Registers|Stall|No Eligible|Hit Rate|Active Warps" \
        $O/ncu_$d.txt | head -30
done
