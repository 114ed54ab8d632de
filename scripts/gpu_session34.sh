#!/bin/bash
# gpu_session34.sh — the thirty-fourth session's device run (build carried: scripts/gpu_carry.sh,
# carry devcarry): dw_slide's i8 / u8 rows through dp4a, its fp8 y rounded by the hardware's
# conversion, and the piped dw_slide for those kinds (each thread's next rows copied by
# cp.async into a ring in shared memory; XCONV_DW_PIPE=0 leaves it out). Many depthwise
# problems with and without the ring, every test, memcheck of the depthwise problems, then
# mbv2_dw_144s2 against the copy rate with and without the ring, bf16 / f16 against cuDNN,
# Nsight Compute on the piped kernels, and the patch conv. (The session's first call ran
# this script as of commit 935436b, before the ring.) Logs go to $OUT.
set -u
cd "$(dirname "$0")/.."
O=${OUT:-/tmp}
export LD_LIBRARY_PATH=$PWD/devcarry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name --format=csv,noheader
XCONV_GPU_TEST_ONLY=cuda.depthwise XCONV_GPU_TEST_SPECIAL=3000 timeout 120 devcarry/test_gpu \
    >$O/test_dw.txt 2>&1
tail -1 $O/test_dw.txt; grep FAIL $O/test_dw.txt | head -5
XCONV_DW_PIPE=0 XCONV_GPU_TEST_ONLY=cuda.depthwise XCONV_GPU_TEST_SPECIAL=1500 timeout 90 \
    devcarry/test_gpu >$O/test_dw_nopipe.txt 2>&1
tail -1 $O/test_dw_nopipe.txt; grep FAIL $O/test_dw_nopipe.txt | head -5
timeout 200 devcarry/test_gpu >$O/test_gpu.txt 2>&1
tail -1 $O/test_gpu.txt; grep FAIL $O/test_gpu.txt | head -5
XCONV_GPU_TEST_QUICK=1 XCONV_GPU_TEST_ONLY=cuda.depthwise XCONV_GPU_TEST_SPECIAL=60 timeout 90 \
    compute-sanitizer --tool memcheck devcarry/test_gpu >$O/memcheck.txt 2>&1
tail -3 $O/memcheck.txt
for pipe in 1 0 1 0; do
    XCONV_DW_PIPE=$pipe timeout 40 bench/run_cuda_bench.sh --build devcarry \
        --suite tests/gpu/suite_gpu.json --reps 5 --budget 2 --peers none --filter mbv2 \
        --dtype i8,u8,i8:i32,f8e4m3,f8e5m2 >$O/bench_dw_pipe$pipe.txt 2>&1
    echo "XCONV_DW_PIPE=$pipe"
    grep -E "^mbv2|MISMATCH" $O/bench_dw_pipe$pipe.txt | cut -c1-80
done
timeout 40 bench/run_cuda_bench.sh --build devcarry --suite tests/gpu/suite_gpu.json --reps 5 \
    --budget 2 --filter mbv2 --dtype bf16,f16,f32 >$O/bench_dw_cudnn.txt 2>&1
grep -E "^mbv2|MISMATCH" $O/bench_dw_cudnn.txt | cut -c1-110
for d in i8 f8e4m3; do
    timeout 60 ncu --target-processes all --kernel-name regex:dw_slide --launch-skip 3 \
        --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section SchedulerStats --section MemoryWorkloadAnalysis \
        bench/run_cuda_bench.sh --build devcarry --suite tests/gpu/suite_gpu.json --reps 1 \
        --budget 0.2 --peers none --filter mbv2 --dtype $d >$O/ncu_$d.txt 2>&1
    grep -E "Duration|DRAM Throughput|Compute \(SM\)|Issued Warp|Eligible Warps|Achieved Active|Block Limit|L1/TEX Hit" \
        $O/ncu_$d.txt | head -12
done
