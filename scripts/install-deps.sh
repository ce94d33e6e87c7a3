#!/usr/bin/env bash
# Installs cubert's build and test dependencies from Debian/Ubuntu packages. Idempotent.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PKGS=(cmake ninja-build g++ pkg-config lld python3
      libgtest-dev libgmock-dev libbenchmark-dev
      nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libfmt-dev libspdlog-dev libxxhash-dev
      ocl-icd-opencl-dev opencl-headers pocl-opencl-icd
      # The peers `cubert bench` measures against (loaded at run time), and the browser that
      # checks `--report` pages as they render.
      libopenblas-dev libclblast-dev chromium
      # The libFuzzer targets (the `fuzz` preset: clang 15 and its sanitizer runtimes).
      clang-15)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "cubert: dependencies present"
