// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>
#include <cubert/handle.hpp>

#include <fmt/format.h>

namespace cubert {

namespace {

void check_offset_start(std::uint64_t n, std::uint64_t size) {
  if (n > size) {
    throw invalid_argument(
        fmt::format("offset_start({}) is past the end of a {}-byte handle", n, size));
  }
}

void check_offset_end(std::uint64_t n, std::uint64_t size) {
  if (n > size) {
    throw invalid_argument(
        fmt::format("offset_end({}) is past the start of a {}-byte handle", n, size));
  }
}

}  // namespace

handle handle::offset_start(std::uint64_t n) const& {
  check_offset_start(n, size());
  return handle(*this).offset_start(n);
}

handle handle::offset_start(std::uint64_t n) && {
  check_offset_start(n, size());
  handle out = std::move(*this);
  out.start_ += n;
  return out;
}

handle handle::offset_end(std::uint64_t n) const& {
  check_offset_end(n, size());
  return handle(*this).offset_end(n);
}

handle handle::offset_end(std::uint64_t n) && {
  check_offset_end(n, size());
  handle out = std::move(*this);
  out.end_ += n;
  return out;
}

binding handle::binding() const& {
  return handle(*this).binding();
}

binding handle::binding() && {
  return cubert::binding(std::move(memory_).binding(), start_, end_, size_);
}

std::vector<handle> offset_handles(handle const& base, std::span<std::uint64_t const> sizes,
                                   std::uint64_t align) {
  CUBERT_EXPECTS(align > 0, "offset_handles: align must be positive");
  std::vector<handle> out;
  out.reserve(sizes.size());
  std::uint64_t const total = base.size();
  std::uint64_t offset = 0;
  for (std::uint64_t size : sizes) {
    // offset <= total here; rounding up as `(offset + align - 1) / align * align` could wrap.
    std::uint64_t const pad = offset % align == 0 ? 0 : align - offset % align;
    if (pad > total - offset || size > total - offset - pad) {
      throw invalid_argument(fmt::format(
          "offset_handles: a {}-byte view at offset {} (+{} to align to {}) does not fit in a "
          "{}-byte handle",
          size, offset, pad, align, total));
    }
    offset += pad;
    out.push_back(base.offset_start(offset).offset_end(total - offset - size));
    offset += size;
  }
  return out;
}

}  // namespace cubert
