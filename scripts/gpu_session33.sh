#!/bin/bash
# gpu_session33.sh — the thirty-third session's device run (build carried: scripts/gpu_carry.sh,
# carry devcarry): dw_slide over every dtype (16/32-bit integers, f64, i64/u64, c64, c128):
# every test, memcheck of the depthwise problems, then mbv2_dw_144s2 in every dtype against
# the copy rate (no peers) and the float16 / f32 depthwise against cuDNN. Logs go to $OUT.
set -u
cd "$(dirname "$0")/.."
O=${OUT:-/tmp}
export LD_LIBRARY_PATH=$PWD/devcarry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 devcarry/test_gpu >$O/test_gpu.txt 2>&1
tail -2 $O/test_gpu.txt; grep FAIL $O/test_gpu.txt | head -5
XCONV_GPU_TEST_QUICK=1 XCONV_GPU_TEST_ONLY=cuda.depthwise timeout 90 \
    compute-sanitizer --tool memcheck devcarry/test_gpu >$O/memcheck.txt 2>&1
tail -3 $O/memcheck.txt
timeout 120 bench/run_cuda_bench.sh --build devcarry --suite tests/gpu/suite_gpu.json --reps 5 \
    --budget 2 --peers none --filter mbv2 \
    --dtype f32,i8,u8,i16,u16,i32,u32,i64,u64,f64,c64,c128,i8:i32,i16:i32 >$O/bench_dw.txt 2>&1
grep -E "^[a-z]|MISMATCH" $O/bench_dw.txt | cut -c1-110
timeout 60 bench/run_cuda_bench.sh --build devcarry --suite tests/gpu/suite_gpu.json --reps 5 \
    --budget 2 --filter mbv2 --dtype bf16,f16 >$O/bench_dw_cudnn.txt 2>&1
grep -E "^[a-z]|MISMATCH" $O/bench_dw_cudnn.txt | cut -c1-110
