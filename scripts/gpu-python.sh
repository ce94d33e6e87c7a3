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
  -Cbuild-dir="$BUILD/python-build" "$ROOT" >>"$log" 2>&1 || fail "pip wheel FAILED"
wheel=$(ls "$dist"/cubert-*.whl)
"$PY" -m pip install -q --no-deps --target "$pkg" "$wheel" >>"$log" 2>&1 || fail "the wheel did not install"
cd "$(mktemp -d)" || exit 1
PYTHONPATH=$pkg:$tools "$PY" -m pytest -q -p no:cacheprovider -rs "$ROOT/tests/python" >>"$log" 2>&1
rc=$?
result=$(grep -E '[0-9]+ (passed|failed)' "$log" | tail -1)
verdict=""
[ "$rc" = 0 ] || verdict=" — FAILED"
echo "python: $(basename "$wheel"): ${result:-no result}$verdict"
exit $rc
