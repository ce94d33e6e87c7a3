// SPDX-License-Identifier: Apache-2.0
// The devices the kernel library's tests run on: the CPU, and every GPU or OpenCL device this
// build and machine have (the first of each backend), with the library's settings for tests.
#pragma once

#include <cubert/cubert.hpp>
#include <cubert/ops/tuning.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cubert::test {

/// "cpu", then "cuda:0" and "opencl:0" where listed.
inline std::vector<std::string> ops_devices() {
  std::vector<std::string> ids{"cpu"};
  for (auto const& d : cubert::devices()) {
    if (d.id == "cuda:0" || d.id == "opencl:0") ids.push_back(d.id);
  }
  return ids;
}

/// Tuning with checks on and no persistent cache, few samples: the tests judge correctness,
/// and a cache left by another run must not answer for them.
inline ops::settings test_settings() {
  ops::settings s;
  tune::tuner_options o;
  o.cache_enabled = false;
  o.checks = true;
  o.bench.max_samples = 2;
  o.bench.min_samples = 1;
  s.tuner = o;
  return s;
}

/// Names a parameter for gtest ("cuda_0").
inline std::string device_label(::testing::TestParamInfo<std::string> const& info) {
  std::string s = info.param;
  for (char& ch : s) {
    if (ch == ':') ch = '_';
  }
  return s;
}

}  // namespace cubert::test
