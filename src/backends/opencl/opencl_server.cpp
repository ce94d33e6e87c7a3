// SPDX-License-Identifier: Apache-2.0
#include "opencl_server.hpp"

#include "memory/configured_memory.hpp"
#include "opencl_library.hpp"
#include "opencl_storage.hpp"
#include "opencl_tensor_rect.hpp"

#include <cubert/config.hpp>
#include <cubert/detail/exit_threads.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <utility>

namespace cubert::opencl::detail {
namespace {

cubert::detail::kernel_disk_cache disk_cache_for(options const& opts) {
  using cubert::detail::kernel_disk_cache;
  if (opts.kernel_cache_dir) return kernel_disk_cache(*opts.kernel_cache_dir, "opencl");
  auto const& section = config::get().compilation;
  if (!section.cache_enabled) return kernel_disk_cache({}, "opencl");
  return kernel_disk_cache(
      section.cache_dir.empty() ? kernel_disk_cache::default_dir() : section.cache_dir, "opencl");
}

// An owned reference to a newly enqueued command's event.
event_ptr take(cl_event e) noexcept {
  return event_ptr(e);
}

}  // namespace

opencl_server::opencl_server(int ordinal, options const& opts)
    : device_(&device_at(ordinal)),
      props_(make_device_properties(*device_, ordinal)),
      process_(cubert::detail::process_generation()) {
  auto const& api = opencl();
  cl_int err = CL_SUCCESS;
  try {
    cl_context_properties const props[] = {
        CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(device_->platform), 0};
    context_ = api.clCreateContext(props, 1, &device_->device, nullptr, nullptr, &err);
    check(err, "clCreateContext");
    streams_ = std::make_unique<opencl_streams>(
        context_, device_->device,
        opts.streams != 0 ? opts.streams : config::get().streaming.max_streams);
    order_ = std::make_unique<streams::stream_order>(streams_->count(), *streams_);
    auto storage = std::make_unique<opencl_storage>(context_, props_.memory.alignment,
                                                    device_->max_alloc, device_->global_memory);
    pages_ = storage.get();
    memory_ = std::make_unique<memory::memory_manager>(std::move(storage), props_.memory,
                                                       memory::configured_layout(opts.memory));
    memory::apply_configured_persistence(*memory_);
    kernels_ = std::make_unique<opencl_kernel_cache>(context_, *device_, disk_cache_for(opts));
    profiler_ = std::make_unique<opencl_profiler>();
    // A CPU device's buffers are host memory: staging would only add a copy.
    if (opts.pinned_staging.value_or((device_->type & CL_DEVICE_TYPE_CPU) == 0)) {
      copies_ = std::make_unique<host::copy_pool>(opts.copy_threads);
      staging_ = std::make_unique<opencl_staging>(context_, streams_->at(0),
                                                  opts.staging_block_size, opts.staging_blocks,
                                                  *copies_, errors_, opts.streaming_downloads);
    }
  } catch (...) {
    release();
    throw;
  }
}

opencl_server::~opencl_server() {
  if (process_ != cubert::detail::process_generation()) [[unlikely]] {
    // A fork() child: every driver object is the parent's, and a call would wait for the
    // parent's threads (PoCL) or fail; the objects are left, as the process will leave them.
    (void)staging_.release();
    (void)profiler_.release();
    (void)kernels_.release();
    (void)memory_.release();
    (void)order_.release();
    (void)streams_.release();
    (void)new std::deque<upload>(std::move(uploads_));  // Their events would be waited for.
    return;
  }
  release();
}

void opencl_server::refuse_forked() const {
  if (process_ != cubert::detail::process_generation()) [[unlikely]] {
    throw unsupported(fmt::format("opencl:{}: {}", props_.index, forked_reason()));
  }
}

void opencl_server::release() noexcept {
  auto const& api = opencl_state();
  // Work still queued may use the buffers and programs; OpenCL keeps what a command uses alive,
  // but the staging blocks are ours.
  if (streams_) streams_->finish_all();
  uploads_.clear();
  staging_.reset();
  copies_.reset();
  profiler_.reset();
  kernels_.reset();
  memory_.reset();
  pages_ = nullptr;
  order_.reset();
  streams_.reset();
  if (context_) api.clReleaseContext(context_);
  context_ = nullptr;
}

void opencl_server::make_room() {
  memory_->cleanup(true);
  streams_->finish_all();  // A released buffer goes once the commands that use it are done.
}

void opencl_server::refuse_first_use(std::string_view what, cl_int r) {
  throw out_of_memory(fmt::format(
      "{} failed: {}: the device could not back a buffer at its first use, also after cubert "
      "gave back its idle pages\n{}",
      what, error_name(r), memory_report()));
}

void opencl_server::touch(cubert::binding const& b, streams::access how) {
  // Every binding here was resolved first, so its slice is this manager's.
  if (auto* marks = memory_->marks_of(b.memory().control())) order_->use(*marks, current_, how);
}

cubert::handle opencl_server::empty(std::uint64_t size) {
  refuse_forked();
  cubert::handle h(memory_->reserve(size), size);
  // A freed slice handed out again: the new owner's stream waits for its last uses.
  touch(h.binding(), streams::access::write);
  submitted();  // The waits it may have enqueued are the stream's commands.
  return h;
}

void opencl_server::fill(cubert::binding const& dst, std::span<std::byte const> pattern) {
  refuse_forked();
  auto const res = memory_->get_resource(dst);
  if (!backend::check_fill(res, pattern)) return;
  touch(dst, streams::access::write);
  submission const counted{this};
  auto* const q = queue();
  enqueue_backed("clEnqueueFillBuffer", [&] {
    return opencl().clEnqueueFillBuffer(q, static_cast<cl_mem>(res.native), pattern.data(),
                                        pattern.size(), res.offset, res.size, 0, nullptr, nullptr);
  });
}

void opencl_server::copy(cubert::binding const& src, cubert::binding const& dst) {
  refuse_forked();
  auto const from = memory_->get_resource(src);
  auto const to = memory_->get_resource(dst);
  if (!backend::check_copy(from, to)) return;
  touch(src, streams::access::read);
  touch(dst, streams::access::write);
  submission const counted{this};
  auto* const q = queue();
  enqueue_backed("clEnqueueCopyBuffer", [&] {
    return opencl().clEnqueueCopyBuffer(q, static_cast<cl_mem>(from.native),
                                        static_cast<cl_mem>(to.native), from.offset, to.offset,
                                        from.size, 0, nullptr, nullptr);
  });
}

loaded_kernel& opencl_server::prepare(kernel const& k, bindings const& args, execution_mode mode) {
  if (!k.valid()) throw launch_error("execute: empty kernel");
  auto const& hw = props_.hardware;
  // What the device lacks comes before what the kernel lacks: a CUDA-only kernel that binds
  // tensor maps is refused as unsupported here, as on the CPU device.
  backend::refuse_missing_launch_features(
      k, args, hw,
      {"OpenCL devices do not have", "OpenCL has no thread-block clusters",
       "OpenCL 1.2 has no cooperative launches"});
  if (k.opencl_source() == nullptr) {
    throw launch_error(fmt::format("kernel '{}' has no OpenCL payload", k.name()));
  }
  auto const dim = k.cube_dim();
  if (dim.units() > hw.max_units_per_cube || dim.x > hw.max_cube_dim.x ||
      dim.y > hw.max_cube_dim.y || dim.z > hw.max_cube_dim.z) {
    throw launch_error(fmt::format(
        "kernel '{}': a cube of ({}, {}, {}) units exceeds this device's work-group limits "
        "({} units, ({}, {}, {}))",
        k.name(), dim.x, dim.y, dim.z, hw.max_units_per_cube, hw.max_cube_dim.x, hw.max_cube_dim.y,
        hw.max_cube_dim.z));
  }
  if (k.shared_memory() > hw.max_shared_memory_size) {
    throw launch_error(fmt::format(
        "kernel '{}': {} bytes of dynamic shared memory exceed the device's {} bytes of local "
        "memory",
        k.name(), k.shared_memory(), hw.max_shared_memory_size));
  }
  backend::check_launch_arguments(k, args, hw);
  // Bad bindings are refused before anything is built.
  bound_.clear();
  auto const align = props_.memory.alignment;
  for (std::size_t i = 0; i < args.buffers.size(); ++i) {
    try {
      auto const res = memory_->get_resource(args.buffers[i]);
      bound_.push_back({res, res.offset % align != 0 && res.size != 0});
    } catch (invalid_argument const& e) {
      throw invalid_argument(fmt::format("kernel '{}', buffer {}: {}", k.name(), i, e.what()));
    }
  }
  // A staged binding is copied back whole after the kernel: a write through another binding
  // that shares some of its bytes would be undone.
  for (std::size_t i = 0; i < bound_.size(); ++i) {
    if (!bound_[i].staged) continue;
    auto const& a = bound_[i].res;
    for (std::size_t j = 0; j < bound_.size(); ++j) {
      auto const& b = bound_[j].res;
      bool const same = b.offset == a.offset && b.size == a.size;
      if (j == i || b.native != a.native || same || b.size == 0) continue;
      if (a.offset < b.offset + b.size && b.offset < a.offset + a.size) {
        throw invalid_argument(fmt::format(
            "kernel '{}', buffer {}: it starts at byte {} of its page, where OpenCL cannot bind a "
            "buffer (the device's base-address alignment is {} bytes), so cubert runs it through "
            "a copy; buffer {} shares some of its bytes, which the copy would not see",
            k.name(), i, a.offset, align, j));
      }
    }
  }
  auto& fn = kernels_->get(k, mode);
  if (dim.units() > fn.max_work_group) {
    throw launch_error(fmt::format(
        "kernel '{}': a cube of {} units exceeds the {} this kernel may run per work-group on "
        "{} (CL_KERNEL_WORK_GROUP_SIZE)",
        k.name(), dim.units(), fn.max_work_group, props_.name));
  }
  std::size_t params =
      args.buffers.size() + (args.metadata.data.empty() ? 0 : 1) + (k.shared_memory() > 0 ? 1 : 0);
  for (auto const& [type, group] : args.scalars) params += group.length;
  if (params != fn.num_args) {
    throw launch_error(fmt::format(
        "kernel '{}' takes {} parameters; this launch gives {} ({} buffers, scalars, {} "
        "metadata, {} dynamic shared memory: see cubert/opencl.hpp for the order)",
        k.name(), fn.num_args, params, args.buffers.size(), args.metadata.data.empty() ? "no" : "1",
        k.shared_memory() > 0 ? "1" : "no"));
  }
  return fn;
}

void opencl_server::bind() {
  auto const& api = opencl();
  for (std::size_t i = 0; i < bound_.size(); ++i) {
    auto& b = bound_[i];
    auto* const page = static_cast<cl_mem>(b.res.native);
    if (b.res.offset == 0 || b.res.size == 0) {
      b.mem = page;  // The kernel reaches no byte of an empty binding.
      continue;
    }
    // The same range bound twice shares one buffer, as it shares its bytes.
    for (std::size_t j = 0; j < i && !b.mem; ++j) {
      auto const& o = bound_[j].res;
      if (o.native == b.res.native && o.offset == b.res.offset && o.size == b.res.size) {
        b.mem = bound_[j].mem;
      }
    }
    if (b.mem) continue;
    cl_int err = CL_SUCCESS;
    if (!b.staged) {
      b.mem = pages_->region(page, b.res.offset, b.res.size);  // Kept with the page.
      continue;
    }
    b.mem = api.clCreateBuffer(context_, CL_MEM_READ_WRITE, b.res.size, nullptr, &err);
    check(err, "clCreateBuffer (a scratch buffer for a binding OpenCL cannot bind in place)");
    b.owns_mem = true;
    ++held_by_launches_;
    if (b.staged) {
      check(api.clEnqueueCopyBuffer(launch_queue_, page, b.mem, b.res.offset, 0, b.res.size, 0,
                                    nullptr, nullptr),
            "clEnqueueCopyBuffer");
      b.copy_back = true;
    }
  }
}

std::size_t opencl_server::sub_buffers_kept() const noexcept {
  return pages_ ? pages_->regions_kept() : 0;
}

void opencl_server::unbind() noexcept {
  auto const& api = opencl_state();
  for (auto& b : bound_) {
    if (b.owns_mem) {
      if (b.copy_back) {
        cl_int const r =
            api.clEnqueueCopyBuffer(launch_queue_, b.mem, static_cast<cl_mem>(b.res.native), 0,
                                    b.res.offset, b.res.size, 0, nullptr, nullptr);
        if (r != CL_SUCCESS) {
          errors_.record(std::make_exception_ptr(device_error(fmt::format(
              "clEnqueueCopyBuffer (copying a staged binding back after its kernel) failed: {}",
              error_name(r)))));
        }
      }
      api.clReleaseMemObject(b.mem);
      --held_by_launches_;
    }
    b.owns_mem = false;
    b.copy_back = false;
    b.mem = nullptr;
  }
}

void opencl_server::set_arguments(kernel const& k, loaded_kernel& fn, bindings const& args) {
  auto const& api = opencl();
  cl_uint index = 0;
  auto const set = [&](std::size_t size, void const* value, std::string_view what) {
    cl_int const r = api.clSetKernelArg(fn.kernel, index, size, value);
    if (r != CL_SUCCESS) {
      throw launch_error(fmt::format(
          "kernel '{}': parameter {} ({}, {} bytes) is refused: clSetKernelArg returned {}{}",
          k.name(), index, what, size, error_name(r),
          r == CL_INVALID_ARG_SIZE ? " (the kernel declares it with another size)" : ""));
    }
    ++index;
  };
  for (auto& b : bound_) set(sizeof(cl_mem), &b.mem, "buffer");
  for (auto const& [type, group] : args.scalars) {
    auto const data = group.bytes();
    auto const size = elem_size(type);
    for (std::size_t j = 0; j < group.length; ++j) {
      set(size, data.data() + j * size, to_string(type));
    }
  }
  if (!args.metadata.data.empty()) {
    set(args.metadata.data.size() * sizeof(std::uint32_t), args.metadata.data.data(), "metadata");
  }
  if (k.shared_memory() > 0) set(k.shared_memory(), nullptr, "dynamic shared memory");
}

cubert::resource opencl_server::count_resource(cube_count const& count) const {
  auto res = memory_->get_resource(count.dynamic_binding());
  backend::check_dynamic_count(res);
  return res;
}

std::array<std::uint32_t, 3> opencl_server::resolve_count(kernel const& k,
                                                          cube_count const& count) {
  std::array<std::uint32_t, 3> grid{};
  if (!count.is_dynamic()) {
    grid = count.counts();
  } else {
    auto const res = count_resource(count);
    touch(count.dynamic_binding(), streams::access::read);
    // OpenCL 1.2 has no indirect dispatch: the count is read once the work before it is done.
    CUBERT_CL(clEnqueueReadBuffer, queue(), static_cast<cl_mem>(res.native), CL_TRUE, res.offset,
              sizeof grid, grid.data(), 0, nullptr, nullptr);
  }
  auto const& max = props_.hardware.max_cube_count;
  for (std::size_t i = 0; i < 3; ++i) {
    if (grid[i] > max[i]) {
      throw launch_error(
          fmt::format("kernel '{}': cube count ({}, {}, {}) exceeds the limit "
                      "({}, {}, {})",
                      k.name(), grid[0], grid[1], grid[2], max[0], max[1], max[2]));
    }
  }
  return grid;
}

void opencl_server::execute(kernel const& k, cube_count const& count, bindings args,
                            execution_mode mode) {
  refuse_forked();
  auto& fn = prepare(k, args, mode);
  auto const grid = resolve_count(k, count);
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return;  // Nothing to run.
  // A kernel may write any buffer it is given, unless the launch marks it read-only.
  for (std::size_t i = 0; i < args.buffers.size(); ++i) {
    touch(args.buffers[i], args.reads_only(i) ? streams::access::read : streams::access::write);
  }
  submission const counted{this};
  launch_queue_ = queue();
  struct binding_scope {
    opencl_server* self;
    ~binding_scope() { self->unbind(); }
  } const scope{this};
  bind();
  set_arguments(k, fn, args);
  auto const dim = k.cube_dim();
  std::size_t const local[3] = {dim.x, dim.y, dim.z};
  std::size_t const global[3] = {std::size_t{grid[0]} * dim.x, std::size_t{grid[1]} * dim.y,
                                 std::size_t{grid[2]} * dim.z};
  // Trailing dimensions of one are left out: a kernel sees the same ids, sizes and counts (1 and
  // 0 past work_dim), and a launch of fewer dimensions is cheaper to enqueue on some platforms.
  cl_uint const work_dim = global[2] > 1 || local[2] > 1   ? 3
                           : global[1] > 1 || local[1] > 1 ? 2
                                                           : 1;
  auto const enqueue = [&] {
    return opencl().clEnqueueNDRangeKernel(launch_queue_, fn.kernel, work_dim, nullptr, global,
                                           local, 0, nullptr, nullptr);
  };
  cl_int r = enqueue();
  if (r == CL_MEM_OBJECT_ALLOCATION_FAILURE) [[unlikely]] {  // As enqueue_backed, with its own
    make_room();                                             // message for other failures.
    r = enqueue();
    if (r == CL_MEM_OBJECT_ALLOCATION_FAILURE) {
      refuse_first_use(fmt::format("kernel '{}': clEnqueueNDRangeKernel", k.name()), r);
    }
  }
  if (r != CL_SUCCESS) {
    throw launch_error(fmt::format(
        "kernel '{}' over ({}, {}, {}) cubes of ({}, {}, {}) units: clEnqueueNDRangeKernel "
        "failed: {}",
        k.name(), grid[0], grid[1], grid[2], dim.x, dim.y, dim.z, error_name(r)));
  }
}

// Builds the kernel now as well, so that a replay compiles nothing.
void opencl_server::check_captured_launch(kernel const& k, cube_count const& count,
                                          bindings const& args, execution_mode mode) {
  (void)prepare(k, args, mode);
  if (count.is_dynamic()) (void)count_resource(count);
}

void opencl_server::flush() {
  refuse_forked();
  streams_->flush_all();
  reap_uploads(0);
  errors_.rethrow_if_any();
}

std::future<void> opencl_server::sync() {
  refuse_forked();
  reap_uploads(0);
  errors_.rethrow_if_any();
  auto* const q = queue();
  cl_event e = nullptr;
  CUBERT_CL(clEnqueueMarkerWithWaitList, q, 0, nullptr, &e);
  auto marker = take(e);
  CUBERT_CL(clFlush, q);
  return std::async(std::launch::deferred,
                    [marker = std::move(marker)] { wait_for(marker.get(), "sync"); });
}

std::future<void> opencl_server::sync_device() {
  refuse_forked();
  reap_uploads(0);
  errors_.rethrow_if_any();
  return std::async(std::launch::deferred, [markers = streams_->mark_all()] {
    for (auto const& m : markers) wait_for(m.get(), "sync_device");
  });
}

cubert::binding_resource opencl_server::get_resource(cubert::binding const& b) {
  return {b, memory_->get_resource(b)};
}

memory::memory_usage opencl_server::memory_usage() {
  return memory_->usage();
}

std::string opencl_server::memory_report() {
  return memory_->report().to_string();
}

void opencl_server::memory_cleanup() {
  refuse_forked();
  memory_->cleanup(true);
  if (staging_) staging_->release_blocks();
}

profiling_token opencl_server::start_profile() {
  refuse_forked();
  return profiler_->start(streams_->timed(current_));
}

profile_duration opencl_server::end_profile(profiling_token token) {
  return profiler_->stop(token, streams_->timed(current_));
}

}  // namespace cubert::opencl::detail
