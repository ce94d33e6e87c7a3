// SPDX-License-Identifier: Apache-2.0
// The device registry: which devices exist and the one client per device of this process.
#include <cubert/build_config.hpp>
#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>
#if CUBERT_HAS_CUDA
#include <cubert/cuda.hpp>
#endif

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <mutex>

namespace cubert {

namespace {

struct device_ref {
  std::string backend;
  int ordinal = 0;
};

device_ref parse_id(std::string_view id) {
  auto const colon = id.find(':');
  device_ref ref{std::string(id.substr(0, colon)), 0};
  if (colon != std::string_view::npos) {
    auto const digits = id.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ref.ordinal);
    if (ec != std::errc{} || end != digits.data() + digits.size() || ref.ordinal < 0) {
      throw unsupported(fmt::format(
          "device '{}': the part after ':' must be a device ordinal (e.g. cuda:0)", id));
    }
  }
  return ref;
}

std::string available_ids() {
  std::string out;
  for (auto const& d : devices()) out += (out.empty() ? "" : ", ") + d.id;
  return out;
}

client create_client(device_ref const& ref, std::string_view id, client_options const& opts) {
  if (ref.backend == "cpu") {
    if (ref.ordinal != 0) {
      throw unsupported(fmt::format("device '{}' does not exist: the CPU is device cpu:0", id));
    }
    cpu::options cpu_opts;
    cpu_opts.threads = opts.threads;
    return client(backend::make_channel(cpu::make_server(cpu_opts), opts.channel));
  }
  if (ref.backend == "cuda") {
#if CUBERT_HAS_CUDA
    int const count = cuda::device_count();
    if (count == 0) {
      throw unsupported(
          fmt::format("device '{}' is not available: {}", id, cuda::unavailable_reason()));
    }
    if (ref.ordinal >= count) {
      throw unsupported(
          fmt::format("device '{}' does not exist: {} CUDA device(s) present", id, count));
    }
    cuda::options cuda_opts;
    return client(backend::make_channel(cuda::make_server(ref.ordinal, cuda_opts), opts.channel));
#else
    throw unsupported(
        fmt::format("device '{}' is not available: this build of cubert has no CUDA backend "
                    "(configure with -DCUBERT_BUILD_CUDA=ON)",
                    id));
#endif
  }
  throw unsupported(fmt::format("unknown device '{}'; devices present: {}", id, available_ids()));
}

}  // namespace

std::vector<device_info> devices() {
  std::vector<device_info> out;
  auto cpu_properties = cpu::make_properties(0);
  out.push_back({"cpu", cpu_properties.name, "cpu", std::move(cpu_properties)});
#if CUBERT_HAS_CUDA
  int const count = cuda::device_count();
  for (int i = 0; i < count; ++i) {
    auto p = cuda::make_properties(i);
    out.push_back({fmt::format("cuda:{}", i), p.name, "cuda", std::move(p)});
  }
#endif
  return out;
}

std::vector<backend_info> backends() {
  std::vector<backend_info> out;
  out.push_back({"cpu", true, 1, {}});
#if CUBERT_HAS_CUDA
  int const count = cuda::device_count();
  out.push_back({"cuda", true, count, count == 0 ? cuda::unavailable_reason() : std::string{}});
#else
  out.push_back({"cuda", false, 0,
                 "this build of cubert has no CUDA backend (configure with -DCUBERT_BUILD_CUDA=ON "
                 "where the CUDA toolkit is installed)"});
#endif
  out.push_back({"opencl", false, 0, "no OpenCL backend in this version of cubert"});
  return out;
}

client make_client(std::string_view id, client_options options) {
  auto const ref = parse_id(id);
  auto const key = fmt::format("{}:{}", ref.backend, ref.ordinal);
  static std::mutex mutex;
  // Never destroyed: clients may be used from static destructors and detached threads.
  static auto* clients = new std::map<std::string, client>();
  std::lock_guard lock(mutex);
  if (auto it = clients->find(key); it != clients->end()) return it->second;
  auto c = create_client(ref, id, options);
  clients->emplace(key, c);
  return c;
}

}  // namespace cubert
