#!/usr/bin/env bash
# On the GPU machine, after `CUBERT_GPU_ONLY=tests bash scripts/gpu-check.sh` built the tree: a
# cold tuning of the f16 4096³ matmul over the Hopper family (empty tune and kernel caches)
# beside Triton's cold eight-configuration autotune, then the choice benched against cuBLAS and
# Triton in the same run; prints the table lines of scripts/lib/ops_table.py. Logs in $OUT.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${CUBERT_GPU_BUILD:-$ROOT/build/gpu-check}
LOGS=${OUT:-$BUILD/out}
mkdir -p "$LOGS"
DEPS=$ROOT/.deps/usr
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu:$DEPS/lib:${LD_LIBRARY_PATH:-}"
PY=/opt/torch/.venv/bin/python
[ -x "$PY" ] || PY=python3
CUBLAS=$("$PY" -c 'import nvidia.cublas, os; d = os.path.join(list(nvidia.cublas.__path__)[0], "lib"); print(next(os.path.join(d, f) for f in sorted(os.listdir(d)) if f.startswith("libcublas.so")))' 2>/dev/null)
[ -n "$CUBLAS" ] && export CUBERT_CUBLAS_LIBRARY=$CUBLAS
ninja -C "$BUILD" cubert_cli >"$LOGS/build-cli.log" 2>&1 || { echo "build failed"; tail -20 "$LOGS/build-cli.log"; exit 1; }
CLI=$BUILD/tools/cubert/cubert
COLD=$BUILD/tune-cold
rm -rf "$COLD"
start=$(date +%s%N)
CUBERT_CACHE_DIR=$COLD "$CLI" tune --device cuda:0 --json --explain matmul --dtype f16 \
  --shape 4096x4096x4096 >"$LOGS/tune-f16-cold.json" 2>"$LOGS/tune-f16-cold.err" || echo "cold tune FAILED"
echo "cold tune process wall: $(( ($(date +%s%N) - start) / 1000000 )) ms"
CUBERT_CACHE_DIR=$COLD "$CLI" tune --device cuda:0 --explain matmul --dtype f16 \
  --shape 4096x4096x4096 2>/dev/null | tail -25
CUBERT_CACHE_DIR=$COLD "$CLI" bench --device cuda:0 --repeat 20 --json matmul --dtype f16 \
  --shape 4096x4096x4096 >"$LOGS/ops-mm-f16-cold-choice.json" 2>"$LOGS/bench.err" || echo "bench FAILED"
"$PY" "$ROOT/benchmarks/peers/torch_ops_peers.py" --quick >"$LOGS/ops-peers.json" 2>"$LOGS/ops-peers.err" ||
  echo "peers FAILED"
python3 "$ROOT/scripts/lib/ops_table.py" "$LOGS/ops-peers.json" "$LOGS/ops-mm-f16-cold-choice.json" \
  "$LOGS/tune-f16-cold.json"
