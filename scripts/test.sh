#!/usr/bin/env bash
# The README's test command: configure, build and run every test of the dev preset.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >/dev/null
cmake --preset dev >/dev/null
cmake --build --preset dev
ctest --preset dev -j2
