// SPDX-License-Identifier: Apache-2.0
// Defaults of the server contract and the helpers every backend shares.
#include "base/exception_text.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

namespace cubert::backend {

void async_error::record(std::exception_ptr e) noexcept {
  std::exception_ptr replaced;  // Destroyed after the lock is released.
  std::lock_guard lock(mutex_);
  ++recorded_;
  replaced = std::exchange(recent_[recorded_ % remembered], e);
  if (!error_) error_ = std::move(e);
}

std::string async_error::message_of(std::uint64_t n) const {
  std::exception_ptr e;
  {
    std::lock_guard lock(mutex_);
    if (n == 0 || n > recorded_) return {};
    // Forgotten: the oldest one still remembered, recorded after it.
    if (recorded_ - n >= remembered) n = recorded_ - remembered + 1;
    e = recent_[n % remembered];
  }
  if (!e) return {};
  return cubert::detail::what_of(e, "an exception that is not a std::exception");
}

std::uint64_t async_error::recorded() const noexcept {
  std::lock_guard lock(mutex_);
  return recorded_;
}

void async_error::rethrow_if_any() {
  std::exception_ptr e;
  {
    std::lock_guard lock(mutex_);
    e = std::exchange(error_, nullptr);
  }
  if (e) std::rethrow_exception(e);
}

void async_error::discard() noexcept {
  std::exception_ptr e;
  {
    std::lock_guard lock(mutex_);
    e = std::exchange(error_, nullptr);
  }  // Released outside the lock: an exception's destructor may do anything.
}

bool async_error::pending() const noexcept {
  std::lock_guard lock(mutex_);
  return error_ != nullptr;
}

void check_write(std::uint64_t binding_size, std::uint64_t data_size) {
  if (data_size != binding_size) {
    throw invalid_argument(
        fmt::format("write: {} bytes given for a binding of {} bytes", data_size, binding_size));
  }
}

void check_write(resource const& dst, std::uint64_t data_size) {
  check_write(dst.size, data_size);
}

void check_copy_sizes(std::uint64_t src_size, std::uint64_t dst_size) {
  if (src_size != dst_size) {
    throw invalid_argument(
        fmt::format("copy: the source holds {} bytes but the destination {}", src_size, dst_size));
  }
}

void refuse_missing_launch_features(kernel const& k, bindings const& args,
                                    hardware_properties const& hw,
                                    missing_launch_features const& why) {
  if (!args.tensor_maps.empty() && !hw.tensor_maps) {
    throw unsupported(fmt::format("kernel '{}' binds tensor maps, which {} (bind buffers)",
                                  k.name(), why.tensor_maps));
  }
  if (auto const c = k.cluster_dim(); c.units() > hw.max_cluster_size) {
    throw unsupported(
        fmt::format("kernel '{}' asks for clusters of ({}, {}, {}) cubes; {} "
                    "(max_cluster_size {})",
                    k.name(), c.x, c.y, c.z, why.clusters, hw.max_cluster_size));
  }
  if (k.cooperative() && !hw.cooperative_launch) {
    throw unsupported(
        fmt::format("kernel '{}' launches cooperatively; {} (cooperative_launch is "
                    "false)",
                    k.name(), why.cooperative));
  }
}

void check_launch_arguments(kernel const& k, bindings const& args, hardware_properties const& hw) {
  if (args.buffers.size() > hw.max_bindings) {
    throw invalid_argument(fmt::format("kernel '{}': {} buffers exceed the limit of {}", k.name(),
                                       args.buffers.size(), hw.max_bindings));
  }
  try {
    check_scalars(args);
  } catch (invalid_argument const& e) {
    throw invalid_argument(fmt::format("kernel '{}': {}", k.name(), e.what()));
  }
}

void check_dynamic_count(resource const& count) {
  if (count.size < 3 * sizeof(std::uint32_t)) {
    throw invalid_argument(fmt::format(
        "dynamic cube count: the binding holds {} bytes, it needs 12 (three u32)", count.size));
  }
}

bool check_copy(resource const& src, resource const& dst) {
  check_copy_sizes(src.size, dst.size);
  // Two native objects never share bytes: OpenCL buffers all start at address 0, and host pages
  // are separate allocations. CUDA leaves `native` null, so its addresses decide.
  if (src.native != dst.native) return src.size != 0;
  if (src.size == 0 || src.address() == dst.address()) return false;
  auto const lo = std::min(src.address(), dst.address());
  auto const hi = std::max(src.address(), dst.address());
  if (hi - lo < src.size) {
    throw invalid_argument(fmt::format(
        "copy: source and destination overlap ({} bytes each, {} bytes apart); copy through a "
        "separate buffer",
        src.size, hi - lo));
  }
  return true;
}

void check_fill_pattern(std::uint64_t size, std::size_t width) {
  if (width != 1 && width != 2 && width != 4) {
    throw invalid_argument(
        fmt::format("fill: the pattern has {} bytes; it must have 1, 2 or 4", width));
  }
  if (size % width != 0) {
    throw invalid_argument(fmt::format(
        "fill: the binding's {} bytes are not a whole number of {}-byte elements", size, width));
  }
}

bool check_fill(resource const& dst, std::span<std::byte const> pattern) {
  auto const width = pattern.size();
  check_fill_pattern(dst.size, width);
  if (dst.address() % width != 0) {
    throw invalid_argument(fmt::format(
        "fill: a {}-byte pattern needs a binding that starts on a {}-byte boundary; this one "
        "starts {} bytes past one",
        width, width, dst.address() % width));
  }
  return dst.size != 0;
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

// a * b, or nullopt when it does not fit in 64 bits.
std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

}  // namespace

std::uint64_t tensor_bytes(std::span<std::uint64_t const> shape, std::uint64_t elem_size,
                           std::string_view what) {
  CUBERT_EXPECTS(elem_size > 0, fmt::format("{}: elem_size must be positive", what));
  std::optional<std::uint64_t> n = elem_size;
  for (auto d : shape) {
    if (n) n = checked_mul(*n, d);
  }
  // A zero dimension makes the tensor empty however large the others are.
  if (std::find(shape.begin(), shape.end(), std::uint64_t{0}) != shape.end()) return 0;
  if (!n) {
    throw invalid_argument(fmt::format("{}: shape [{}] of {}-byte elements does not fit in 64 bits",
                                       what, fmt::join(shape, ", "), elem_size));
  }
  return *n;
}

namespace {

// Calls fn(dense element index, strided element offset) for every element, row-major.
template <typename Fn>
void for_each_element(binding_with_meta const& meta, std::uint64_t count, Fn&& fn) {
  std::size_t const rank = meta.shape.size();
  std::vector<std::uint64_t> index(rank, 0);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t offset = 0;
    for (std::size_t d = 0; d < rank; ++d) offset += index[d] * meta.strides[d];
    fn(i, offset);
    for (std::size_t d = rank; d-- > 0;) {  // Row-major increment.
      if (++index[d] < meta.shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

// Every step is checked, so a layout whose extent wraps around 64 bits cannot pass for a small
// one.
void check_tensor_extent(binding_with_meta const& meta, std::uint64_t available,
                         std::string_view what) {
  std::optional<std::uint64_t> last = 0;
  for (std::size_t d = 0; d < meta.shape.size() && last; ++d) {
    auto const step = checked_mul(meta.shape[d] - 1, meta.strides[d]);
    last = step && *step <= UINT64_MAX - *last ? std::optional(*last + *step) : std::nullopt;
  }
  auto const extent =
      last && *last < UINT64_MAX ? checked_mul(*last + 1, meta.elem_size) : std::nullopt;
  if (!extent || *extent > available) {
    throw invalid_argument(fmt::format(
        "{}: the layout (shape [{}], strides [{}], {}-byte elements) addresses {} bytes but the "
        "binding holds {}",
        what, fmt::join(meta.shape, ", "), fmt::join(meta.strides, ", "), meta.elem_size,
        extent ? fmt::format("{}", *extent) : std::string("more than 2^64"), available));
  }
}

void check_gather(binding_with_meta const& meta, std::uint64_t src_size) {
  CUBERT_EXPECTS(meta.shape.size() == meta.strides.size(),
                 fmt::format("read_tensor: shape has rank {} but strides have rank {}",
                             meta.shape.size(), meta.strides.size()));
  if (tensor_bytes(meta.shape, meta.elem_size, "read_tensor") == 0) return;
  check_tensor_extent(meta, src_size, "read_tensor");
}

bytes gather_dense(std::span<std::byte const> src, binding_with_meta const& meta) {
  check_gather(meta, src.size());
  std::uint64_t const dense = tensor_bytes(meta.shape, meta.elem_size, "read_tensor");
  if (dense == 0) return {};
  // Every byte is written below, so the destination need not be zero-filled.
  auto out = bytes::uninitialized(dense);
  auto const size = meta.elem_size;
  for_each_element(meta, dense / size, [&](std::uint64_t i, std::uint64_t offset) {
    std::memcpy(out.data() + i * size, src.data() + offset * size, size);
  });
  return out;
}

namespace {

void check_ranks(binding_with_meta const& meta, std::string_view what) {
  CUBERT_EXPECTS(meta.shape.size() == meta.strides.size(),
                 fmt::format("{}: shape has rank {} but strides have rank {}", what,
                             meta.shape.size(), meta.strides.size()));
}

// Whether the `count` elements of `meta` (inside its extent) all have places of their own.
bool places_apart(binding_with_meta const& meta, std::uint64_t count) {
  std::vector<std::uint64_t> places;
  places.reserve(static_cast<std::size_t>(count));
  for_each_element(meta, count, [&](std::uint64_t, std::uint64_t at) { places.push_back(at); });
  std::sort(places.begin(), places.end());
  return std::adjacent_find(places.begin(), places.end()) == places.end();
}

}  // namespace

void check_writable_layout(binding_with_meta const& meta, std::uint64_t data_size) {
  check_ranks(meta, "write_tensor");
  std::uint64_t const dense = tensor_bytes(meta.shape, meta.elem_size, "write_tensor");
  if (data_size != dense) {
    throw invalid_argument(
        fmt::format("write_tensor: {} bytes given for a tensor of {} bytes", data_size, dense));
  }
  if (dense == 0) return;
  check_tensor_extent(meta, meta.binding.size(), "write_tensor");
  // Non-overlapping: ordered by stride, each dimension steps past everything the smaller ones
  // span. (A broadcast stride of 0 would give one place several values.)
  std::vector<std::size_t> order;
  for (std::size_t d = 0; d < meta.shape.size(); ++d) {
    if (meta.shape[d] > 1) order.push_back(d);
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return meta.strides[a] < meta.strides[b]; });
  std::uint64_t covered = 1;  // Elements from the first to past the last of the dims so far.
  for (auto const d : order) {
    if (meta.strides[d] < covered) {
      // Not nested, yet the places may still all differ (shape [2, 3], strides [3, 2] puts
      // its elements at 0, 2, 4, 3, 5, 7): count them, up to a bound on the memory it takes.
      constexpr std::uint64_t most_counted = std::uint64_t{1} << 24;
      auto const count = dense / meta.elem_size;
      if (count <= most_counted && places_apart(meta, count)) return;
      throw invalid_argument(fmt::format(
          "write_tensor: the layout (shape [{}], strides [{}]) puts several elements in one "
          "place{}",
          fmt::join(meta.shape, ", "), fmt::join(meta.strides, ", "),
          count <= most_counted ? ""
                                : " (or may: its strides interleave, and past 2^24 elements "
                                  "they are not counted)"));
    }
    covered += meta.strides[d] * (meta.shape[d] - 1);
  }
}

void scatter_dense(std::span<std::byte> dst, binding_with_meta const& meta,
                   std::span<std::byte const> data) {
  check_ranks(meta, "write_tensor");
  auto const dense = tensor_bytes(meta.shape, meta.elem_size, "write_tensor");
  if (data.size() != dense) {
    throw invalid_argument(
        fmt::format("write_tensor: {} bytes given for a tensor of {} bytes", data.size(), dense));
  }
  if (dense == 0) return;
  check_tensor_extent(meta, dst.size(), "write_tensor");
  auto const size = meta.elem_size;
  for_each_element(meta, data.size() / size, [&](std::uint64_t i, std::uint64_t offset) {
    std::memcpy(dst.data() + offset * size, data.data() + i * size, size);
  });
}

void check_scalars(bindings const& args) {
  for (auto const& [type, group] : args.scalars) {
    auto const width = elem_size(type);
    if (width == 0 || group.type != type ||
        group.length > group.data.size() * sizeof(std::uint64_t) / width) {
      throw invalid_argument(fmt::format(
          "bindings: the scalar group of {} is malformed (type {}, {} elements in {} bytes)",
          static_cast<unsigned>(type), static_cast<unsigned>(group.type), group.length,
          group.data.size() * sizeof(std::uint64_t)));
    }
    if (type == elem::boolean) {
      // Hand-filled groups skip with_scalar's normalisation; a kernel reads each as a bool.
      auto const bytes = std::as_bytes(std::span(group.data));
      for (std::size_t i = 0; i < group.length; ++i) {
        if (bytes[i] > std::byte{1}) {
          throw invalid_argument(fmt::format("bindings: boolean scalar {} holds {}, not 0 or 1", i,
                                             static_cast<int>(bytes[i])));
        }
      }
    }
  }
}

void check_tensor_data(std::vector<std::span<std::byte const>> const& data,
                       std::vector<tensor_descriptor> const& descriptors) {
  CUBERT_EXPECTS(data.size() == descriptors.size(),
                 fmt::format("create_tensors: {} buffers for {} descriptors", data.size(),
                             descriptors.size()));
  for (std::size_t i = 0; i < data.size(); ++i) {
    auto const want =
        tensor_bytes(descriptors[i].shape, descriptors[i].elem_size, "create_tensors");
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
    out.push_back(
        {empty(tensor_bytes(d.shape, d.elem_size, "empty_tensors")), contiguous_strides(d.shape)});
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

std::uint64_t server::instantiate_graph(std::vector<graph_step> const& steps) {
  for (auto const& s : steps) {
    switch (s.what) {
      case graph_step::kind::launch:
        check_captured_launch(s.k, s.count, s.args, s.mode);
        break;
      case graph_step::kind::copy:
        (void)check_copy(get_resource(s.src).resource, get_resource(s.dst).resource);
        break;
      case graph_step::kind::fill:
        (void)check_fill(get_resource(s.dst).resource,
                         std::span<std::byte const>(s.pattern.data(), s.width));
        break;
    }
  }
  return 0;
}

void server::check_captured_launch(kernel const&, cube_count const&, bindings const&,
                                   execution_mode) {}

void server::launch_graph(std::uint64_t id, std::vector<graph_step> const& steps) {
  CUBERT_EXPECTS(id == 0, fmt::format("launch_graph: this server made no graph {}", id));
  for (auto const& s : steps) {
    switch (s.what) {
      case graph_step::kind::launch:
        execute(s.k, s.count, s.args, s.mode);
        break;
      case graph_step::kind::copy:
        copy(s.src, s.dst);
        break;
      case graph_step::kind::fill:
        fill(s.dst, std::span<std::byte const>(s.pattern.data(), s.width));
        break;
    }
  }
}

void server::drop_graph(std::uint64_t) noexcept {}

void server::build_ahead(kernel const&, execution_mode) const {}

void server::write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) {
  check_writable_layout(dst, data.size());
  // Resolved even with nothing to write: an unknown binding is refused, as `write` refuses it.
  auto const held = get_resource(dst.binding).resource.size;
  if (data.empty()) return;
  check_tensor_extent(dst, held, "write_tensor");
  if (dst.strides == contiguous_strides(dst.shape)) {
    // Dense from the start: its bytes only, through a view of the binding. (The whole binding
    // went down and back up for a small tensor at the start of a large buffer.)
    auto const rest = held - data.size();
    auto const& b = dst.binding;
    write(cubert::binding(b.memory(), b.offset_start(), b.offset_end() + rest, b.reserved_size()),
          data);
    return;
  }
  // The bytes between the elements keep their values: read, scatter, write back, in order
  // with the work around (this server's calls are serialised by its channel).
  auto raw = read_for_write(dst.binding);
  scatter_dense(raw.span(), dst, data);
  write(dst.binding, raw.span());
}

bytes server::read_for_write(cubert::binding const& b) {
  std::vector<cubert::binding> one{b};
  return std::move(read(std::move(one)).get().at(0));
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

cubert::handle server::import_memory(std::uint64_t /*address*/, std::uint64_t /*size*/,
                                     std::shared_ptr<void> /*owner*/) {
  throw unsupported("this device cannot use memory another library allocated");
}

std::uint64_t server::native_stream() {
  return 0;
}

std::future<void> server::order_native_stream(std::uint64_t /*stream*/) {
  return sync_device();
}

host_buffer server::alloc_host(std::uint64_t size) {
  static_assert(sizeof(std::size_t) >= sizeof(std::uint64_t), "cubert needs a 64-bit host");
  return host_buffer::make_aligned(static_cast<std::size_t>(size));
}

}  // namespace cubert::backend
