#!/usr/bin/env bash
# The README's test command: configure, build and run every test of the dev preset.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >/dev/null
log=$(mktemp)
cmake --preset dev >"$log" || { cat "$log"; exit 1; }
# Which backends this build has: without a CUDA toolkit its tests are not built, and say so here.
grep -E -- '-- cubert:' "$log" || true
rm -f "$log"
cmake --build --preset dev
ctest --preset dev -j2
