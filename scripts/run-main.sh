#!/usr/bin/env bash
# The README's main job on the CPU device: install what is missing, build the release CLI, then
# tune the kernel library's matmul, a reduction and an elementwise operation (every candidate
# timed, the choice kept in the persistent cache), tune them again to show the warm cache, bench
# the choices against OpenBLAS and plain OpenMP loops in the same run, write the HTML report, and
# finish with the runtime's self-check and the allocation-trace replays.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >/dev/null
# CUBERT_MAIN_BUILD: a Release build directory configured the same way to reuse (CI passes the
# static install check's, which has built this CLI already).
build=${CUBERT_MAIN_BUILD:-build/main}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUBERT_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target cubert_cli
cli=./$build/tools/cubert/cubert
mkdir -p build/main
# A cache of the demo's own, emptied first, so that the first tuning really times candidates.
export CUBERT_CACHE_DIR="${CUBERT_MAIN_CACHE:-$PWD/build/main/cache}"
rm -rf "$CUBERT_CACHE_DIR"
matmul=(matmul --shape 1024x1024x1024 --shape 2048x2048x2048 --budget 8)

elementwise=(add --shape 4194304)
echo "== cubert devices"
$cli devices
for round in "first run: every candidate is timed" "second run: the persistent cache answers"; do
  echo "== cubert tune ($round)"
  $cli tune "${matmul[@]}"
  $cli tune sum --shape 4096x1024
  $cli tune sum --shape 4194304 --layout all
  $cli tune "${elementwise[@]}"
done
echo "== cubert bench (the tuned choices beside OpenBLAS and OpenMP loops, same run)"
$cli bench "${matmul[@]}" --report build/main/report-matmul.html
$cli bench sum --shape 4096x1024
$cli bench sum --shape 4194304 --layout all
$cli bench "${elementwise[@]}"
echo "== cubert run --device cpu (the runtime's self-check)"
$cli run --device cpu
# The allocation traces ship in benchmarks/traces; CUBERT_TRACES names another folder.
traces_dir="${CUBERT_TRACES:-benchmarks/traces}"
mapfile -t traces < <(find "$traces_dir" -maxdepth 1 -type f \
  \( -name '*.trace' -o -name '*.trace.gz' \) 2>/dev/null | sort)
if [ ${#traces[@]} -eq 0 ]; then
  echo "run-main: $traces_dir holds no *.trace or *.trace.gz file" >&2
  exit 1
fi
echo "== cubert replay (allocation traces in $traces_dir)"
$cli replay "${traces[@]}"
