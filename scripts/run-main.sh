#!/usr/bin/env bash
# The README's main job: install what is missing, build the release CLI, and on the CPU device
# list the devices, run the checked elementwise/reduction workload, and replay the bundled
# allocation traces through every memory configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >/dev/null
cmake -S . -B build/main -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUBERT_BUILD_TESTS=OFF >/dev/null
cmake --build build/main --target cubert_cli
cli=./build/main/tools/cubert/cubert
echo "== cubert devices"
$cli devices
echo "== cubert run --device cpu"
$cli run --device cpu
# The traces live beside the repository (../shared) or, on the GPU machine, in it (shared/);
# CUBERT_TRACES names another folder.
traces=()
for dir in ${CUBERT_TRACES:-} ../shared/data/traces shared/data/traces; do
  for t in "$dir"/*.trace.gz; do [ -e "$t" ] && traces+=("$t"); done
  [ ${#traces[@]} -gt 0 ] && break
done
if [ ${#traces[@]} -gt 0 ]; then
  echo "== cubert replay (bundled allocation traces)"
  $cli replay "${traces[@]}"
else
  echo "== cubert replay: no allocation traces found (../shared/data/traces, shared/data/traces" \
    "or CUBERT_TRACES); the replay is skipped"
fi
