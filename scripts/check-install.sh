#!/usr/bin/env bash
# Installs a release build into a prefix and builds examples/ against it with find_package, as a
# user's project would; then moves the prefix and runs the installed CLI from its new place.
# Usage: check-install.sh [static|shared] [BUILD_DIR]   (shared: -DBUILD_SHARED_LIBS=ON)
# BUILD_DIR: install that existing build of the same kind instead of making a release build (CI
# installs its dev build for the static check: the package's shape does not depend on -O).
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-static}
case "$kind" in
  static) shared=OFF ;;
  shared) shared=ON ;;
  *) echo "usage: $0 [static|shared]" >&2; exit 2 ;;
esac
prefix=$(pwd)/build/install-$kind
# A fresh prefix: a header left by an earlier install would hide one this install lacks.
rm -rf "$prefix" "$prefix-moved"
build=${2:-}
if [ -z "$build" ]; then
  build=build/install-build-$kind
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=$shared -DCUBERT_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
fi
cmake --build "$build"
cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S examples -B "build/examples-$kind" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "build/examples-$kind"
ran=0
for exe in build/examples-"$kind"/*/example_*; do
  [ -x "$exe" ] || continue
  echo "-- running $exe"
  "$exe"
  ran=$((ran + 1))
done
if [ "$ran" -eq 0 ]; then
  echo "check-install: no example was built" >&2
  exit 1
fi
# The README's example again on the OpenCL device, where there is one (PoCL's in CI): the
# installed package's OpenCL backend and the portable kernel dialect, from outside the tree.
if "$prefix/bin/cubert" devices | grep -q '^opencl:0 '; then
  echo "-- running example_cpu_kernel on opencl:0"
  build/examples-"$kind"/02_cpu_kernel/example_cpu_kernel opencl:0
fi
# Tuning in the background, from an empty cache: the example must wait for its winner.
tune_dir=$(mktemp -d)
echo "-- running example_autotune tuning in the background"
CUBERT_AUTOTUNE_BACKGROUND=1 CUBERT_CACHE_DIR="$tune_dir" build/examples-"$kind"/03_autotune/example_autotune
rm -rf "$tune_dir"
if [ "$shared" = ON ]; then
  # The ABI version is in the file name a binary records, so a 0.2 library never stands in.
  abi=$(sed -n 's/^project(cubert VERSION \([0-9]*\.[0-9]*\).*/\1/p' CMakeLists.txt)
  soname=$(readelf -d "$prefix"/lib*/libcubert_core.so | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
  if [ "$soname" != "libcubert_core.so.$abi" ]; then
    echo "check-install: libcubert_core's soname is '$soname', not libcubert_core.so.$abi" >&2
    exit 1
  fi
fi
# A moved prefix still runs: the CLI finds its libraries (shared) relative to itself.
mv "$prefix" "$prefix-moved"
echo "-- running the installed cubert from a moved prefix"
"$prefix-moved/bin/cubert" devices
