#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset: clang, ASan + UBSan) and runs each for a
# bounded time over a copy of its seed corpus (tests/fuzz/corpus/<name>), so that what it finds
# does not land in the repository. Exits non-zero when a target crashes, leaks or trips a
# sanitizer (its reproducer is left in build/fuzz/crashes). CUBERT_FUZZ_SECONDS per target
# (default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${CUBERT_FUZZ_SECONDS:-60}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
mkdir -p build/fuzz/crashes
status=0
for name in tune_cache cache_bundle kernel_disk_cache config; do
  corpus=build/fuzz/corpus/$name
  rm -rf "$corpus" && mkdir -p "$corpus" && cp tests/fuzz/corpus/$name/* "$corpus"/
  echo "== fuzz $name (${seconds}s)"
  if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      build/fuzz/tests/fuzz/cubert_fuzz_$name -max_total_time="$seconds" -max_len=65536 \
      -artifact_prefix=build/fuzz/crashes/$name- -print_final_stats=1 "$corpus" \
      >build/fuzz/$name.log 2>&1; then
    echo "cubert_fuzz_$name FAILED:"; tail -40 build/fuzz/$name.log; status=1
  else
    grep -E "stat::number_of_executed_units|Done" build/fuzz/$name.log | tail -2
  fi
done
exit $status
