#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: run the CUDA tests against the real driver under the checkers
# that CI can only run against the fake libcuda.
#   1. AddressSanitizer + UndefinedBehaviorSanitizer (host code: the server, copy threads,
#      staging ring, pinned pool, kernel cache) with the GPU and conformance tests on cuda:0;
#   2. compute-sanitizer memcheck with leak checking (device code and driver API use: every
#      kernel the tests launch, every device allocation freed by the end of each test binary).
# Logs go to $OUT (when set) or build/gpu-sanitize/out; a short table is printed last.
#   3. ThreadSanitizer (copy threads, staging ring, actor channel, event profiler) with the
#      transfer tests and the threaded conformance cases on cuda:0.
# Usage: scripts/gpu-sanitize.sh [asan|memcheck|tsan|all] (default all).
# To split a run (the GPU machine allows 10 minutes per command): GPU_SANITIZE_TESTS and
# GPU_SANITIZE_TSAN_TESTS replace the test lists, GPU_SANITIZE_CONFORMANCE=0 skips the suite,
# GPU_SANITIZE_CONF_FILTER narrows it (a gtest filter; default every cuda:0 case).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
MODE=${1:-all}
case "$MODE" in
  asan | memcheck | tsan | all) ;;
  *)
    echo "usage: scripts/gpu-sanitize.sh [asan|memcheck|tsan|all] (got '$MODE')" >&2
    exit 2
    ;;
esac
LOGS=${OUT:-$ROOT/build/gpu-sanitize/out}
mkdir -p "$LOGS"
DEPS=$ROOT/.deps/usr
JOBS=$(nproc 2>/dev/null || echo 4)
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:$DEPS/lib:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
declare -a SUMMARY=()
note() { echo "gpu-sanitize: $*"; SUMMARY+=("$*"); }
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
GPU_TESTS=(cuda_gpu_test cuda_transfer_test cuda_pinned_pool_test cuda_kernel_cache_test cuda_autotune_test cuda_wait_test
  cubert_cuda_robustness_tests cuda_fault_test cuda_stream_test cuda_streams_test cuda_profile_test)
TSAN_TESTS=(cuda_transfer_test cuda_pinned_pool_test cuda_fault_test cuda_profile_test cuda_wait_test
  cuda_streams_test)
[ -n "${GPU_SANITIZE_TESTS:-}" ] && read -r -a GPU_TESTS <<<"$GPU_SANITIZE_TESTS"
[ -n "${GPU_SANITIZE_TSAN_TESTS:-}" ] && read -r -a TSAN_TESTS <<<"$GPU_SANITIZE_TSAN_TESTS"
CONFORMANCE=${GPU_SANITIZE_CONFORMANCE:-1}
TARGETS=("${GPU_TESTS[@]}" cubert_conformance_tests)
CONF_FILTER=${GPU_SANITIZE_CONF_FILTER:-'*cuda0*'}

configure_build() {  # dir, extra cmake args...
  local dir=$1
  shift
  cmake -S "$ROOT" -B "$dir" "${GEN[@]}" -DCUBERT_BUILD_CUDA=ON -DCUBERT_BUILD_TESTS=ON \
    -DCUBERT_BUILD_BENCHMARKS=OFF -DCMAKE_PREFIX_PATH="$DEPS" \
    -DCUBERT_XXHASH_INCLUDE_DIR="$DEPS/include" "$@" >"$LOGS/$(basename "$dir")-configure.log" 2>&1 &&
    cmake --build "$dir" -j "$JOBS" --target "${TARGETS[@]}" >"$LOGS/$(basename "$dir")-build.log" 2>&1
}

# The binary of test target $2 in build directory $1 (tests/unit/<area>/<target>).
test_bin() { find "$1/tests/unit" -type f -name "$2" -perm -u+x | head -1; }

# Runs one test binary; records pass/fail and the checker's findings.
run_checked() {  # label, log, command...
  local label=$1 log=$2
  shift 2
  if timeout 540 "$@" >"$log" 2>&1; then
    note "$label: clean ($(grep -Eo '\[  PASSED  \] [0-9]+ tests?' "$log" | tail -1), $(grep -c '\[  SKIPPED \]' "$log") skipped)"
  else
    note "$label: FAILED (rc $?, see $(basename "$log"))"
    grep -E 'WARNING: ThreadSanitizer|ERROR: AddressSanitizer|runtime error|========= (Invalid|Program hit|Leaked|ERROR)|\[  FAILED  \]' \
      "$log" | sort | uniq -c | head -12
  fi
}

if ! nvidia-smi -L >"$LOGS/nvidia-smi.txt" 2>&1; then
  note "no CUDA device: nothing to check here (the CI runs these tests on the fake driver)"
  exit 0
fi
note "device: $(head -1 "$LOGS/nvidia-smi.txt")"

if [ "$MODE" = asan ] || [ "$MODE" = all ]; then
  ASAN_DIR=$ROOT/build/gpu-asan
  if configure_build "$ASAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCUBERT_SANITIZE='address;undefined'; then
    # The driver maps device memory over the shadow gap that ASan protects by default, and keeps
    # allocations of its own until exit, which LeakSanitizer would report as ours.
    export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0:abort_on_error=0:halt_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    for t in "${GPU_TESTS[@]}"; do
      run_checked "asan+ubsan $t" "$LOGS/asan-$t.log" "$(test_bin "$ASAN_DIR" "$t")"
    done
    [ "$CONFORMANCE" = 1 ] && run_checked "asan+ubsan conformance cuda:0" "$LOGS/asan-conformance.log" \
      "$ASAN_DIR/tests/conformance/cubert_conformance_tests" "--gtest_filter=$CONF_FILTER"
    unset ASAN_OPTIONS UBSAN_OPTIONS
  else
    note "asan build FAILED (see gpu-asan-build.log)"
    grep -E 'error' "$LOGS/gpu-asan-build.log" | head -10
  fi
fi

if [ "$MODE" = memcheck ] || [ "$MODE" = all ]; then
  if ! command -v compute-sanitizer >/dev/null; then
    note "compute-sanitizer not found: memcheck skipped"
  else
    MC_DIR=$ROOT/build/gpu-memcheck
    if configure_build "$MC_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo; then
      # --error-exitcode makes a finding fail the run; cuda_fault_test provokes device faults
      # on purpose (memcheck would report exactly those), so it is left out here.
      MC=(compute-sanitizer --tool memcheck --leak-check full --error-exitcode 86
        --report-api-errors no)
      # Tests that re-execute the binary (death tests, the at-exit check) start a child under
      # memcheck, which takes minutes; outside cuda_fault_test they check a configuration error
      # that never reaches the device, a static client's teardown at exit, and host allocations
      # failing while a server is built.
      for t in "${GPU_TESTS[@]}"; do
        [ "$t" = cuda_fault_test ] && continue
        GTEST_FILTER='-CudaBadConfiguration.*:CudaModuleAtExit.*:CudaServerConstruction.*' \
          run_checked "memcheck $t" "$LOGS/memcheck-$t.log" \
          "${MC[@]}" "$(test_bin "$MC_DIR" "$t")"
      done
      [ "$CONFORMANCE" = 1 ] && run_checked "memcheck conformance cuda:0" "$LOGS/memcheck-conformance.log" "${MC[@]}" \
        "$MC_DIR/tests/conformance/cubert_conformance_tests" "--gtest_filter=$CONF_FILTER"
    else
      note "memcheck build FAILED (see gpu-memcheck-build.log)"
    fi
  fi
fi

if [ "$MODE" = tsan ] || [ "$MODE" = all ]; then
  TSAN_DIR=$ROOT/build/gpu-tsan
  if configure_build "$TSAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUBERT_SANITIZE=thread; then
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/tests/tsan.supp"
    for t in "${TSAN_TESTS[@]}"; do
      run_checked "tsan $t" "$LOGS/tsan-$t.log" "$(test_bin "$TSAN_DIR" "$t")"
    done
    [ "$CONFORMANCE" = 1 ] && run_checked "tsan conformance cuda:0" "$LOGS/tsan-conformance.log" \
      "$TSAN_DIR/tests/conformance/cubert_conformance_tests" "--gtest_filter=$CONF_FILTER"
    unset TSAN_OPTIONS
  else
    note "tsan build FAILED (see gpu-tsan-build.log)"
  fi
fi

echo
echo "==================== gpu-sanitize summary ===================="
printf '%s\n' "${SUMMARY[@]}"
# A finding, a build that failed or a run of no tests is a failure of the script too.
# shellcheck source=lib/summary-gate.sh
source "$ROOT/scripts/lib/summary-gate.sh"
if printf '%s\n' "${SUMMARY[@]}" | summary_says_failed; then
  exit 1
fi
