// SPDX-License-Identifier: Apache-2.0
#include "cuda_storage.hpp"

#include "cuda_library.hpp"
#include "cuda_stream_registry.hpp"

#include <cubert/logging.hpp>
#include <cubert/memory/memory_usage.hpp>

#include <fmt/format.h>

namespace cubert::cuda::detail {

cuda_storage::~cuda_storage() {
  auto const& api = driver_state();
  if (make_context_current(context_) != CUDA_SUCCESS) return;
  // Work on the stream may still use the pages; the server syncs before destroying us, but a
  // failed sync must not turn into a leak of device memory either.
  api.cuStreamSynchronize(stream_);
  for (auto const& [id, p] : pages_) {
    if (p.ptr && !p.owner) api.cuMemFree(p.ptr);
  }
  for (auto const& p : pending_) {
    if (p.ptr && !p.owner) api.cuMemFree(p.ptr);
  }
}

backend::storage_handle cuda_storage::alloc(std::uint64_t size) {
  auto const id = backend::next_storage_id();
  if (size == 0) {
    pages_.emplace(id, page{});
    return {id, 0, 0};
  }
  auto const& api = driver();
  check(make_context_current(context_), "cuCtxSetCurrent");
  // Pages given back while the stream was busy go first, if it has drained since: the driver
  // then has them for this request.
  (void)reap();
  CUdeviceptr ptr = 0;
  CUresult result = api.cuMemAlloc(&ptr, size);
  if (result == CUDA_ERROR_OUT_OF_MEMORY && !pending_.empty()) {
    free_pending();
    result = api.cuMemAlloc(&ptr, size);
  }
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    api.cuMemGetInfo(&free_bytes, &total_bytes);
    throw out_of_memory(fmt::format(
        "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY for a page of {}; the device has {} free of {}, "
        "cubert holds {}",
        memory::format_bytes(size), memory::format_bytes(free_bytes),
        memory::format_bytes(total_bytes), memory::format_bytes(bytes_held_)));
  }
  check(result, "cuMemAlloc");
  try {
    pages_.emplace(id, page{ptr, size});
  } catch (...) {
    api.cuMemFree(ptr);  // Nothing refers to it yet.
    throw;
  }
  bytes_held_ += size;
  return {id, 0, size};
}

backend::storage_handle cuda_storage::adopt(std::uint64_t address, std::uint64_t size,
                                            std::shared_ptr<void> owner) {
  CUBERT_EXPECTS(address != 0 || size == 0, "cuda storage: adopting a null address");
  auto const& api = driver();
  check(make_context_current(context_), "cuCtxSetCurrent");
  auto const ptr = static_cast<CUdeviceptr>(address);
  if (size != 0) {
    unsigned int type = 0;
    if (api.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) != CUDA_SUCCESS) {
      throw invalid_argument(fmt::format(
          "cuda storage: 0x{:x} is not memory the CUDA driver knows (not from cuMemAlloc, a "
          "CUDA allocator or page-locked registration)",
          address));
    }
    int ordinal = ordinal_;
    if (type == CU_MEMORYTYPE_DEVICE &&
        api.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr) ==
            CUDA_SUCCESS &&
        ordinal != ordinal_) {
      throw invalid_argument(fmt::format(
          "cuda storage: 0x{:x} is memory of CUDA device {}, not of device {}; copy it to this "
          "device first",
          address, ordinal, ordinal_));
    }
  }
  auto const id = backend::next_storage_id();
  // A null owner still marks the page as adopted: an empty deleter stands in for it.
  if (!owner) owner = std::shared_ptr<void>(nullptr, [](void*) {});
  pages_.emplace(id, page{ptr, size, std::move(owner)});
  return {id, 0, size};
}

void cuda_storage::dealloc(backend::storage_id id) noexcept {
  auto it = pages_.find(id);
  if (it == pages_.end()) return;
  auto const p = it->second;
  pages_.erase(it);
  // An idle stream cannot be using the page, nor the queued ones: free them now, so memory goes
  // back to the driver without waiting for the next flush (one cheap query, no wait).
  if (stream_idle()) {
    free_page(p);
    free_queue();
    return;
  }
  try {
    pending_.push_back(p);
  } catch (...) {
    // Out of host memory for the queue: wait and free now, rather than leak the page.
    driver_state().cuStreamSynchronize(stream_);
    free_page(p);
  }
}

cubert::resource cuda_storage::get(backend::storage_handle const& handle) const {
  auto it = pages_.find(handle.id);
  if (it == pages_.end()) [[unlikely]] {
    throw invalid_argument(fmt::format("cuda storage: unknown page {}", handle.id));
  }
  if (handle.offset + handle.size > it->second.size) [[unlikely]] {
    throw invalid_argument(fmt::format("cuda storage: range [{}, {}) overruns page {} of {} B",
                                       handle.offset, handle.offset + handle.size, handle.id,
                                       it->second.size));
  }
  return cubert::resource{nullptr, it->second.ptr, handle.offset, handle.size};
}

void cuda_storage::flush() {
  if (pending_.empty()) return;
  check(make_context_current(context_), "cuCtxSetCurrent");
  CUBERT_CU_CALL(cuStreamSynchronize, stream_);
  free_pending();
}

bool cuda_storage::reap() noexcept {
  if (pending_.empty()) return true;
  if (!stream_idle()) return false;
  free_queue();
  return true;
}

void cuda_storage::free_pending() noexcept {
  (void)make_context_current(context_);
  driver_state().cuStreamSynchronize(stream_);
  free_queue();
}

bool cuda_storage::stream_idle() const noexcept {
  // A failed query (a fault, say) is not idle: the pages wait for the flush or the destructor.
  // cuMemFree waits for every stream of the device, so other servers' streams must be idle too.
  return make_context_current(context_) == CUDA_SUCCESS && device_idle(context_, stream_);
}

void cuda_storage::free_page(page const& p) noexcept {
  if (p.owner) return;  // Another library's: released with the page record, never freed.
  if (p.ptr) {
    if (CUresult r = driver_state().cuMemFree(p.ptr); r != CUDA_SUCCESS) {
      log::warn(log::category::memory, "cuMemFree: {}", describe(r));
    }
  }
  bytes_held_ -= p.size;
}

void cuda_storage::free_queue() noexcept {
  for (auto const& p : pending_) free_page(p);
  pending_.clear();
}

}  // namespace cubert::cuda::detail
