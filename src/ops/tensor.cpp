// SPDX-License-Identifier: Apache-2.0
// The library's tensor view: validation at construction, dense creation and strided reads.
#include <cubert/error.hpp>
#include <cubert/ops/tensor.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <utility>

namespace cubert::ops {

namespace {

// The last element's index + 1 (0 for an empty view), or nullopt when it overflows 64 bits.
std::optional<std::uint64_t> span_of(std::vector<std::uint64_t> const& shape,
                                     std::vector<std::uint64_t> const& strides,
                                     std::uint64_t offset) {
  std::uint64_t last = offset;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    std::uint64_t step = 0;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &step) ||
        __builtin_add_overflow(last, step, &last)) {
      return std::nullopt;
    }
  }
  return last + 1;
}

std::size_t axis(std::size_t rank, int d) {
  auto const r = static_cast<int>(rank);
  int const a = d < 0 ? r + d : d;
  CUBERT_EXPECTS(a >= 0 && a < r, fmt::format("tensor: dimension {} of a rank-{} tensor", d, r));
  return static_cast<std::size_t>(a);
}

}  // namespace

std::vector<std::uint64_t> dense_strides(std::vector<std::uint64_t> const& shape) {
  std::vector<std::uint64_t> s(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * std::max<std::uint64_t>(shape[d], 1);
  return s;
}

tensor::tensor(handle data, elem dtype, std::vector<std::uint64_t> shape,
               std::vector<std::uint64_t> strides, std::uint64_t offset)
    : data_(std::move(data)),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset) {
  CUBERT_EXPECTS(!shape_.empty(), "tensor: a tensor needs at least one dimension");
  if (strides_.empty()) strides_ = dense_strides(shape_);
  CUBERT_EXPECTS(
      strides_.size() == shape_.size(),
      fmt::format("tensor: {} strides for {} dimensions", strides_.size(), shape_.size()));
  auto const end = span_of(shape_, strides_, offset_);
  auto const have = data_.size() / elem_size(dtype_);
  if (!end || *end > have) {
    throw invalid_argument(fmt::format(
        "tensor: {} reaches element {} but the buffer holds {} elements of {} ({} bytes)",
        describe(), end ? fmt::format("{}", *end - 1) : std::string("past 2^64"), have,
        cubert::to_string(dtype_), data_.size()));
  }
}

tensor tensor::empty(client const& c, elem dtype, std::vector<std::uint64_t> shape) {
  std::uint64_t n = elem_size(dtype);
  for (auto d : shape) {
    CUBERT_EXPECTS(!__builtin_mul_overflow(n, d, &n),
                   fmt::format("tensor: shape [{}] overflows 64 bits", fmt::join(shape, ", ")));
  }
  return {c.empty(n), dtype, std::move(shape)};
}

tensor tensor::create(client const& c, elem dtype, std::vector<std::uint64_t> shape,
                      std::span<std::byte const> data) {
  tensor t(c.empty(data.size()), dtype, std::move(shape));
  auto const want = t.numel() * elem_size(dtype);
  CUBERT_EXPECTS(want == data.size(), fmt::format("tensor: {} needs {} bytes, {} given",
                                                  t.describe(), want, data.size()));
  if (!data.empty()) c.write(t.data_.binding(), data);
  return t;
}

std::uint64_t tensor::dim(int d) const {
  return shape_[axis(rank(), d)];
}

std::uint64_t tensor::stride(int d) const {
  return strides_[axis(rank(), d)];
}

std::uint64_t tensor::numel() const noexcept {
  std::uint64_t n = 1;
  for (auto d : shape_) n *= d;
  return n;
}

bool tensor::contiguous() const noexcept {
  std::uint64_t expect = 1;
  for (std::size_t d = shape_.size(); d-- > 0;) {
    if (shape_[d] != 1 && strides_[d] != expect) return false;
    expect *= shape_[d];
  }
  return true;
}

tensor tensor::transposed(int d0, int d1) const {
  tensor t = *this;
  std::swap(t.shape_[axis(rank(), d0)], t.shape_[axis(rank(), d1)]);
  std::swap(t.strides_[axis(rank(), d0)], t.strides_[axis(rank(), d1)]);
  return t;
}

std::string tensor::describe() const {
  auto s = fmt::format("{}[{}] strides [{}]", cubert::to_string(dtype_), fmt::join(shape_, ", "),
                       fmt::join(strides_, ", "));
  if (offset_ != 0) s += fmt::format(" offset {}", offset_);
  return s;
}

std::vector<std::byte> tensor::read(client const& c) const {
  auto const esize = elem_size(dtype_);
  if (numel() == 0) return {};
  binding_with_meta view{data_.binding(), shape_, strides_, esize};
  if (offset_ != 0) view.binding = handle(data_).offset_start(offset_ * esize).binding();
  auto got = c.read_one_tensor(std::move(view));
  auto const* p = reinterpret_cast<std::byte const*>(got.data());
  return {p, p + got.size()};
}

}  // namespace cubert::ops
