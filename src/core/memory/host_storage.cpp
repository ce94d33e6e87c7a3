// SPDX-License-Identifier: Apache-2.0
#include <cubert/backend/server.hpp>
#include <cubert/error.hpp>
#include <cubert/memory/host_storage.hpp>

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>
#include <new>

namespace cubert::memory {

host_storage::host_storage(std::uint64_t alignment, std::optional<std::uint64_t> capacity_limit)
    : alignment_(alignment), limit_(capacity_limit) {
  CUBERT_EXPECTS(std::has_single_bit(alignment),
                 fmt::format("host_storage: alignment {} is not a power of two", alignment));
}

host_storage::~host_storage() {
  for (auto& [id, p] : pages_) {
    if (!p.adopted) ::operator delete (p.ptr, std::align_val_t{alignment_});
  }
}

backend::storage_handle host_storage::adopt(std::uint64_t address, std::uint64_t size,
                                            std::shared_ptr<void> owner) {
  CUBERT_EXPECTS(address != 0 || size == 0, "host_storage: adopting a null address");
  auto const id = backend::next_storage_id();
  pages_.emplace(id, page{reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)), size, true,
                          std::move(owner)});
  return {id, 0, size};
}

backend::storage_handle host_storage::alloc(std::uint64_t size) {
  if (limit_ && (size > *limit_ || allocated_ > *limit_ - size)) {
    throw out_of_memory(fmt::format(
        "host_storage: a {}-byte page does not fit: {} of the {}-byte capacity are allocated", size,
        allocated_, *limit_));
  }
  // operator new rounds the size up to the alignment, which wraps to a tiny block near 2^64.
  if (size > std::numeric_limits<std::size_t>::max() - (alignment_ - 1)) {
    throw out_of_memory(fmt::format(
        "host_storage: a {}-byte page cannot be aligned to {} in 64 bits", size, alignment_));
  }
  // operator new(0) still returns a unique pointer, so zero-size pages need no special case.
  void* ptr =
      ::operator new (static_cast<std::size_t>(size), std::align_val_t{alignment_}, std::nothrow);
  if (!ptr) {
    throw out_of_memory(fmt::format("host_storage: the host heap refused {} bytes", size));
  }
  auto const id = backend::next_storage_id();
  try {
    pages_.emplace(id, page{ptr, size});
  } catch (...) {
    ::operator delete (ptr, std::align_val_t{alignment_});
    throw;
  }
  allocated_ += size;
  return {id, 0, size};
}

void host_storage::dealloc(backend::storage_id id) noexcept {
  auto it = pages_.find(id);
  if (it == pages_.end()) return;
  if (!it->second.adopted) {
    ::operator delete (it->second.ptr, std::align_val_t{alignment_});
    allocated_ -= it->second.size;
  }
  pages_.erase(it);
}

cubert::resource host_storage::get(backend::storage_handle const& handle) const {
  auto it = pages_.find(handle.id);
  if (it == pages_.end()) {
    throw invalid_argument(fmt::format("host_storage: unknown storage id {}", handle.id));
  }
  auto const& p = it->second;
  if (handle.offset > p.size || handle.size > p.size - handle.offset) {
    throw invalid_argument(
        fmt::format("host_storage: range [{}, +{}) is past the end of the {}-byte page {}",
                    handle.offset, handle.size, p.size, handle.id));
  }
  return {p.ptr, static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p.ptr)), handle.offset,
          handle.size};
}

void host_write(cubert::resource const& dst, std::span<std::byte const> data) {
  backend::check_write(dst, data.size());
  if (!data.empty()) std::memcpy(dst.host_ptr<std::byte>(), data.data(), data.size());
}

void host_fill(cubert::resource const& dst, std::span<std::byte const> pattern) {
  if (!backend::check_fill(dst, pattern)) return;
  auto* out = dst.host_ptr<std::byte>();
  if (pattern.size() == 1) {
    std::memset(out, std::to_integer<int>(pattern[0]), dst.size);
    return;
  }
  for (std::uint64_t i = 0; i < dst.size; i += pattern.size()) {
    std::memcpy(out + i, pattern.data(), pattern.size());
  }
}

void host_copy(cubert::resource const& src, cubert::resource const& dst) {
  if (backend::check_copy(src, dst)) {
    std::memcpy(dst.host_ptr<std::byte>(), src.host_ptr<std::byte const>(), dst.size);
  }
}

}  // namespace cubert::memory
