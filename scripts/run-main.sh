#!/usr/bin/env bash
# The README's main job: build the release CLI and run it on the CPU device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >/dev/null
cmake -S . -B build/main -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUBERT_BUILD_TESTS=OFF >/dev/null
cmake --build build/main --target cubert_cli
trace_dir="$(pwd)/../shared/data/traces"
for t in "$trace_dir"/*.trace.gz; do
  ./build/main/tools/cubert/cubert replay "$t"
done
