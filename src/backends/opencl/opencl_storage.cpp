// SPDX-License-Identifier: Apache-2.0
#include "opencl_storage.hpp"

#include "opencl_library.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace cubert::opencl::detail {

namespace {
// Sub-buffers kept per page before the oldest set is let go: a page cut into ever new offsets
// (a sliced pool reusing it for many sizes) would otherwise hold one per offset it ever bound.
constexpr std::size_t max_views_per_page = 4096;
}  // namespace

opencl_storage::~opencl_storage() {
  for (auto& [id, p] : pages_) release(p);
}

void opencl_storage::release(page& p) noexcept {
  auto const& api = opencl_state();
  for (auto& [offset, v] : p.views) api.clReleaseMemObject(v);
  p.views.clear();
  if (p.mem) api.clReleaseMemObject(p.mem);
  p.mem = nullptr;
}

backend::storage_handle opencl_storage::alloc(std::uint64_t size) {
  // clCreateBuffer refuses 0 bytes; a 0-byte page still needs an id and a buffer to bind.
  auto const cl_size = std::max(size, alignment_);
  if (cl_size > max_alloc_) {
    throw out_of_memory(fmt::format(
        "OpenCL: a page of {} bytes exceeds the device's largest buffer (CL_DEVICE_MAX_MEM_"
        "ALLOC_SIZE, {} bytes)",
        size, max_alloc_));
  }
  if (cl_size > capacity_ - std::min(capacity_, held_)) {
    throw out_of_memory(fmt::format(
        "OpenCL: a page of {} bytes does not fit: the device's {} bytes of global memory hold "
        "{} bytes of pages already",
        size, capacity_, held_));
  }
  cl_int err = CL_SUCCESS;
  cl_mem mem = opencl().clCreateBuffer(context_, CL_MEM_READ_WRITE, cl_size, nullptr, &err);
  if (err == CL_OUT_OF_RESOURCES) {
    throw out_of_memory(
        fmt::format("clCreateBuffer of {} bytes failed: {}", cl_size, error_name(err)));
  }
  check(err, "clCreateBuffer");
  auto const id = backend::next_storage_id();
  try {
    auto const it = pages_.emplace(id, page{mem, size, cl_size, {}}).first;
    try {
      by_mem_.emplace(mem, &it->second);
    } catch (...) {
      pages_.erase(it);
      throw;
    }
  } catch (...) {
    opencl_state().clReleaseMemObject(mem);
    throw;
  }
  held_ += cl_size;
  return {id, 0, size};
}

void opencl_storage::dealloc(backend::storage_id id) noexcept {
  auto it = pages_.find(id);
  if (it == pages_.end()) return;
  held_ -= it->second.cl_size;
  by_mem_.erase(it->second.mem);
  release(it->second);
  pages_.erase(it);
}

backend::resource opencl_storage::get(backend::storage_handle const& handle) const {
  auto it = pages_.find(handle.id);
  if (it == pages_.end()) {
    throw invalid_argument(fmt::format("OpenCL storage: unknown page {}", handle.id));
  }
  return {it->second.mem, 0, handle.offset, handle.size};
}

cl_mem opencl_storage::view(backend::resource const& r) {
  auto* const mem = static_cast<cl_mem>(r.native);
  if (r.offset == 0) return mem;
  if (r.offset % alignment_ != 0) {
    throw invalid_argument(fmt::format(
        "OpenCL binds a buffer at a multiple of {} bytes of its page (the device's base-address "
        "alignment); this binding starts at byte {}",
        alignment_, r.offset));
  }
  auto it = by_mem_.find(mem);
  if (it == by_mem_.end()) throw invalid_argument("OpenCL storage: the binding's page is gone");
  auto& p = *it->second;
  if (r.offset >= p.cl_size) return mem;  // An empty binding at the page's end: nothing to read.
  if (auto v = p.views.find(r.offset); v != p.views.end()) return v->second;
  if (p.views.size() >= max_views_per_page) {
    // Commands already enqueued keep their own references.
    for (auto& [offset, old] : p.views) opencl_state().clReleaseMemObject(old);
    p.views.clear();
  }
  cl_buffer_region const region{r.offset, p.cl_size - r.offset};
  cl_int err = CL_SUCCESS;
  cl_mem sub = opencl().clCreateSubBuffer(mem, 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
  check(err, "clCreateSubBuffer");
  try {
    p.views.emplace(r.offset, sub);
  } catch (...) {
    opencl_state().clReleaseMemObject(sub);
    throw;
  }
  return sub;
}

std::size_t opencl_storage::views_held() const noexcept {
  std::size_t n = 0;
  for (auto const& [id, p] : pages_) n += p.views.size();
  return n;
}

}  // namespace cubert::opencl::detail
