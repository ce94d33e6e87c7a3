#!/usr/bin/env bash
# Installs the release build into a prefix and builds examples/ against it with find_package.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(pwd)/build/install
# A fresh prefix: a header left by an earlier install would hide one this install lacks.
rm -rf "$prefix"
cmake -S . -B build/install-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCUBERT_BUILD_TESTS=OFF -DCUBERT_BUILD_TOOLS=OFF -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build build/install-build
cmake --install build/install-build >/dev/null
cmake -S examples -B build/examples -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/examples
ran=0
for exe in build/examples/*/example_*; do
  [ -x "$exe" ] || continue
  echo "-- running $exe"
  "$exe"
  ran=$((ran + 1))
done
if [ "$ran" -eq 0 ]; then
  echo "check-install: no example was built" >&2
  exit 1
fi
