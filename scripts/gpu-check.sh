#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and the CUDA toolkit: build cubert with CUDA and OpenCL
# (Release, with benchmarks), run the unit, GPU, OpenCL and conformance tests, run the CUDA
# benchmarks (with PyTorch's allocator as a baseline when the machine's Python has torch) and the
# OpenCL ones on NVIDIA's OpenCL, and print a short table last.
# Logs go to $OUT (when set) or build/gpu-check/out. Without a GPU it builds and runs what it can
# and says "no CUDA device". Extra configure arguments: CUBERT_GPU_CMAKE_ARGS. Exits 1 when a
# build, a test, a benchmark or the CLI failed (after the whole summary); unmet benchmark targets
# and a missing PyTorch baseline do not.
# The whole takes more than the lent GPU machine's 10 minutes per command: there, run it as four
# calls on the warm machine (the build stays): CUBERT_GPU_ONLY=tests, then python (a wheel and
# the Python tests, scripts/gpu-python.sh), then bench (the CUDA, CPU and OpenCL benchmarks),
# then ops (the kernel library against its peers). CUBERT_GPU_ONLY=build
# only builds (for scripts/gpu-tune-cold.sh on a fresh machine); CUBERT_GPU_ONLY=opencl builds
# the OpenCL targets alone and runs their tests, the opencl:0 conformance cases and the OpenCL
# benchmark, in one call.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${CUBERT_GPU_BUILD:-$ROOT/build/gpu-check}
LOGS=${OUT:-$BUILD/out}
mkdir -p "$BUILD" "$LOGS"
DEPS=$ROOT/.deps/usr
JOBS=$(nproc 2>/dev/null || echo 4)
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:$DEPS/lib:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
declare -a SUMMARY=()
note() { echo "gpu-check: $*"; SUMMARY+=("$*"); }
ONLY=${CUBERT_GPU_ONLY:-all}
case "$ONLY" in all | build | tests | python | bench | ops | opencl) ;; *) echo "CUBERT_GPU_ONLY: all, build, tests, python, bench, ops or opencl" >&2; exit 2 ;; esac
want() { [ "$ONLY" = all ] || [ "$ONLY" = "$1" ]; }
# How long each stage took (seconds since the start), so that the whole stays within one call.
declare -a TIMES=()
stage() { TIMES+=("$1 ${SECONDS}s"); }

# 0. toml++ as a shared library: .deps may hold only the headers and a dangling .so link; build
# the library from its headers (toml++ is header-only at heart) when that is the case.
TOML_SO=$DEPS/lib/x86_64-linux-gnu/libtomlplusplus.so
if [ ! -e "$TOML_SO" ] && [ -f "$DEPS/include/toml++/toml.h" ]; then
  mkdir -p "$(dirname "$TOML_SO")"
  printf '#define TOML_IMPLEMENTATION\n#include <toml++/toml.h>\n' >"$BUILD/toml_impl.cpp"
  if g++ -shared -fPIC -O2 -std=c++17 -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1 -I"$DEPS/include" \
      "$BUILD/toml_impl.cpp" -Wl,-soname,libtomlplusplus.so.3 -o "$TOML_SO.3" 2>"$LOGS/toml.log"; then
    rm -f "$TOML_SO" && ln -s libtomlplusplus.so.3 "$TOML_SO"
    note "built libtomlplusplus.so.3 from the toml++ headers (it was missing from .deps)"
  else
    note "toml++ library missing from .deps and could not be built (see $LOGS/toml.log)"
  fi
fi

# 1. Device.
if command -v nvidia-smi >/dev/null && nvidia-smi -L >"$LOGS/nvidia-smi.txt" 2>&1; then
  note "device: $(head -1 "$LOGS/nvidia-smi.txt")"
  HAVE_GPU=1
else
  note "no CUDA device (nvidia-smi: $(head -1 "$LOGS/nvidia-smi.txt" 2>/dev/null || echo absent)); GPU tests will skip, benchmarks will not run"
  HAVE_GPU=0
fi

# 1b. OpenCL: the ICD loader may come from .deps (ocl-icd-libopencl1, on LD_LIBRARY_PATH above).
# Where NVIDIA's OpenCL library is installed, the loader is pointed at it alone (ocl-icd's
# OCL_ICD_VENDORS takes a library), so that opencl:0 is the GPU whatever else is installed (PoCL,
# which CI tests). Nothing under /etc is written.
NV_OPENCL=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so\.1/ {print $NF; exit}')
for d in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu; do
  [ -z "$NV_OPENCL" ] && [ -e "$d/libnvidia-opencl.so.1" ] && NV_OPENCL=$d/libnvidia-opencl.so.1
done
if [ -n "$NV_OPENCL" ]; then
  export OCL_ICD_VENDORS=$NV_OPENCL
  note "OpenCL: the ICD loader is given NVIDIA's $NV_OPENCL alone"
else
  note "OpenCL: no libnvidia-opencl.so.1 on this host; opencl:0 is what the ICD loader lists"
fi

# 2. Configure and build.
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
if ! cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCUBERT_BUILD_CUDA=ON -DCUBERT_BUILD_BENCHMARKS=ON -DCUBERT_BUILD_TESTS=ON \
    -DCMAKE_PREFIX_PATH="$DEPS" -DCUBERT_XXHASH_INCLUDE_DIR="$DEPS/include" \
    ${CUBERT_GPU_CMAKE_ARGS:-} >"$LOGS/configure.log" 2>&1; then
  tail -20 "$LOGS/configure.log"
  note "configure FAILED (see $LOGS/configure.log)"
  exit 1
fi
grep -q 'CUDA backend ON' "$LOGS/configure.log" && note "CUDA backend: ON" ||
  note "CUDA backend: OFF (no toolkit found): only CPU parts are checked"
grep -q 'OpenCL backend ON' "$LOGS/configure.log" && note "OpenCL backend: ON" ||
  note "OpenCL backend: OFF (no CL/cl.h found)"
# CUBERT_GPU_ONLY=opencl builds what the OpenCL backend's check needs and nothing else, so that
# build, tests, conformance and benchmark fit one call on a fresh machine.
TARGETS=()
[ "$ONLY" = opencl ] && TARGETS=(--target opencl_test opencl_probe opencl_autotune_test
  cubert_conformance_tests cubert_opencl_bench cubert_cli)
if ! cmake --build "$BUILD" -j "$JOBS" "${TARGETS[@]}" >"$LOGS/build.log" 2>&1; then
  grep -E 'error|FAILED' "$LOGS/build.log" | head -20
  note "full build FAILED (see $LOGS/build.log); building the CUDA targets alone"
  cmake --build "$BUILD" -j "$JOBS" --target cuda_unit_test cuda_gpu_test cuda_fault_test cuda_stream_test cuda_cache_probe \
    cuda_transfer_test cuda_kernel_cache_test cuda_profile_test cuda_wait_test cubert_fake_cuda cuda_bench >>"$LOGS/build.log" 2>&1 ||
    note "CUDA targets FAILED to build"
fi

stage "build"
# 3. Tests: unit + gpu + opencl labels, then the conformance suite.
# In the opencl mode: the opencl label and the conformance cases on opencl:0 alone.
TEST_LABELS='gpu|unit|opencl'
CONF_ARGS=(-L conformance)
[ "$ONLY" = opencl ] && TEST_LABELS=opencl && CONF_ARGS=(-L conformance -R opencl0_)
if want tests || [ "$ONLY" = opencl ]; then
  (cd "$BUILD" && ctest -L "$TEST_LABELS" -j "$JOBS" --output-on-failure --timeout 600) \
    >"$LOGS/tests.log" 2>&1
  TEST_LINE=$(grep -E 'tests passed|tests failed' "$LOGS/tests.log" | tail -1)
  SKIPPED=$(grep -c '(Skipped)' "$LOGS/tests.log")
  note "tests (unit|gpu|opencl): ${TEST_LINE:-none ran}; skipped: $SKIPPED"
  grep -E '^\s+[0-9]+ - .*\((Failed|SEGFAULT|Timeout|Subprocess aborted|Exception)' "$LOGS/tests.log" | head -20
  # What a failing test printed, here too: the logs that come back from a lent machine are few.
  awk '/Test +#[0-9]+: .*\*\*\*(Failed|Exception|Timeout)|Test +#[0-9]+: .*(SEGFAULT|Subprocess aborted)/ {n = 60}
       /^ *[0-9]+\/[0-9]+ Test +#/ && !/\*\*\*(Failed|Exception|Timeout)|SEGFAULT|Subprocess aborted/ {n = 0}
       n > 0 {print "  | " $0; n--}' "$LOGS/tests.log" | head -200
  # The OpenCL cases the issue names on the device itself (NVIDIA's OpenCL here): autotune with
  # marker timing and the pinned staging, each counted as passed / run.
  for suite in OpenclAutotuneTest OpenclStaging; do
    RUN=$(grep -cE "Test +#[0-9]+: [A-Za-z/]*$suite\." "$LOGS/tests.log")
    PASSED=$(grep -E "Test +#[0-9]+: [A-Za-z/]*$suite\." "$LOGS/tests.log" | grep -c ' Passed')
    note "$suite on opencl:0: $PASSED of $RUN passed"
  done
  (cd "$BUILD" && ctest "${CONF_ARGS[@]}" --output-on-failure --timeout 600) \
    >"$LOGS/conformance.log" 2>&1
  CONF_LINE=$(grep -E 'tests passed|tests failed|No tests were found' "$LOGS/conformance.log" | tail -1)
  CONF_SKIPPED=$(grep -c '(Skipped)' "$LOGS/conformance.log")
  note "conformance: ${CONF_LINE:-none ran}; skipped: $CONF_SKIPPED (each with its written reason in $LOGS/conformance.log)"
else
  note "tests: not run (CUBERT_GPU_ONLY=$ONLY)"
fi
stage "tests"
# 3a. The Python package: a wheel built here by the machine's Python, its tests (PyTorch's too).
if want python; then
  PY_LINE=$(bash "$ROOT/scripts/gpu-python.sh" | tail -1)
  note "$PY_LINE"
fi
stage "python"
# 3b. The command-line tool on the device: lists it, and runs and checks kernels on cuda:0
# through both channels that CUDA serves.
CLI=$BUILD/tools/cubert/cubert
if [ -x "$CLI" ]; then
  "$CLI" devices >"$LOGS/cli.log" 2>&1 || note "cubert devices FAILED (see $LOGS/cli.log)"
  if [ "$HAVE_GPU" = 1 ]; then
    CLI_OK=1
    for ch in mutex actor; do
      "$CLI" run --device cuda:0 --channel "$ch" >>"$LOGS/cli.log" 2>&1 || CLI_OK=0
    done
    CHECKS=$(grep -c 'all checks passed' "$LOGS/cli.log")
    [ "$CLI_OK" = 1 ] && note "cubert run --device cuda:0: $CHECKS of 2 channels, all checks passed" ||
      note "cubert run --device cuda:0 FAILED (see $LOGS/cli.log)"
  fi
  OCL_NAME=$(awk '$1 == "opencl:0" {for (i = 9; i <= NF; ++i) printf "%s ", $i}' "$LOGS/cli.log")
  if [ -n "$OCL_NAME" ]; then
    if "$CLI" run --device opencl:0 >"$LOGS/cli-opencl.log" 2>&1; then
      note "cubert run --device opencl:0 ($OCL_NAME): all checks passed"
    else
      note "cubert run --device opencl:0 FAILED (see $LOGS/cli-opencl.log)"
    fi
  else
    note "OpenCL: no opencl:0 listed ($(grep '^opencl:' "$LOGS/cli.log" | head -1))"
  fi
else
  note "cubert CLI not built"
fi

stage "cli"
# Sections 4 to 4d: the benchmarks.
if want bench; then
# 4. Benchmarks.
TRACES=""
for d in "${CUBERT_TRACES:-}" "$ROOT/benchmarks/traces" "$ROOT/../shared/data/traces"; do
  [ -n "$d" ] && [ -d "$d" ] && TRACES=$d && break
done
[ -z "$TRACES" ] && note "no allocation traces found (set CUBERT_TRACES); replay rows skipped"
TORCH_RESULTS=""
if [ "$HAVE_GPU" = 1 ]; then
  TORCH_DIR=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))' 2>/dev/null)
  if [ -n "$TORCH_DIR" ] && [ -d "$TORCH_DIR/include" ]; then
    ABI=$(python3 -c 'import torch;print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
    if g++ -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI="$ABI" "$ROOT/benchmarks/cuda_torch_bench.cpp" \
        -I"$TORCH_DIR/include" -I"$TORCH_DIR/include/torch/csrc/api/include" -I/usr/local/cuda/include \
        -L"$TORCH_DIR/lib" -Wl,-rpath,"$TORCH_DIR/lib" -lc10_cuda -lc10 -ltorch_cpu \
        -o "$BUILD/cuda_torch_bench" >"$LOGS/torch-build.log" 2>&1; then
      TRACE_FILES=()
      # The files cuda_bench replays (plain or gzipped), so that each of its rows has a baseline.
      [ -n "$TRACES" ] && mapfile -t TRACE_FILES < <(find "$TRACES" -maxdepth 1 -type f \( -name '*.trace' -o -name '*.trace.gz' \) | sort)
      if "$BUILD/cuda_torch_bench" "${TRACE_FILES[@]}" >"$LOGS/torch.txt" 2>"$LOGS/torch.err"; then
        TORCH_RESULTS=$LOGS/torch.txt
        note "PyTorch baseline: measured with $TORCH_DIR"
      else
        note "PyTorch baseline: run FAILED (see $LOGS/torch.err); PyTorch rows skipped"
      fi
      # Its streams (cuda_bench's streams rows), appended to the same "key value" file.
      if g++ -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI="$ABI" "$ROOT/benchmarks/cuda_torch_streams_bench.cpp" \
          -I"$TORCH_DIR/include" -I"$TORCH_DIR/include/torch/csrc/api/include" -I/usr/local/cuda/include \
          -L"$TORCH_DIR/lib" -Wl,-rpath,"$TORCH_DIR/lib" -L"$TORCH_DIR/../nvidia/cu13/lib" \
          -Wl,-rpath,"$TORCH_DIR/../nvidia/cu13/lib" -Wl,--no-as-needed -ltorch_cuda -ltorch_cpu \
          -lc10_cuda -lc10 -l:libcudart.so.13 -o "$BUILD/cuda_torch_streams_bench" >"$LOGS/torch-streams-build.log" 2>&1; then
        if [ -n "$TORCH_RESULTS" ] && "$BUILD/cuda_torch_streams_bench" >>"$TORCH_RESULTS" 2>"$LOGS/torch-streams.err"; then
          note "PyTorch streams baseline: measured"
        else
          note "PyTorch streams baseline: run FAILED (see $LOGS/torch-streams.err); its rows compare with 0"
        fi
      else
        note "PyTorch streams baseline: build FAILED (see $LOGS/torch-streams-build.log)"
      fi
    else
      note "PyTorch baseline: build FAILED (see $LOGS/torch-build.log); PyTorch rows skipped"
    fi
  else
    note "PyTorch baseline: no torch in python3; PyTorch rows skipped"
  fi
  BENCH=$BUILD/benchmarks/cuda_bench
  if [ -x "$BENCH" ]; then
    ARGS=()
    [ -n "$TRACES" ] && ARGS+=(--traces "$TRACES")
    [ -n "$TORCH_RESULTS" ] && ARGS+=(--torch "$TORCH_RESULTS")
    "$BENCH" "${ARGS[@]}" >"$LOGS/bench.log" 2>&1 || note "cuda_bench FAILED (see $LOGS/bench.log)"
    # A run that measured nothing would read as every target met.
    grep -q '^figure' "$LOGS/bench.log" || note "cuda_bench FAILED: no results table (see $LOGS/bench.log)"
  else
    note "cuda_bench was not built"
  fi
fi

stage "cuda_bench"
# 4b. CPU-side benchmarks on this (otherwise idle, many-core) host: launch overhead per channel
# against an OpenMP region, memory pool hits, autotune costs and winner stability.
CPU_BENCH=$LOGS/cpu-bench.log
: >"$CPU_BENCH"
GB_ARGS=(--benchmark_min_time=0.2 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true)
for b in cubert_launch_bench memory_bench tune_bench; do
  exe=$BUILD/benchmarks/$b
  [ -x "$exe" ] || { note "$b was not built"; continue; }
  filter=()
  [ "$b" = memory_bench ] && filter=(--benchmark_filter='pool_hit|cubecl_dynamic')
  echo "### $b" >>"$CPU_BENCH"
  "$exe" "${GB_ARGS[@]}" "${filter[@]}" >>"$CPU_BENCH" 2>&1 || note "$b FAILED (see $CPU_BENCH)"
done
if [ -x "$BUILD/benchmarks/tune_stability_bench" ]; then
  echo "### tune_stability_bench 20" >>"$CPU_BENCH"
  "$BUILD/benchmarks/tune_stability_bench" 20 >>"$CPU_BENCH" 2>&1 ||
    note "tune_stability_bench FAILED (see $CPU_BENCH)"
fi
# A family's process-level figures: its choices from fresh processes, the warm start, processes
# sharing the tuning of new keys (CPU; the warm start also on the GPU).
if [ -x "$BUILD/benchmarks/tune_family_bench" ]; then
  FAM=$BUILD/benchmarks/tune_family_bench
  for args in "stability --processes 10" "warm-start --processes 20" "share --processes 8" \
    "warm-start --processes 10 --device cuda:0 --dtype f16 --shape 4096x4096x4096"; do
    [[ "$args" == *cuda* ]] && [ "$HAVE_GPU" != 1 ] && continue
    echo "### tune_family_bench $args" >>"$CPU_BENCH"
    # shellcheck disable=SC2086
    "$FAM" $args >>"$CPU_BENCH" 2>&1 || note "tune_family_bench $args FAILED (see $CPU_BENCH)"
  done
fi
note "CPU benchmarks on this host ($(nproc) cores): see cpu-bench.log"
fi  # want bench
# 4c. The OpenCL backend against the raw OpenCL calls, where there is a device.
if { want bench || [ "$ONLY" = opencl ]; } && [ -n "${OCL_NAME:-}" ] && [ -x "$BUILD/benchmarks/cubert_opencl_bench" ]; then
  # Interleaved repetitions: the host's noise moved a row by a quarter between runs, so each
  # ratio compares rows measured in turns rather than one after the other.
  "$BUILD/benchmarks/cubert_opencl_bench" --benchmark_repetitions=5 --benchmark_min_time=0.2 \
    --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true >"$LOGS/opencl-bench.log" 2>&1 ||
    note "cubert_opencl_bench FAILED (see $LOGS/opencl-bench.log)"
fi

stage "cpu+opencl benches"
if want ops; then
# 4d. The kernel library on cuda:0 (its correctness ran with the tests above: cubert_ops_tests
# on every device): the tuned choices, the library's own kernels alone and with cuBLAS as a
# candidate, against cuBLAS (torch.matmul), torch's elementwise and reductions and a Triton
# matmul, all in this run.
OPS_TABLE=""
if [ "$HAVE_GPU" = 1 ] && [ -x "$CLI" ]; then
  PY=/opt/torch/.venv/bin/python
  [ -x "$PY" ] || PY=python3
  CUBLAS=$("$PY" -c 'import nvidia.cublas, os; d = os.path.join(list(nvidia.cublas.__path__)[0], "lib"); print(next(os.path.join(d, f) for f in sorted(os.listdir(d)) if f.startswith("libcublas.so")))' 2>/dev/null)
  [ -n "$CUBLAS" ] && export CUBERT_CUBLAS_LIBRARY=$CUBLAS
  export CUBERT_CACHE_DIR=$BUILD/ops-cache
  OPS_OK=1
  ops_bench() {  # name, then the bench arguments
    local name=$1; shift
    "$CLI" bench --device cuda:0 --repeat 20 --json "$@" >"$LOGS/ops-$name.json" 2>>"$LOGS/ops.log" ||
      { OPS_OK=0; echo "FAILED: cubert bench $*" >>"$LOGS/ops.log"; }
  }
  ops_bench mm-f32-own matmul --shape 4096x4096x4096 --shape 8192x8192x8192 --no-vendor
  ops_bench mm-f32 matmul --shape 4096x4096x4096 --shape 8192x8192x8192
  for dt in f16 bf16; do
    ops_bench "mm-$dt-own" matmul --dtype "$dt" --shape 4096x4096x4096 --shape 8192x8192x8192 --no-vendor
    ops_bench "mm-$dt" matmul --dtype "$dt" --shape 8192x8192x8192
  done
  # The f32 sweep: skinny (M or N ≤ 16), K = 16, shapes that divide no tile, model shapes; its
  # ratios are against cuBLAS run by `cubert bench` itself on the same inputs.
  SWEEP=(1x4096x4096 8x4096x4096 16x4096x4096 12x12288x4096 4096x16x4096 16x16x4096
    4096x4096x16 8192x8192x16 1024x1024x16 1000x1000x1000 1023x1025x1027 333x777x999
    2000x3000x1000 3000x2000x4000 4095x4097x4099 4096x4096x4096 6144x6144x6144 2048x2048x2048
    1024x1024x1024 512x512x512 256x256x256 128x8192x1024 8192x128x1024 4096x4096x256
    1536x6144x1536 4096x11008x4096 4096x4096x11008 8192x1000x8192 2048x8192x2048 3072x768x3072)
  SWEEP_ARGS=()
  for s in "${SWEEP[@]}"; do SWEEP_ARGS+=(--shape "$s"); done
  ops_bench sweep-own matmul "${SWEEP_ARGS[@]}" --no-vendor --budget 4s
  ops_bench sweep matmul "${SWEEP_ARGS[@]}" --budget 2s
  ops_bench add add --shape 67108864
  ops_bench sum sum --shape 67108864 --layout all
  ops_bench rowsum sum --shape 8192x8192
  # The portable kernels on NVIDIA's OpenCL (opencl:0 is the GPU here, see 1b), against cuBLAS.
  if [ -n "${OCL_NAME:-}" ]; then
    "$CLI" bench --device opencl:0 --repeat 20 --json matmul --shape 4096x4096x4096 \
      >"$LOGS/ops-opencl-mm-f32.json" 2>>"$LOGS/ops.log" ||
      { OPS_OK=0; echo "FAILED: cubert bench --device opencl:0 matmul" >>"$LOGS/ops.log"; }
  fi
  # Cold tuning of the f16 4096³ matmul over the Hopper family's space (empty tune and kernel
  # caches), beside Triton's cold eight-configuration autotune in the peers script below; then
  # the chosen kernel benched from the warm cache.
  COLD=$BUILD/tune-cold
  rm -rf "$COLD"
  CUBERT_CACHE_DIR=$COLD "$CLI" tune --device cuda:0 --json --explain matmul --dtype f16 \
    --shape 4096x4096x4096 >"$LOGS/tune-f16-cold.json" 2>>"$LOGS/ops.log" ||
    { OPS_OK=0; echo "FAILED: cold cubert tune f16" >>"$LOGS/ops.log"; }
  CUBERT_CACHE_DIR=$COLD "$CLI" bench --device cuda:0 --repeat 20 --json matmul --dtype f16 \
    --shape 4096x4096x4096 >"$LOGS/ops-mm-f16-cold-choice.json" 2>>"$LOGS/ops.log" ||
    { OPS_OK=0; echo "FAILED: cubert bench of the cold choice" >>"$LOGS/ops.log"; }
  "$PY" "$ROOT/benchmarks/peers/torch_ops_peers.py" >"$LOGS/ops-peers.json" 2>"$LOGS/ops-peers.err" ||
    note "kernel-library peers (torch, Triton) FAILED (see $LOGS/ops-peers.err)"
  [ "$OPS_OK" = 1 ] || note "cubert bench on cuda:0 FAILED (see $LOGS/ops.log)"
  if [ -s "$LOGS/ops-peers.json" ]; then
    python3 "$ROOT/scripts/lib/ops_table.py" "$LOGS/ops-peers.json" "$LOGS"/ops-*.json "$LOGS"/tune-*.json \
      >"$LOGS/ops-table.txt" 2>&1 && OPS_TABLE=$LOGS/ops-table.txt
  fi
fi
fi  # want ops
stage "ops"
# 5. Summary, table last.
echo
echo "==================== gpu-check summary ===================="
printf '%s\n' "${SUMMARY[@]}"
echo "logs: $LOGS"
echo "time at the end of each stage: ${TIMES[*]}"
if [ -s "${CPU_BENCH:-}" ]; then
  echo "-- CPU benchmarks (medians)"
  grep -E '^###|_median|winner|chose|stable' "$CPU_BENCH" | sed -E 's/ +/ /g' | cut -c1-150
fi
if [ -s "$LOGS/opencl-bench.log" ]; then
  echo "-- OpenCL benchmarks (medians; opencl:0 = $OCL_NAME)"
  grep -E '_median' "$LOGS/opencl-bench.log" | sed -E 's/ +/ /g' | cut -c1-150
fi
if [ -n "${OPS_TABLE:-}" ]; then
  echo "-- kernel library on cuda:0 (ratios: peer time / cubert time)"
  cat "$OPS_TABLE"
fi
if [ -f "$LOGS/bench.log" ]; then
  grep -E '^(device|transfers):|rows failed' "$LOGS/bench.log"
  # The whole table, however many traces add rows (a 200-line cap dropped the last ones).
  sed -n '/^figure/,$p' "$LOGS/bench.log"
  MISSED=$(sed -n '/^figure/,$p' "$LOGS/bench.log" | grep -c ' NO$')
  echo "targets not met: $MISSED"
fi
# The exit status is a gate too: everything above ran and was reported either way.
# (The PyTorch baseline is another library's: without it only its rows are missing.)
# shellcheck source=lib/summary-gate.sh
source "$ROOT/scripts/lib/summary-gate.sh"
if printf '%s\n' "${SUMMARY[@]}" | summary_says_failed; then
  exit 1
fi
