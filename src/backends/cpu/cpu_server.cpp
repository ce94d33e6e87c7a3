// SPDX-License-Identifier: Apache-2.0
#include "cpu_server.hpp"

#include "memory/configured_memory.hpp"

#include <cubert/config.hpp>
#include <cubert/error.hpp>
#include <cubert/memory/host_storage.hpp>

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <utility>

namespace cubert::cpu {

namespace {

// Without a limit of its own the device may hold at most the host's memory (its cgroup limit
// in a container): pages beyond it are refused with out_of_memory and a usage report, after the
// manager's cleanup and retry, rather than overcommitted towards the OOM killer.
std::unique_ptr<backend::storage> make_storage(options const& opts,
                                               device_properties const& props) {
  auto limit = opts.capacity_limit;
  if (!limit && props.total_memory != 0) limit = props.total_memory;
  return std::make_unique<memory::host_storage>(props.memory.alignment, limit);
}

// The device as the options describe it: with a capacity limit, that much memory, so that a
// program sizing its work from the properties fits, and a request above it is refused at once.
device_properties properties_for(options const& opts) {
  auto p = make_properties(opts.threads);
  if (opts.capacity_limit) {
    p.total_memory = *opts.capacity_limit;
    p.memory.max_alloc_size = *opts.capacity_limit;
  }
  return p;
}

std::chrono::microseconds checked_spin(std::chrono::microseconds spin) {
  CUBERT_EXPECTS(
      spin >= std::chrono::microseconds::zero() && spin <= std::chrono::seconds(1),
      fmt::format("cpu options: worker_spin {} µs is not within 0 to 1000000 µs", spin.count()));
  return spin;
}

streams::stream_index stream_count_for(options const& opts) {
  auto const count = opts.streams != 0 ? opts.streams : config::get().streaming.max_streams;
  CUBERT_EXPECTS(count <= streams::max_streams_limit,
                 fmt::format("cpu options: {} streams asked for; 1 to {} are possible", count,
                             streams::max_streams_limit));
  return count;
}

// An executor spins this long for the next command before it sleeps: long enough to take
// back-to-back submissions without a wake-up each, short enough that idle executors do not
// take the cores the launch pool's workers run on.
constexpr std::chrono::microseconds executor_spin{20};

// Sets `p` to the recorded error, if any; true when there was one.
template <typename T>
bool failed_into(backend::async_error& errors, std::promise<T>& p) noexcept {
  try {
    errors.rethrow_if_any();
    return false;
  } catch (...) {
    p.set_exception(std::current_exception());
    return true;
  }
}

}  // namespace

cpu_server::cpu_server(options const& opts)
    : properties_(properties_for(opts)),
      memory_(make_storage(opts, properties_), properties_.memory,
              memory::configured_layout(opts.memory)),
      pool_(properties_.hardware.num_compute_units, checked_spin(opts.worker_spin)),
      streams_(stream_count_for(opts), executor_spin),
      order_(streams_.count(), streams_) {
  memory::apply_configured_persistence(memory_);
}

void cpu_server::prepare() {
  streams_.start(current_);
}

void cpu_server::touch(cubert::binding const& b, streams::access how) {
  // Every binding here was resolved first, so its slice is this manager's.
  if (auto* marks = memory_.marks_of(b.memory().control())) order_.use(*marks, current_, how);
}

void cpu_server::enqueue(cpu_command c) {
  streams_.submit(current_, std::move(c));
  order_.submitted(current_);
}

cubert::handle cpu_server::create(std::span<std::byte const> data) {
  auto h = empty(data.size());
  if (!data.empty()) write(h.binding(), data);
  return h;
}

cubert::handle cpu_server::empty(std::uint64_t size) {
  // A slice handed out again is free only once no queued command holds it: nothing to wait for.
  return cubert::handle(memory_.reserve(size), size);
}

cubert::handle cpu_server::import_memory(std::uint64_t address, std::uint64_t size,
                                         std::shared_ptr<void> owner) {
  return cubert::handle(memory_.adopt(address, size, std::move(owner)), size);
}

std::future<std::vector<bytes>> cpu_server::read(std::vector<cubert::binding> bindings) {
  if (streams_.runs_inline(current_)) {
    errors_.rethrow_if_any();
    std::vector<bytes> out;
    out.reserve(bindings.size());
    for (auto const& b : bindings) {
      auto res = memory_.get_resource(b);
      // Uninitialised heap memory: the copy writes every byte, so no zero-fill first.
      out.push_back(bytes::copy_of({res.host_ptr<std::byte const>(), res.size}));
    }
    return backend::ready_future(std::move(out));
  }
  std::vector<resource> from;
  from.reserve(bindings.size());
  for (auto const& b : bindings) from.push_back(memory_.get_resource(b));
  prepare();
  for (auto const& b : bindings) touch(b, streams::access::read);
  std::promise<std::vector<bytes>> done;
  auto result = done.get_future();
  enqueue(cpu_command(
      [this, from = std::move(from), held = std::move(bindings), done = std::move(done)]() mutable {
        if (failed_into(errors_, done)) return;
        try {
          std::vector<bytes> out;
          out.reserve(from.size());
          for (auto const& res : from) {
            out.push_back(bytes::copy_of({res.host_ptr<std::byte const>(), res.size}));
          }
          done.set_value(std::move(out));
        } catch (...) {
          done.set_exception(std::current_exception());
        }
      }));
  return result;
}

std::future<void> cpu_server::read_into(cubert::binding const& b, std::span<std::byte> dst) {
  auto res = memory_.get_resource(b);
  if (dst.size() != res.size) {
    throw invalid_argument(fmt::format(
        "read_into: the destination holds {} bytes but the binding {}", dst.size(), res.size));
  }
  std::promise<void> done;
  auto result = done.get_future();
  if (streams_.runs_inline(current_)) {
    errors_.rethrow_if_any();
    if (!dst.empty()) std::memcpy(dst.data(), res.host_ptr<std::byte const>(), dst.size());
    done.set_value();
    return result;
  }
  prepare();
  touch(b, streams::access::read);
  enqueue(cpu_command([this, res, dst, held = b, done = std::move(done)]() mutable {
    if (failed_into(errors_, done)) return;
    if (!dst.empty()) std::memcpy(dst.data(), res.host_ptr<std::byte const>(), dst.size());
    done.set_value();
  }));
  return result;
}

std::future<std::vector<bytes>> cpu_server::read_tensor(std::vector<binding_with_meta> tensors) {
  // Gathered from the buffers themselves: the default reads each whole binding first, a 1 GiB
  // copy to read one element of a 1 GiB buffer, and holds every copy at once.
  std::vector<std::span<std::byte const>> src;
  src.reserve(tensors.size());
  for (auto const& t : tensors) {  // Every binding is checked before anything is gathered.
    auto const res = memory_.get_resource(t.binding);
    src.emplace_back(res.host_ptr<std::byte const>(), res.size);
  }
  auto gather = [](std::vector<std::span<std::byte const>> const& from,
                   std::vector<binding_with_meta> const& meta) {
    std::vector<bytes> out;
    out.reserve(meta.size());
    for (std::size_t i = 0; i < meta.size(); ++i) {
      out.push_back(backend::gather_dense(from[i], meta[i]));
    }
    return out;
  };
  if (streams_.runs_inline(current_)) {
    errors_.rethrow_if_any();
    return backend::ready_future(gather(src, tensors));
  }
  prepare();
  for (auto const& t : tensors) touch(t.binding, streams::access::read);
  std::promise<std::vector<bytes>> done;
  auto result = done.get_future();
  enqueue(cpu_command([this, gather, src = std::move(src), tensors = std::move(tensors),
                       done = std::move(done)]() mutable {
    if (failed_into(errors_, done)) return;
    try {
      done.set_value(gather(src, tensors));
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  }));
  return result;
}

void cpu_server::write(cubert::binding const& dst, std::span<std::byte const> data) {
  auto const res = memory_.get_resource(dst);
  if (streams_.runs_inline(current_)) {
    memory::host_write(res, data);
    return;
  }
  backend::check_write(res, data.size());
  if (data.empty()) return;
  prepare();
  auto copy = std::make_unique_for_overwrite<std::byte[]>(data.size());
  std::memcpy(copy.get(), data.data(), data.size());
  touch(dst, streams::access::write);
  enqueue(cpu_command([res, held = dst, copy = std::move(copy), size = data.size()] {
    std::memcpy(res.host_ptr<std::byte>(), copy.get(), size);
  }));
}

void cpu_server::write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) {
  backend::check_writable_layout(dst, data.size());
  auto const res = memory_.get_resource(dst.binding);  // Unknown ones refused, data or none.
  if (data.empty()) return;
  if (streams_.runs_inline(current_)) {
    backend::scatter_dense({res.host_ptr<std::byte>(), res.size}, dst, data);
    return;
  }
  backend::check_tensor_extent(dst, res.size, "write_tensor");
  prepare();
  auto copy = std::make_unique_for_overwrite<std::byte[]>(data.size());
  std::memcpy(copy.get(), data.data(), data.size());
  touch(dst.binding, streams::access::write);
  enqueue(cpu_command([this, res, dst, copy = std::move(copy), size = data.size()] {
    try {
      backend::scatter_dense({res.host_ptr<std::byte>(), res.size}, dst, {copy.get(), size});
    } catch (...) {
      errors_.record(std::current_exception());
    }
  }));
}

void cpu_server::copy(cubert::binding const& src, cubert::binding const& dst) {
  auto const from = memory_.get_resource(src);
  auto const to = memory_.get_resource(dst);
  if (streams_.runs_inline(current_)) {
    memory::host_copy(from, to);
    return;
  }
  if (!backend::check_copy(from, to)) return;
  prepare();
  touch(src, streams::access::read);
  touch(dst, streams::access::write);
  enqueue(cpu_command([from, to, held = std::pair{src, dst}] { memory::host_copy(from, to); }));
}

void cpu_server::fill(cubert::binding const& dst, std::span<std::byte const> pattern) {
  auto const res = memory_.get_resource(dst);
  if (streams_.runs_inline(current_)) {
    memory::host_fill(res, pattern);
    return;
  }
  if (!backend::check_fill(res, pattern)) return;
  prepare();
  touch(dst, streams::access::write);
  enqueue(
      cpu_command([res, held = dst, p = std::vector<std::byte>(pattern.begin(), pattern.end())] {
        memory::host_fill(res, p);
      }));
}

std::byte const* cpu_server::count_bytes(cube_count const& count) const {
  auto res = memory_.get_resource(count.dynamic_binding());
  backend::check_dynamic_count(res);
  return res.host_ptr<std::byte const>();
}

std::array<std::uint32_t, 3> cpu_server::resolve_count(cube_count const& count) const {
  if (!count.is_dynamic()) return count.counts();
  // Launches run in order on this thread, so the buffer already holds what earlier kernels
  // wrote: reading it now is what a device would see when the launch starts.
  std::array<std::uint32_t, 3> out{};
  std::memcpy(out.data(), count_bytes(count), sizeof(out));
  return out;
}

// Everything `execute` refuses before running, but the dynamic count's content: its views of the
// buffers are left in views_.
void cpu_server::check_launch(kernel const& k, bindings const& args) {
  if (!k.valid()) throw launch_error("execute: empty kernel");
  if (k.cpu() == nullptr) {
    throw launch_error(fmt::format("kernel '{}' has no CPU payload", k.name()));
  }
  auto const& hw = properties_.hardware;
  if (k.cube_dim().units() > hw.max_units_per_cube) {
    throw launch_error(fmt::format("kernel '{}': {} units per cube exceed the limit of {}",
                                   k.name(), k.cube_dim().units(), hw.max_units_per_cube));
  }
  backend::refuse_missing_launch_features(
      k, args, hw,
      {"the CPU device does not have", "the CPU device runs every cube on its own",
       "the CPU device runs cubes as tasks that cannot wait for each other"});
  backend::check_launch_arguments(k, args, hw);
  views_.clear();
  for (std::size_t i = 0; i < args.buffers.size(); ++i) {
    try {
      auto res = memory_.get_resource(args.buffers[i]);
      views_.push_back({res.host_ptr<std::byte>(), res.size});
    } catch (invalid_argument const& e) {
      throw invalid_argument(fmt::format("kernel '{}', buffer {}: {}", k.name(), i, e.what()));
    }
  }
}

void cpu_server::check_cubes(kernel const& k, std::array<std::uint32_t, 3> counts) {
  std::uint64_t cubes = 0;
  if (__builtin_mul_overflow(std::uint64_t{counts[0]} * counts[1], std::uint64_t{counts[2]},
                             &cubes)) {
    // run_cubes counts cubes in 64 bits: a wrapped total would silently run a few of them.
    throw launch_error(fmt::format("kernel '{}': cube count ({}, {}, {}) exceeds 2^64 cubes",
                                   k.name(), counts[0], counts[1], counts[2]));
  }
  if (cubes > cpu_queue::max_count) {
    throw launch_error(fmt::format("kernel '{}': cube count ({}, {}, {}) exceeds 2^63 cubes",
                                   k.name(), counts[0], counts[1], counts[2]));
  }
}

// A dynamic count's content is read at each replay, as at each launch: only its binding is
// checked here.
void cpu_server::check_captured_launch(kernel const& k, cube_count const& count,
                                       bindings const& args, execution_mode) {
  check_launch(k, args);
  if (count.is_dynamic()) {
    (void)count_bytes(count);
  } else {
    check_cubes(k, count.counts());
  }
}

void cpu_server::execute(kernel const& k, cube_count const& count, bindings args,
                         execution_mode mode) {
  check_launch(k, args);
  if (!streams_.runs_inline(current_)) {
    queue_launch(k, count, std::move(args), mode);
    return;
  }
  auto const counts = resolve_count(count);
  check_cubes(k, counts);
  kernel_context base;
  base.dim = k.cube_dim();
  base.cube_count = {counts[0], counts[1], counts[2]};
  base.buffers = views_;
  base.bind_scalars(args.scalars);
  base.metadata = args.metadata.data;
  base.mode = mode;
  launch(k, base, counts);
}

void cpu_server::queue_launch(kernel const& k, cube_count const& count, bindings args,
                              execution_mode mode) {
  std::byte const* dynamic = nullptr;
  if (count.is_dynamic()) {
    dynamic = count_bytes(count);
  } else {
    check_cubes(k, count.counts());
  }
  prepare();
  if (count.is_dynamic()) touch(count.dynamic_binding(), streams::access::read);
  for (std::size_t i = 0; i < args.buffers.size(); ++i) {
    touch(args.buffers[i], args.reads_only(i) ? streams::access::read : streams::access::write);
  }
  enqueue(cpu_command([this, k, count, args = std::move(args), views = views_, dynamic, mode] {
    auto counts = count.is_dynamic() ? std::array<std::uint32_t, 3>{} : count.counts();
    if (dynamic != nullptr) {
      // Read when the launch starts, behind the stream's earlier kernels, as a device does.
      std::memcpy(counts.data(), dynamic, sizeof(counts));
      try {
        check_cubes(k, counts);
      } catch (...) {
        errors_.record(std::current_exception());
        return;
      }
    }
    kernel_context base;
    base.dim = k.cube_dim();
    base.cube_count = {counts[0], counts[1], counts[2]};
    base.buffers = views;
    base.bind_scalars(args.scalars);
    base.metadata = args.metadata.data;
    base.mode = mode;
    cpu_streams::launch_turn const turn{streams_};
    launch(k, base, counts);
  }));
}

void cpu_server::launch(kernel const& k, kernel_context const& base,
                        std::array<std::uint32_t, 3> counts) {
  try {
    run_cubes(*k.cpu(), base, counts);
  } catch (std::exception const& e) {
    // A failing kernel is an asynchronous error: it surfaces at the next sync/read/flush.
    {
      std::lock_guard lock(profiler_mutex_);
      profiler_.error(fmt::format("kernel '{}' failed: {}", k.name(), e.what()));
    }
    errors_.record(std::make_exception_ptr(
        launch_error(fmt::format("kernel '{}' failed: {}", k.name(), e.what()))));
  } catch (...) {
    {
      std::lock_guard lock(profiler_mutex_);
      profiler_.error(fmt::format("kernel '{}' failed", k.name()));
    }
    errors_.record(std::make_exception_ptr(
        launch_error(fmt::format("kernel '{}' threw a non-standard exception", k.name()))));
  }
}

void cpu_server::run_cubes(cpu_kernel_fn const& fn, kernel_context const& base,
                           std::array<std::uint32_t, 3> counts) {
  std::uint64_t const cx = counts[0];
  std::uint64_t const cxy = cx * counts[1];
  std::uint64_t const total = cxy * counts[2];
  pool_.run_ranges(total, [&](std::uint64_t begin, std::uint64_t end) {
    // One context per range, its position stepped cube by cube: the divisions and the copy
    // once per range, not per cube.
    kernel_context ctx = base;
    ctx.cube_pos = {static_cast<std::uint32_t>(begin % cx),
                    static_cast<std::uint32_t>((begin / cx) % counts[1]),
                    static_cast<std::uint32_t>(begin / cxy)};
    backend::kernel_body_scope const inside;
    for (std::uint64_t i = begin; i < end; ++i) {
      fn(ctx);
      if (++ctx.cube_pos.x == counts[0]) {
        ctx.cube_pos.x = 0;
        if (++ctx.cube_pos.y == counts[1]) {
          ctx.cube_pos.y = 0;
          ++ctx.cube_pos.z;
        }
      }
    }
  });
}

void cpu_server::flush() {
  memory_.storage().flush();
  errors_.rethrow_if_any();
}

std::future<void> cpu_server::sync() {
  std::promise<void> p;
  auto result = p.get_future();
  if (!streams_.queuing()) {
    if (!failed_into(errors_, p)) p.set_value();
    return result;
  }
  prepare();
  enqueue(cpu_command([this, p = std::move(p)]() mutable {
    if (!failed_into(errors_, p)) p.set_value();
  }));
  return result;
}

std::future<void> cpu_server::sync_device() {
  struct countdown {
    std::atomic<std::size_t> left;
    std::promise<void> done;
  };
  auto const used = streams_.queuing() ? streams_.used() : std::vector<streams::stream_index>{};
  if (used.empty()) return sync();
  auto state = std::make_shared<countdown>();
  state->left.store(used.size());
  auto result = state->done.get_future();
  for (auto const s : used) {
    // Not a position of the stream: no command of another stream orders after it.
    streams_.submit(s, cpu_command([this, state] {
                      if (state->left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
                      if (!failed_into(errors_, state->done)) state->done.set_value();
                    }),
                    false);
  }
  return result;
}

cubert::binding_resource cpu_server::get_resource(cubert::binding const& b) {
  return {b, memory_.get_resource(b)};
}

memory::memory_usage cpu_server::memory_usage() {
  return memory_.usage();
}

std::string cpu_server::memory_report() {
  return memory_.report().to_string();
}

void cpu_server::memory_cleanup() {
  memory_.cleanup(true);
}

// The host clock measures the calling stream's work: it is drained before the clock reads.
profiling_token cpu_server::start_profile() {
  if (streams_.queuing()) streams_.drain(current_);
  std::lock_guard lock(profiler_mutex_);
  return profiler_.start();
}

profile_duration cpu_server::end_profile(profiling_token token) {
  if (streams_.queuing()) streams_.drain(current_);
  std::lock_guard lock(profiler_mutex_);
  return profiler_.stop(token);
}

}  // namespace cubert::cpu
