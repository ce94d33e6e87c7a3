// SPDX-License-Identifier: Apache-2.0
// Defaults of the server contract and the helpers every backend shares.
#include <cubert/backend/server.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

namespace cubert::backend {

void async_error::record(std::exception_ptr e) noexcept {
  std::lock_guard lock(mutex_);
  if (!error_) error_ = std::move(e);
}

void async_error::rethrow_if_any() {
  std::exception_ptr e;
  {
    std::lock_guard lock(mutex_);
    e = std::exchange(error_, nullptr);
  }
  if (e) std::rethrow_exception(e);
}

bool async_error::pending() const noexcept {
  std::lock_guard lock(mutex_);
  return error_ != nullptr;
}

std::vector<std::uint64_t> contiguous_strides(std::span<std::uint64_t const> shape) {
  std::vector<std::uint64_t> strides(shape.size());
  std::uint64_t acc = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= shape[i];
  }
  return strides;
}

namespace {

std::uint64_t element_count(std::vector<std::uint64_t> const& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

}  // namespace

bytes gather_dense(std::span<std::byte const> src, binding_with_meta const& meta) {
  CUBERT_EXPECTS(meta.shape.size() == meta.strides.size(),
                 fmt::format("read_tensor: shape has rank {} but strides have rank {}",
                             meta.shape.size(), meta.strides.size()));
  CUBERT_EXPECTS(meta.elem_size > 0, "read_tensor: elem_size must be positive");
  std::uint64_t const count = element_count(meta.shape);
  if (count == 0) return {};
  std::uint64_t last = 0;  // Offset, in elements, of the farthest element addressed.
  for (std::size_t d = 0; d < meta.shape.size(); ++d) last += (meta.shape[d] - 1) * meta.strides[d];
  if ((last + 1) * meta.elem_size > src.size()) {
    throw invalid_argument(
        fmt::format("read_tensor: the layout addresses {} bytes but the binding holds {}",
                    (last + 1) * meta.elem_size, src.size()));
  }
  // Every byte is written below, so the destination need not be zero-filled.
  auto out = bytes::uninitialized(count * meta.elem_size);
  std::size_t const rank = meta.shape.size();
  std::vector<std::uint64_t> index(rank, 0);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t offset = 0;
    for (std::size_t d = 0; d < rank; ++d) offset += index[d] * meta.strides[d];
    std::memcpy(out.data() + i * meta.elem_size, src.data() + offset * meta.elem_size,
                meta.elem_size);
    for (std::size_t d = rank; d-- > 0;) {  // Row-major increment.
      if (++index[d] < meta.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

void check_tensor_data(std::vector<std::span<std::byte const>> const& data,
                       std::vector<tensor_descriptor> const& descriptors) {
  CUBERT_EXPECTS(data.size() == descriptors.size(),
                 fmt::format("create_tensors: {} buffers for {} descriptors", data.size(),
                             descriptors.size()));
  for (std::size_t i = 0; i < data.size(); ++i) {
    auto const want = element_count(descriptors[i].shape) * descriptors[i].elem_size;
    if (data[i].size() != want) {
      throw invalid_argument(
          fmt::format("create_tensors: tensor {} has {} bytes but its shape needs {}", i,
                      data[i].size(), want));
    }
  }
}

std::vector<tensor_allocation> server::create_tensors(
    std::vector<std::span<std::byte const>> const& data,
    std::vector<tensor_descriptor> const& descriptors) {
  check_tensor_data(data, descriptors);
  std::vector<tensor_allocation> out;
  out.reserve(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) {
    out.push_back({create(data[i]), contiguous_strides(descriptors[i].shape)});
  }
  return out;
}

std::vector<tensor_allocation> server::empty_tensors(
    std::vector<tensor_descriptor> const& descriptors) {
  std::vector<tensor_allocation> out;
  out.reserve(descriptors.size());
  for (auto const& d : descriptors) {
    out.push_back({empty(element_count(d.shape) * d.elem_size), contiguous_strides(d.shape)});
  }
  return out;
}

std::future<std::vector<bytes>> server::read_tensor(std::vector<binding_with_meta> tensors) {
  std::vector<cubert::binding> plain;
  plain.reserve(tensors.size());
  for (auto const& t : tensors) plain.push_back(t.binding);
  auto raw = read(std::move(plain)).get();
  std::vector<bytes> out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) out.push_back(gather_dense(raw[i], tensors[i]));
  std::promise<std::vector<bytes>> done;
  done.set_value(std::move(out));
  return done.get_future();
}

std::future<void> server::read_into(cubert::binding const& b, std::span<std::byte> dst) {
  CUBERT_EXPECTS(dst.size() == b.size(),
                 fmt::format("read_into: the destination holds {} bytes but the binding {}",
                             dst.size(), b.size()));
  std::vector<cubert::binding> one{b};
  auto pending = read(std::move(one));  // A bad binding throws here, at once.
  std::promise<void> done;
  try {
    auto got = pending.get();
    auto const& src = got.at(0);
    if (src.size() != dst.size()) {
      throw invalid_argument(fmt::format(
          "read_into: the destination holds {} bytes but the binding {}", dst.size(), src.size()));
    }
    if (!src.empty()) std::memcpy(dst.data(), src.data(), src.size());
    done.set_value();
  } catch (...) {
    done.set_exception(std::current_exception());
  }
  return done.get_future();
}

host_buffer server::alloc_host(std::uint64_t size) {
  static_assert(sizeof(std::size_t) >= sizeof(std::uint64_t), "cubert needs a 64-bit host");
  return host_buffer::make_aligned(static_cast<std::size_t>(size));
}

}  // namespace cubert::backend
