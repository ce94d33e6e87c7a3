// SPDX-License-Identifier: Apache-2.0
// A device's measured ceilings, the roofline's roofs: memory bandwidth and peak FLOP/s.
#pragma once

#include <cubert/bindings.hpp>
#include <cubert/client.hpp>

#include <filesystem>
#include <map>
#include <string>

namespace cubert::ops {

/// What a device reaches at best, measured by small kernels written for it (not the vendor's
/// data sheet): what a tuned kernel's speed is compared with.
struct device_ceilings {
  /// Bytes read plus bytes written per second by a streaming copy far larger than the caches.
  double bandwidth = 0;
  /// Floating-point operations per second of independent fused multiply-adds in registers, per
  /// dtype where measured: f32 everywhere; f16 and bf16 on CPUs, where the library computes them
  /// in f32 (a GPU's 16-bit roof is its matrix units', not measured yet).
  std::map<elem, double> flops;
  std::string fingerprint;  ///< The device's, from its properties.
  std::string measured;     ///< When, ISO 8601 UTC.

  /// The FLOP/s ceiling of `dtype`, or 0 when not measured.
  [[nodiscard]] double flops_of(elem dtype) const;
};

/// The ceilings of `c`'s device: read from `<cache_dir>/ceilings/<device>.json` (the autotune
/// cache directory) when measured before, else measured now (a second or two) and stored, unless
/// `fresh` asks to measure again. A cache that cannot be read or written is measured around.
/// Waits for the device.
[[nodiscard]] device_ceilings ceilings(client const& c, bool fresh = false);

/// Where `ceilings` keeps `c`'s device's figures.
[[nodiscard]] std::filesystem::path ceilings_path(client const& c);

}  // namespace cubert::ops
