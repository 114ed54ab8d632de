#!/bin/bash
# gpu_session35.sh — the thirty-fifth session's device runs (build carried: scripts/gpu_carry.sh,
# carry devcarry), meant for an H200, the card of issue 4's targets, which no session since the
# twenty-ninth has had:
#   gpu_session35.sh one   (targets, then knobs)
#   gpu_session35.sh targets  the gpu suite channels-last in bf16 against cuDNN; the
#                          patch conv in both layouts; every dtype's depthwise against the copy
#                          rate
#   gpu_session35.sh knobs a depthwise knob for the bytes and fp8 against the default:
#                          runs of 2 outputs a thread at 5 blocks per SM instead of 4 at 3
#                          (XCONV_DW_RUN2=1), with and without the ring; then every test
#   gpu_session35.sh short the patch conv, every dtype's depthwise, the knob's tests and A/B
#   gpu_session35.sh two   the gpu suite channels-last in f16 and channels-first in bf16, fp8
#                          (fast accumulation) and i8 on the suite
#   gpu_session35.sh first (thirty-sixth session) short, then the gpu suite in bf16: what one
#                          call of under 10 minutes can bring back
# Logs go to $OUT.
set -u
cd "$(dirname "$0")/.."
O=${OUT:-/tmp}
export LD_LIBRARY_PATH=$PWD/devcarry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B="bench/run_cuda_bench.sh --build devcarry --suite tests/gpu/suite_gpu.json"
show() { grep -E "^[a-z]|geomean|geometric|MISMATCH|copy|matrix" "$1" | cut -c1-118; }
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
MODE=${1:-one}
if [ "$MODE" = one ] || [ "$MODE" = targets ] || [ "$MODE" = first ]; then
    timeout 150 $B --reps 5 --budget 2 --dtype bf16 >$O/bench_bf16.txt 2>&1
    show $O/bench_bf16.txt
fi
if [ "$MODE" = one ] || [ "$MODE" = targets ] || [ "$MODE" = short ] || [ "$MODE" = first ]; then
    timeout 30 $B --reps 5 --budget 2 --filter qwenvl --layout channels_first --dtype bf16,f16 \
        >$O/bench_patch_cf.txt 2>&1
    show $O/bench_patch_cf.txt
    timeout 60 $B --reps 5 --budget 1 --peers none --filter mbv2 \
        --dtype f16,f32,i8,u8,i8:i32,f8e4m3,f8e5m2,i16,i32,i64,f64,c64,c128 >$O/bench_dw.txt 2>&1
    show $O/bench_dw.txt
fi
if [ "$MODE" = one ] || [ "$MODE" = knobs ] || [ "$MODE" = short ] || [ "$MODE" = first ]; then
    # the knob's kernels against the CPU reference
    XCONV_DW_RUN2=1 XCONV_GPU_TEST_ONLY=cuda.depthwise XCONV_GPU_TEST_SPECIAL=1500 \
        timeout 60 devcarry/test_gpu >$O/test_dw_run2.txt 2>&1
    echo "XCONV_DW_RUN2=1: $(tail -1 $O/test_dw_run2.txt)"; grep FAIL $O/test_dw_run2.txt | head -5
    for v in XCONV_DW_RUN2=1 base "XCONV_DW_RUN2=1 XCONV_DW_PIPE=0" XCONV_DW_PIPE=0 \
        XCONV_DW_RUN2=1 base; do
        env $([ "$v" = base ] || echo $v) timeout 30 $B --reps 5 --budget 1 --peers none \
            --filter mbv2 --dtype i8,u8,i8:i32,f8e4m3,f8e5m2 >$O/bench_dw_ab.txt 2>&1
        echo "== $v"
        grep -E "^mbv2|MISMATCH" $O/bench_dw_ab.txt | cut -c1-80
    done
fi
if [ "$MODE" = one ] || [ "$MODE" = knobs ]; then
    timeout 170 devcarry/test_gpu >$O/test_gpu.txt 2>&1
    tail -1 $O/test_gpu.txt; grep FAIL $O/test_gpu.txt | head -5
fi
if [ "$MODE" = two ]; then
    timeout 150 $B --reps 5 --budget 2 --dtype f16 >$O/bench_f16.txt 2>&1
    show $O/bench_f16.txt
    timeout 150 $B --reps 5 --budget 2 --layout channels_first --dtype bf16 >$O/bench_bf16_cf.txt 2>&1
    show $O/bench_bf16_cf.txt
    timeout 120 $B --reps 5 --budget 1 --peers none --allow-fp8-fast-accum --dtype f8e4m3,i8 \
        >$O/bench_f8_i8.txt 2>&1
    show $O/bench_f8_i8.txt
fi
