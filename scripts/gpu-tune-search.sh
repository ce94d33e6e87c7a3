#!/usr/bin/env bash
# On the GPU machine, after `CUBERT_GPU_ONLY=build bash scripts/gpu-check.sh` built the tree:
# issue 39's search-quality figure, the f32 matmul family's budgeted search against its
# exhaustive best over ten small keys, on DEVICE (cpu by default; cuda:0 for the simt family) (scripts/lib/search_regret.py;
# CUBERT_REGRET_LEVEL picks the budgeted level, extensive by default). Usage: gpu-tune-search.sh
# [DEVICE [FIRST [COUNT]]]: keys FIRST..FIRST+COUNT-1 of the ten (to split the run across calls
# of the device tool). Output in $OUT.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CUBERT_GPU_BUILD:-$ROOT/build/gpu-check}
LOGS=${OUT:-$BUILD/out}
mkdir -p "$LOGS"
DEPS=$ROOT/.deps/usr
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:$DEPS/lib:${LD_LIBRARY_PATH:-}"
DEVICE=${1:-cpu}
SHAPES=(128x128x128 192x256x128 256x256x256 320x192x256 384x384x128 128x512x256 256x128x512
  200x300x100 333x222x111 384x256x384)
FIRST=${2:-0}
COUNT=${3:-10}
# One kernel disk cache for every call while the machine stays warm: the first key compiles the
# space, later calls (other keys) compile nothing.
export CUBERT_REGRET_KERNELS=${CUBERT_REGRET_KERNELS:-$BUILD/regret-kernels}
python3 "$ROOT/scripts/lib/search_regret.py" "$BUILD/tools/cubert/cubert" "$DEVICE" f32 \
  "${SHAPES[@]:$FIRST:$COUNT}" | tee "$LOGS/search-regret-${DEVICE//:/-}-$FIRST.txt"
