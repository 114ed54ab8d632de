#!/usr/bin/env bash
# run_cuda_bench.sh — runs `xconv bench --device cuda` on a machine where cuDNN and cuBLAS
# ship inside PyTorch's Python environment (the device machine), with a build made elsewhere:
#
#   bench/run_cuda_bench.sh [--build DIR] [xconv bench options ...]
#
# Puts on LD_LIBRARY_PATH: DIR/rt (libraries carried with the build: libcjson, libcudart),
# the lib folders of the Python `nvidia` wheels (cudnn, cublas, cu13, ...) and the CUDA
# toolkit's; sets XCONV_CUDNN_LIB to the cudnn wheel's folder; then runs
# DIR/xconv bench --device cuda with the rest of the arguments. DIR defaults to build-cb.
set -u
cd "$(dirname "$0")/.."
BUILD=build-cb
if [ "${1:-}" = "--build" ]; then BUILD=$2; shift 2; fi
paths="$PWD/$BUILD/rt"
root=$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null || true)
if [ -n "$root" ]; then
    for d in "$root"/*/lib; do [ -d "$d" ] && paths="$paths:$d"; done
    [ -z "${XCONV_CUDNN_LIB:-}" ] && [ -d "$root/cudnn/lib" ] && export XCONV_CUDNN_LIB="$root/cudnn/lib"
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && paths="$paths:$d"; done
export LD_LIBRARY_PATH="$paths${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$BUILD/xconv" bench --device cuda "$@"
