#!/usr/bin/env bash
# gpu_test.sh — the GPU test suite in one command, for a machine with an NVIDIA GPU, nvcc and
# CMake (the device machine):
#
#   scripts/gpu_test.sh            build (build-gpu/), every test program, a compute-sanitizer
#                                  memcheck pass over a reduced GPU run
#   scripts/gpu_test.sh --bench    the same, then scripts/gpu_bench.py (xconv vs cuDNN)
#
# Environment: BUILD (build folder, default build-gpu), JOBS (default nproc), OUT (if set,
# the logs in $BUILD/logs are copied there as logs.tgz), BENCH_ARGS (extra arguments for gpu_bench.py).
# Exit status: 0 when every test program and the sanitizer pass succeeded.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
JOBS=${JOBS:-$(nproc)}
LOG=$BUILD/logs
mkdir -p "$BUILD" "$LOG"
fail=0

echo "== build ($BUILD)"
# The library and the GPU test must build; the other programs are built where they can be
# (make -k), so a broken CPU test elsewhere does not hide the GPU results.
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -G "Unix Makefiles" >"$LOG/configure.log" 2>&1 &&
       cmake --build "$BUILD" -j"$JOBS" --target xconv_shared xconv_static test_gpu >"$LOG/build.log" 2>&1; }; then
    tail -40 "$LOG/configure.log" "$LOG/build.log"
    exit 1
fi
cmake --build "$BUILD" -j"$JOBS" -- -k >>"$LOG/build.log" 2>&1 || { fail=1; echo "some targets failed to build:"; grep -m 10 -E "error|Error" "$LOG/build.log"; }
grep -i "cuda backend" "$LOG/configure.log"

echo "== tests"
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    timeout 150 "$t" >"$LOG/$name.log" 2>&1
    rc=$?
    tail -1 "$LOG/$name.log"
    if [ $rc -ne 0 ]; then
        fail=1
        grep -m 10 FAIL "$LOG/$name.log"
    fi
done

echo "== compute-sanitizer memcheck (XCONV_GPU_TEST_QUICK=1)"
if command -v compute-sanitizer >/dev/null; then
    XCONV_GPU_TEST_QUICK=1 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 3 \
        "$BUILD/tests/test_gpu" >"$LOG/memcheck.log" 2>&1
    rc=$?
    tail -3 "$LOG/memcheck.log"
    [ $rc -eq 0 ] || { fail=1; echo "memcheck exit status $rc"; grep -m 20 -E "=========" "$LOG/memcheck.log"; }
else
    echo "compute-sanitizer not found: skipped"
fi

if [ "${1:-}" = "--bench" ]; then
    echo "== bench"
    python3 scripts/gpu_bench.py --lib "$BUILD/libxconv.so" --json "$LOG/bench.json" ${BENCH_ARGS:-}
fi
[ -n "${OUT:-}" ] && tar czf "$OUT/logs.tgz" -C "$BUILD" logs
echo "== gpu_test: $([ $fail -eq 0 ] && echo PASSED || echo FAILED)"
exit $fail
