#!/usr/bin/env bash
# The README's test command: configure, build and run every test of the dev preset, the Python
# package's included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >/dev/null
# The Python package is built in place (its extension against this build's libraries) and its
# tests run with the others (ctest's python_tests).
python=$(bash scripts/python-env.sh)
log=$(mktemp)
cmake --preset dev -DCUBERT_BUILD_PYTHON=ON -DPython_EXECUTABLE="$python" >"$log" ||
  { cat "$log"; exit 1; }
# Which backends this build has: without a CUDA toolkit its tests are not built, and say so here.
grep -E -- '-- cubert:' "$log" || true
rm -f "$log"
cmake --build --preset dev
# install-deps.sh installs PoCL: a build with the OpenCL backend must find its device, or every
# OpenCL test and conformance case would skip and pass unseen.
if grep -q "CUBERT_HAS_OPENCL 1" build/dev/generated/cubert/build_config.hpp &&
  ! build/dev/tools/cubert/cubert devices | grep -q '^opencl:0 '; then
  echo "cubert: the OpenCL backend is built and PoCL installed, but no opencl:0 is listed:" >&2
  build/dev/tools/cubert/cubert devices >&2
  exit 1
fi
ctest --preset dev -j2 --output-on-failure
