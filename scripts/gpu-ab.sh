#!/usr/bin/env bash
# A/B of CUDA benchmark rows between two source trees on one GPU host, run in turns so that both
# see the same machine: bash scripts/gpu-ab.sh DIR_A DIR_B ROWS [ROUNDS]. Each tree is built
# (Release, CUDA, benchmarks; cuda_bench only) in DIR/build/ab; ROWS is cuda_bench's --rows (for
# example "launch" or "add,transfer"). Uses the toml++/xxHash headers in this tree's .deps.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 DIR_A DIR_B ROWS [ROUNDS]" >&2; exit 2; }
A=$(cd "$1" && pwd); B=$(cd "$2" && pwd); ROWS=$3; ROUNDS=${4:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=$ROOT/.deps/usr
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:$DEPS/lib:${LD_LIBRARY_PATH:-}"
export PATH="/usr/local/cuda/bin:$PATH"
TOML_SO=$DEPS/lib/x86_64-linux-gnu/libtomlplusplus.so
if [ ! -e "$TOML_SO" ] && [ -f "$DEPS/include/toml++/toml.h" ]; then
  mkdir -p "$(dirname "$TOML_SO")"
  printf '#define TOML_IMPLEMENTATION\n#include <toml++/toml.h>\n' >/tmp/cubert-ab-toml.cpp
  g++ -shared -fPIC -O2 -std=c++17 -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1 -I"$DEPS/include" \
    /tmp/cubert-ab-toml.cpp -Wl,-soname,libtomlplusplus.so.3 -o "$TOML_SO.3" &&
    ln -sf libtomlplusplus.so.3 "$TOML_SO"
fi
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
for dir in "$A" "$B"; do
  cmake -S "$dir" -B "$dir/build/ab" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DCUBERT_BUILD_CUDA=ON \
    -DCUBERT_BUILD_BENCHMARKS=ON -DCUBERT_BUILD_TESTS=OFF -DCMAKE_PREFIX_PATH="$DEPS" \
    -DCUBERT_XXHASH_INCLUDE_DIR="$DEPS/include" >"$dir/build-ab-configure.log" 2>&1 &&
    cmake --build "$dir/build/ab" -j "$(nproc)" --target cuda_bench >"$dir/build-ab.log" 2>&1 ||
    { echo "build failed in $dir"; tail -30 "$dir/build-ab.log"; exit 1; }
done
for round in $(seq 1 "$ROUNDS"); do
  for side in A B; do
    dir=$A; [ "$side" = B ] && dir=$B
    "$dir/build/ab/benchmarks/cuda_bench" --rows "$ROWS" 2>&1 | grep -vE '^(figure|device|transfers)' |
      sed "s/^/$side$round /"
  done
done
