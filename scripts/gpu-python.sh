#!/usr/bin/env bash
# The Python package on the GPU machine: a wheel built from this checkout by the machine's Python
# (the torch environment's 3.12, so a cp312-abi3 wheel), installed into a folder, then the Python
# tests against it, the PyTorch ones included (zero-copy both ways, cubert producing for torch on
# its streams). The machine has no package registry: nanobind, scikit-build-core and pytest come
# as wheels in .deps/wheels (docs/maintainer/gpu-machine.md). Called by scripts/gpu-check.sh;
# prints one summary line last and exits 1 when something failed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CUBERT_GPU_BUILD:-$ROOT/build/gpu-check}
LOGS=${OUT:-$BUILD/out}
DEPS=$ROOT/.deps/usr
PY=${CUBERT_PYTHON:-python3}
tools=$BUILD/python-tools
pkg=$BUILD/python-pkg
dist=$BUILD/python-dist
log=$LOGS/python.log
mkdir -p "$LOGS"
: >"$log"
fail() { echo "python: $* (see $log)"; exit 1; }
rm -rf "$tools" "$pkg" "$dist"
"$PY" -m pip install -q --no-index --find-links "$ROOT/.deps/wheels" --target "$tools" \
  nanobind scikit-build-core pytest >>"$log" 2>&1 || fail "the build tools did not install from .deps/wheels"
export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
PYTHONPATH=$tools "$PY" -m pip wheel --no-build-isolation --no-deps --no-index -w "$dist" \
  -Ccmake.define.CMAKE_PREFIX_PATH="$DEPS" -Ccmake.define.CUBERT_XXHASH_INCLUDE_DIR="$DEPS/include" \
  -Ccmake.define.CUBERT_BUILD_TOOLS=ON \
  -Cbuild-dir="$BUILD/python-build" "$ROOT" >>"$log" 2>&1 || fail "pip wheel FAILED"
wheel=$(ls "$dist"/cubert-*.whl)
"$PY" -m pip install -q --no-deps --target "$pkg" "$wheel" >>"$log" 2>&1 || fail "the wheel did not install"
cd "$(mktemp -d)" || exit 1
PYTHONPATH=$pkg:$tools "$PY" -m pytest -q -p no:cacheprovider -rs "$ROOT/tests/python" >>"$log" 2>&1
rc=$?
# The figures (docs/performance/python.md), where torch and a CUDA device are: launch cost, DLPack
# export and round trip against torch's, ops.matmul from Python against the C++ CLI's figure
# (the CLI built in the wheel's tree; one cache, so both run the same choice).
bench=$LOGS/python-bench.log
: >"$bench"
if PYTHONPATH=$pkg "$PY" -c 'import torch, cubert, sys; sys.exit(0 if torch.cuda.is_available() and any(d["backend"] == "cuda" for d in cubert.devices()) else 1)' 2>>"$bench"; then
  CUBLAS=$("$PY" -c 'import nvidia.cublas, os; d = os.path.join(list(nvidia.cublas.__path__)[0], "lib"); print(next(os.path.join(d, f) for f in sorted(os.listdir(d)) if f.startswith("libcublas.so")))' 2>/dev/null)
  [ -n "$CUBLAS" ] && export CUBERT_CUBLAS_LIBRARY=$CUBLAS
  export CUBERT_CACHE_DIR=$BUILD/python-bench-cache
  PYTHONPATH=$pkg "$PY" "$ROOT/benchmarks/python/dlpack_launch_bench.py" cuda:0 >>"$bench" 2>&1
  for args in "4096x4096x4096 f16" "4096x4096x4096 f32" "1024x1024x1024 f16"; do
    # shellcheck disable=SC2086
    PYTHONPATH=$pkg "$PY" "$ROOT/benchmarks/python/matmul_bench.py" \
      "$BUILD/python-build/tools/cubert/cubert" cuda:0 $args >>"$bench" 2>&1
  done
fi
result=$(grep -E '[0-9]+ (passed|failed)' "$log" | tail -1)
verdict=""
[ "$rc" = 0 ] || verdict=" — FAILED"
figures=$(grep -E '^(launch / torch.add|round trip /|python / C\+\+)' "$bench" | sed 's/ (target[^)]*)//' | paste -sd';' -)
echo "python: $(basename "$wheel"): ${result:-no result}$verdict${figures:+; $figures}"
exit $rc
