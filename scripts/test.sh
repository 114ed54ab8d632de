#!/usr/bin/env bash
# scripts/test.sh — installs what the tests need, builds, and runs every test:
#   1. release build (gcc, warnings as errors; CUDA compiled too when nvcc is present),
#      every C test, the Python oracle tests (PyTorch, outside vectors), the CLI tests,
#      and an install + find_package/pkg-config consumer check;
#   2. a clang build, warnings as errors;
#   3. the C tests and CLI tests again under AddressSanitizer + UndefinedBehaviorSanitizer;
#   4. the libFuzzer targets (validation boundary, npy reader), briefly.
# Ends with the line "N passed, N failed" (each test program's checks summed; a stage that
# fails to build counts as one failure). Options: --quick skips stages 2-4.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
FUZZ_SECONDS=${XCONV_FUZZ_SECONDS:-30}
JOBS=$(nproc 2>/dev/null || echo 2)

# ---- dependencies ------------------------------------------------------------------------
PKGS="cmake make gcc clang pkg-config python3 python3-numpy python3-torch libclang-rt-14-dev libcjson-dev libdnnl-dev libxnnpack-dev libpthreadpool-dev"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    echo "== installing:$missing"
    if [ "$(id -u)" = 0 ]; then
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
    else
        sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
    fi
fi
PY=/usr/bin/python3

TOTAL_PASS=0
TOTAL_FAIL=0
LOG_DIR=$ROOT/build-test-logs
mkdir -p "$LOG_DIR"

# Runs one test command; adds the "N passed, N failed" of its output to the totals, or one
# failure when it printed none or exited non-zero without a failure count.
run_test() {
    local name=$1; shift
    local log="$LOG_DIR/$name.log"
    local start=$(date +%s)
    "$@" >"$log" 2>&1
    local rc=$?
    local line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    local p=0 f=0
    if [ -n "$line" ]; then
        p=$(echo "$line" | sed -E 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\1/')
        f=$(echo "$line" | sed -E 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\2/')
    fi
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
    if [ -z "$line" ] && [ "$rc" = 0 ]; then f=1; echo "   (no result line)" >>"$log"; fi
    TOTAL_PASS=$((TOTAL_PASS + p))
    TOTAL_FAIL=$((TOTAL_FAIL + f))
    printf '%-34s %6d passed, %4d failed  (%ss)\n' "$name" "$p" "$f" "$(( $(date +%s) - start ))"
    if [ "$f" != 0 ]; then
        echo "---- $name (last lines of $log)"; tail -n 30 "$log"; echo "----"
    fi
}

# Builds a configuration; a failed build counts as one failure.
build() {
    local dir=$1; shift
    local log="$LOG_DIR/build-$(basename "$dir").log"
    if cmake -S "$ROOT" -B "$dir" "$@" >"$log" 2>&1 && cmake --build "$dir" -j"$JOBS" >>"$log" 2>&1; then
        echo "built $(basename "$dir")"
        return 0
    fi
    echo "BUILD FAILED: $dir"; tail -n 40 "$log"
    TOTAL_FAIL=$((TOTAL_FAIL + 1))
    return 1
}

run_c_tests() {
    local dir=$1 tag=$2
    for t in "$dir"/tests/test_*; do
        [ -x "$t" ] || continue
        run_test "$tag$(basename "$t")" "$t"
    done
}

run_py_tests() {
    local dir=$1 tag=$2
    for t in "$ROOT"/tests/oracle/test_*.py; do
        [ -f "$t" ] || continue
        run_test "$tag$(basename "$t" .py)" env XCONV_LIB="$dir/libxconv.so" "$PY" "$t" "$dir"
    done
}

# Runs one libFuzzer target for FUZZ_SECONDS; a crash or leak makes it exit non-zero.
fuzz_one() {
    local bin=$1; shift
    local out
    out=$("$bin" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 "$@" 2>&1)
    local rc=$?
    echo "$out" | tail -n 40
    local runs=$(echo "$out" | grep -E 'stat::number_of_executed_units' | awk '{print $2}')
    [ "$rc" = 0 ] || return 1
    echo "$(basename "$bin"): ${runs:-0} executions"
    echo "$(basename "$bin"): 1 passed, 0 failed"
}

install_check() {
    local dir=$1 prefix
    prefix=$(mktemp -d)
    cmake --install "$dir" --prefix "$prefix" >/dev/null || { echo "install failed"; return 1; }
    local src=$(mktemp -d)
    cat >"$src/main.c" <<'C'
#include <xconv.h>
#include <stdio.h>
int main(void) { printf("xconv %s\n", xconv_version()); return 0; }
C
    cat >"$src/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(xconv REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE xconv::xconv)
C
    cmake -S "$src" -B "$src/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null &&
        cmake --build "$src/build" >/dev/null &&
        LD_LIBRARY_PATH="$prefix/lib:$prefix/lib64:$prefix/lib/x86_64-linux-gnu" "$src/build/consumer" || return 1
    local pc=$(find "$prefix" -name xconv.pc | head -n 1)
    PKG_CONFIG_PATH=$(dirname "$pc") gcc "$src/main.c" -o "$src/pc_consumer" \
        $(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs xconv) &&
        LD_LIBRARY_PATH=$(dirname "$(dirname "$pc")") "$src/pc_consumer" || return 1
    echo "install_check: 2 passed, 0 failed"
}

echo "== 1. release build (gcc)"
if build "$ROOT/build-release" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc -DXCONV_WERROR=ON; then
    run_c_tests "$ROOT/build-release" ""
    run_py_tests "$ROOT/build-release" ""
    [ -f tests/cli/test_cli.py ] && run_test test_cli "$PY" tests/cli/test_cli.py "$ROOT/build-release"
    run_test install_check install_check "$ROOT/build-release"
fi

if [ "$QUICK" = 0 ]; then
    echo "== 2. clang build, warnings as errors"
    build "$ROOT/build-clang" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DXCONV_WERROR=ON \
        -DXCONV_CUDA=OFF && echo "clang_build: 1 passed, 0 failed" >"$LOG_DIR/clang.log" &&
        run_test clang_build cat "$LOG_DIR/clang.log"

    echo "== 3. ASan + UBSan"
    if build "$ROOT/build-asan" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=gcc -DXCONV_SANITIZE=ON \
        -DXCONV_CUDA=OFF; then
        export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
        run_c_tests "$ROOT/build-asan" "asan:"
        [ -f tests/cli/test_cli.py ] && run_test asan:test_cli "$PY" tests/cli/test_cli.py "$ROOT/build-asan"
        unset ASAN_OPTIONS UBSAN_OPTIONS
    fi

    echo "== 4. fuzzing (${FUZZ_SECONDS}s per target)"
    if build "$ROOT/build-fuzz" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DXCONV_FUZZ=ON \
        -DXCONV_SANITIZE=ON -DXCONV_TESTS=OFF -DXCONV_CUDA=OFF; then
        for f in "$ROOT"/build-fuzz/fuzz/fuzz_*; do
            [ -x "$f" ] || continue
            name=$(basename "$f")
            corpus="$ROOT/build-fuzz/corpus_$name"
            mkdir -p "$corpus"
            seeds="$ROOT/tests/fuzz/corpus_${name#fuzz_}"
            [ -d "$seeds" ] || seeds=""
            run_test "$name" fuzz_one "$f" "$corpus" $seeds
        done
    fi
fi

echo
echo "$TOTAL_PASS passed, $TOTAL_FAIL failed"
[ "$TOTAL_FAIL" = 0 ]
