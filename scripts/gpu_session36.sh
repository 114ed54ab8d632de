#!/bin/bash
# gpu_session36.sh — the thirty-sixth session's device runs (build carried: scripts/gpu_carry.sh,
# carry devcarry):
#   gpu_session36.sh ab      the depthwise knobs on tests/gpu/suite_dw.json (six shapes, batch
#                            64) for i8, u8, i8:i32 and e4m3, alternating, then every test
#   gpu_session36.sh floats  every depthwise shape of suite_dw.json in bf16 and f16 against
#                            cuDNN, and f32, e4m3, i8 alone (no tests)
#   gpu_session36.sh verify  dw_run's new defaults for i8 / u8 against the CPU reference, an A/B
#                            of them against the old ones (XCONV_DW_RUN2=0 XCONV_DW_PIPE=1), then
#                            every test
# Logs go to $OUT.
set -u
cd "$(dirname "$0")/.."
O=${OUT:-/tmp}
export LD_LIBRARY_PATH=$PWD/devcarry/rt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B="bench/run_cuda_bench.sh --build devcarry --suite tests/gpu/suite_dw.json"
nvidia-smi --query-gpu=name --format=csv,noheader
row() { grep -E "^dw_" "$1" | awk '{print $1":"$2":"$6}' | paste -sd' '; }
MODE=${1:-verify}
if [ "$MODE" = ab ]; then
    for v in base "XCONV_DW_RUN2=1 XCONV_DW_PIPE=0" XCONV_DW_RUN2=1 XCONV_DW_PIPE=0 base \
        "XCONV_DW_RUN2=1 XCONV_DW_PIPE=0" XCONV_DW_RUN2=1; do
        env $([ "$v" = base ] || echo $v) timeout 40 $B --reps 5 --budget 1 --peers none \
            --dtype i8,u8,i8:i32,f8e4m3 >$O/ab.txt 2>&1
        echo "== $v"; row $O/ab.txt
    done
fi
if [ "$MODE" = verify ]; then
    XCONV_GPU_TEST_ONLY=cuda.depthwise XCONV_GPU_TEST_SPECIAL=1500 timeout 60 devcarry/test_gpu \
        >$O/test_dw.txt 2>&1
    echo "defaults: $(tail -1 $O/test_dw.txt)"; grep FAIL $O/test_dw.txt | head -5
    for v in base "XCONV_DW_RUN2=0 XCONV_DW_PIPE=1" base "XCONV_DW_RUN2=0 XCONV_DW_PIPE=1"; do
        env $([ "$v" = base ] || echo $v) timeout 35 $B --reps 5 --budget 1 --peers none \
            --dtype i8,u8,i8:i32 >$O/ab.txt 2>&1
        echo "== $v"; row $O/ab.txt
    done
fi
if [ "$MODE" = floats ]; then
    timeout 60 $B --reps 5 --budget 1 --dtype bf16,f16 >$O/dw_cudnn.txt 2>&1
    grep -E "^dw_|^name" $O/dw_cudnn.txt | cut -c1-120
    timeout 40 $B --reps 5 --budget 1 --peers none --dtype f32,f8e4m3,i8 >$O/dw_other.txt 2>&1
    grep -E "^dw_" $O/dw_other.txt | cut -c1-90
    exit 0
fi
timeout 190 devcarry/test_gpu >$O/test_gpu.txt 2>&1
tail -1 $O/test_gpu.txt; grep FAIL $O/test_gpu.txt | head -5
