#!/usr/bin/env bash
# gpu_carry.sh — builds, on a machine with nvcc but no GPU, what a device run needs, so that the
# device's time goes to running rather than compiling: the CUDA build in build-cb/ (xconv with
# the cuDNN peer, test_gpu; no CPU peers), then devcarry/ (git-ignored by .git/info/exclude)
# with those two programs and rt/ (libcjson, libcudart, which the device image may lack).
#
#   scripts/gpu_carry.sh
#   # on the device (carry devcarry):
#   LD_LIBRARY_PATH=$PWD/devcarry/rt devcarry/test_gpu
#   bench/run_cuda_bench.sh --build devcarry --suite tests/gpu/suite_gpu.json --dtype bf16 ...
set -eu
cd "$(dirname "$0")/.."
cmake -S . -B build-cb -DCMAKE_BUILD_TYPE=Release -DXCONV_BENCH_ONEDNN=OFF -DXCONV_BENCH_XNNPACK=OFF >/dev/null
cmake --build build-cb -j"$(nproc)" --target xconv_cli test_gpu >/dev/null
grep -qx '/devcarry/' .git/info/exclude 2>/dev/null || echo '/devcarry/' >>.git/info/exclude
rm -rf devcarry && mkdir -p devcarry/rt
cp build-cb/xconv build-cb/tests/test_gpu devcarry/
for lib in libcjson.so.1 libcudart.so.13; do
    path=$(ldd devcarry/xconv devcarry/test_gpu | awk -v l="$lib" '$1 == l {print $3; exit}')
    if [ -n "$path" ]; then cp -L "$path" devcarry/rt/; fi
done
du -sh devcarry
