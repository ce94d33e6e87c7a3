// SPDX-License-Identifier: Apache-2.0
#include "opencl_storage.hpp"

#include "opencl_library.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace cubert::opencl::detail {

opencl_storage::~opencl_storage() {
  for (auto& [id, p] : pages_) {
    release_regions(p.mem);
    opencl_state().clReleaseMemObject(p.mem);
  }
}

void opencl_storage::release_regions(cl_mem parent) noexcept {
  auto it = regions_.find(parent);
  if (it == regions_.end()) return;
  for (auto const& r : it->second) opencl_state().clReleaseMemObject(r.mem);
  regions_kept_ -= it->second.size();
  regions_.erase(it);
}

cl_mem opencl_storage::region(cl_mem parent, std::uint64_t offset, std::uint64_t size) {
  auto& kept = regions_[parent];
  for (auto const& r : kept) {
    if (r.offset == offset && r.size == size) return r.mem;
  }
  cl_int err = CL_SUCCESS;
  cl_buffer_region const range{offset, size};
  cl_mem mem = opencl().clCreateSubBuffer(parent, 0, CL_BUFFER_CREATE_TYPE_REGION, &range, &err);
  check(err, "clCreateSubBuffer");
  if (kept.size() >= regions_per_page) {
    opencl_state().clReleaseMemObject(kept.front().mem);
    kept.erase(kept.begin());
    --regions_kept_;
  }
  try {
    kept.push_back({offset, size, mem});
  } catch (...) {
    opencl_state().clReleaseMemObject(mem);
    throw;
  }
  ++regions_kept_;
  return mem;
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
    pages_.emplace(id, page{mem, size, cl_size});
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
  release_regions(it->second.mem);
  opencl_state().clReleaseMemObject(it->second.mem);
  pages_.erase(it);
}

cubert::resource opencl_storage::get(backend::storage_handle const& handle) const {
  auto it = pages_.find(handle.id);
  if (it == pages_.end()) {
    throw invalid_argument(fmt::format("OpenCL storage: unknown page {}", handle.id));
  }
  return {it->second.mem, 0, handle.offset, handle.size};
}

}  // namespace cubert::opencl::detail
