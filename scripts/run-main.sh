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
# CUBERT_TRACES names another folder, which must then hold some (plain .trace or .trace.gz).
find_traces() {
  find "$1" -maxdepth 1 -type f \( -name '*.trace' -o -name '*.trace.gz' \) 2>/dev/null | sort
}
traces=()
if [ -n "${CUBERT_TRACES:-}" ]; then
  mapfile -t traces < <(find_traces "$CUBERT_TRACES")
  if [ ${#traces[@]} -eq 0 ]; then
    echo "run-main: CUBERT_TRACES='$CUBERT_TRACES' holds no *.trace or *.trace.gz file" >&2
    exit 1
  fi
  echo "== cubert replay (allocation traces in $CUBERT_TRACES)"
else
  for dir in ../shared/data/traces shared/data/traces; do
    mapfile -t traces < <(find_traces "$dir")
    [ ${#traces[@]} -gt 0 ] && break
  done
  [ ${#traces[@]} -gt 0 ] && echo "== cubert replay (bundled allocation traces)"
fi
if [ ${#traces[@]} -gt 0 ]; then
  $cli replay "${traces[@]}"
else
  echo "== cubert replay: no allocation traces found (../shared/data/traces, shared/data/traces" \
    "or CUBERT_TRACES); the replay is skipped"
fi
