// SPDX-License-Identifier: Apache-2.0
#include "cuda_server.hpp"

#include "base/exception_text.hpp"
#include "cuda_host_buffer.hpp"
#include "cuda_library.hpp"
#include "cuda_storage.hpp"
#include "cuda_tensor_layout.hpp"
#include "memory/configured_memory.hpp"

#include <cubert/config.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <utility>

namespace cubert::cuda::detail {
namespace {

// cudaMalloc aligns to 256 B; slices keep that so any vector width and TMA box base is legal.
constexpr std::uint64_t slice_alignment = 256;

kernel_disk_cache disk_cache_for(options const& opts) {
  if (opts.kernel_cache_dir) return kernel_disk_cache(*opts.kernel_cache_dir, "cuda");
  auto const& section = config::get().compilation;
  if (!section.cache_enabled) return kernel_disk_cache({}, "cuda");
  return kernel_disk_cache(
      section.cache_dir.empty() ? kernel_disk_cache::default_dir() : section.cache_dir, "cuda");
}

}  // namespace

device_properties make_device_properties(device_info const& info);

cuda_server::cuda_server(int ordinal, options const& opts)
    : info_(query_device(ordinal)),
      props_(make_device_properties(info_)),
      lost_(&lost_flag()),
      launch_blocking_(launch_blocking(opts.launch_blocking)) {
  if (auto fault = lost_fault()) {
    throw device_error(
        fmt::format("cuda:{} cannot be used again in this process: a kernel fault lost it. {}",
                    ordinal, lost_because(ordinal, *fault)));
  }
  CUBERT_CU_CALL(cuDevicePrimaryCtxRetain, &context_, info_.device);
  try {
    CUBERT_CU_CALL(cuCtxSetCurrent, context_);
    // Non-blocking: never serialised with the legacy default stream other libraries may use.
    CUstream first = nullptr;
    bool owned = false;
    if (opts.stream) {
      if (static_cast<CUstream>(*opts.stream) == CU_STREAM_PER_THREAD) {
        // The copy threads would each queue their DMAs on their own thread's stream, unordered
        // with the caller's kernels.
        throw invalid_argument(
            "cuda: options.stream cannot be CU_STREAM_PER_THREAD: it names a different stream on "
            "every thread, and cubert's copy threads would not be ordered with the caller's work");
      }
      first = static_cast<CUstream>(*opts.stream);
    } else {
      CUBERT_CU_CALL(cuStreamCreate, &first, CU_STREAM_NON_BLOCKING);
      owned = true;
    }
    auto const count = opts.streams != 0 ? opts.streams : config::get().streaming.max_streams;
    try {
      if (count == 0 || count > streams::max_streams_limit) {
        throw invalid_argument(fmt::format("cuda: {} streams asked for; 1 to {} are possible",
                                           count, streams::max_streams_limit));
      }
      streams_ = std::make_unique<cuda_streams>(context_, first, owned, count);
    } catch (...) {
      if (owned) driver_state().cuStreamDestroy(first);
      throw;
    }
    order_ = std::make_unique<streams::stream_order>(streams_->count(), *streams_);
    // Stream 0's: the storage frees after a wait for it, and cuMemFree itself waits for every
    // stream of the device.
    auto pages = std::make_unique<cuda_storage>(context_, first, slice_alignment, info_.ordinal);
    pages_ = pages.get();
    memory_ = std::make_unique<memory::memory_manager>(std::move(pages), props_.memory,
                                                       memory::configured_layout(opts.memory));
    memory::apply_configured_persistence(*memory_);
    copies_ = std::make_unique<host::copy_pool>(
        opts.copy_threads, std::chrono::microseconds(config::get().channel.spin_us));
    staging_.resize(streams_->count());
    staging_block_size_ = opts.staging_block_size;
    staging_blocks_ = opts.staging_blocks;
    streaming_downloads_ = opts.streaming_downloads;
    modules_ = std::make_unique<cuda_kernel_cache>(cuda_compiler(disk_cache_for(opts)),
                                                   info_.arch(), [this] {
                                                     memory_->cleanup(true);
                                                     memory_->storage().flush();
                                                   });
    profiler_ = std::make_unique<cuda_profiler>(info_.ordinal, info_.device);
    read_pool_ = cuda_pinned_pool::make(info_.device, opts.read_pool_bytes);
    events_ = cuda_event_pool::make(info_.device);
  } catch (...) {
    // Whatever was made before the failure holds pinned blocks, modules, events or slices of
    // the stream and context: it must go first, as in the destructor.
    release();
    throw;
  }
}

cuda_server::~cuda_server() {
  auto const& api = driver_state();
  api.cuCtxSetCurrent(context_);
  // A fault here was reported (or is lost with the server).
  if (streams_) (void)streams_->synchronize_all();
  release();
}

void cuda_server::release() noexcept {
  auto const& api = driver_state();
  waits_->close();  // A wait outside may still describe its suspects: their kernels go below.
  events_.reset();  // Events out in waits keep the pool, and the context, alive.
  drop_graphs();    // Their nodes name functions of the modules unloaded below.
  // Leased blocks keep the pool alive (each retains the context it needs), but nothing will take
  // a block from it again: unpin the idle and retired ones now, the leased ones as they return.
  if (read_pool_) read_pool_->close();
  read_pool_.reset();
  profiler_.reset();
  modules_.reset();
  staging_.clear();
  copies_.reset();
  memory_.reset();
  order_.reset();
  streams_.reset();
  api.cuDevicePrimaryCtxRelease(info_.device);
}

void cuda_server::check_lost() {
  if (lost_->load(std::memory_order_acquire)) [[unlikely]] {
    throw_lost();
  }
}

void cuda_server::make_current() {
  check_lost();
  check(make_context_current(context_), "cuCtxSetCurrent");
  if (pages_->pending_frees() != 0 || read_pool_->retired_blocks() != 0) [[unlikely]] {
    free_queued_after_a_wait();
  }
}

void cuda_server::drained_here() noexcept {
  // They all completed before the wait ended, if they all went to the stream waited for.
  if (one_stream()) launches_.clear();
  free_queued();
}

void cuda_server::free_queued() noexcept {
  if (!pages_->reap()) return;  // Pages still queued: the device was found busy.
  if (read_pool_->retired_blocks() != 0 && device_idle(context_, streams_->made_at(0))) {
    read_pool_->free_retired();
  }
}

void cuda_server::free_queued_after_a_wait() noexcept {
  // Only a wait that saw the stream pass its point since the last look can have found it
  // drained (short of the stream draining on its own, which the next sync, reservation of a new
  // page or free finds): a busy stream then costs one query per wait, not one per call.
  auto const passes = waits_->passes();
  if (passes == reaped_at_) return;
  reaped_at_ = passes;
  free_queued();
}

void cuda_server::throw_lost() {
  auto const fault = lost_fault();
  if (!fault) return;   // Not reached: the flag is set after the record.
  lost_thrown_ = true;  // What on_failure receives next is this report: it passes it on.
  // The first wait after a fault found at a launch gets the report itself, like any deferred
  // launch error. An ordinary launch error still waiting when the fault was found elsewhere
  // (another client, a profile being resolved) would hide the loss for one more call.
  if (std::exchange(fault_waiting_, false)) errors_.rethrow_if_any();
  errors_.discard();
  // Found elsewhere (another client of the device, or a profile being resolved): this client's
  // own launches since its stream was last idle may hold the kernel that faulted.
  std::string own;
  launches_.forget_through(waits_->accounted());  // A wait outside may have reported them.
  if (launches_.size() != 0) {
    own = fmt::format(" Launched by this client since its stream was last idle, oldest first: {}.",
                      launches_.describe());
    launches_.clear();
  }
  throw device_error(fmt::format(
      "cuda:{} is lost: a kernel fault earlier in this process left CUDA unable to run anything "
      "more on it (restart the process to use it again). {}{}",
      info_.ordinal, lost_because(info_.ordinal, *fault), own));
}

std::exception_ptr cuda_server::on_failure(std::exception_ptr e) noexcept {
  try {
    if (lost_->load(std::memory_order_acquire)) {
      if (std::exchange(lost_thrown_, false)) return e;  // throw_lost's report.
      // Lost while this call ran (another client or a profile found a fault): its failure is
      // most likely the fault's error, and the caller must hear that the device is lost.
      try {
        throw_lost();
      } catch (...) {
        lost_thrown_ = false;
        return std::current_exception();
      }
      lost_thrown_ = false;
      return e;
    }
    // The failure may have come before the context was made current (a refused reservation,
    // a failing cuCtxSetCurrent), and the driver answers a query with the current context's
    // sticky error (the null stream being that context's own): ask about this server's context.
    if (make_context_current(context_) != CUDA_SUCCESS) return e;
    CUresult const state = driver_state().cuStreamQuery(streams_->made_at(0));
    if (!is_sticky(state)) return e;  // An ordinary failure; the device still works.
    std::string what = cubert::detail::what_of(e, "an unknown failure");
    // A failure of cubert's own (a refused reservation, say) does not name the fault itself.
    if (auto const found = describe(state); what.find(found) == std::string::npos) {
      what = fmt::format("cuStreamQuery: {}, found after another failure: {}", found, what);
    }
    return std::make_exception_ptr(device_error(lose_device(what)));
  } catch (...) {
    return e;
  }
}

std::string cuda_server::lose_device(std::string_view what) {
  launches_.forget_through(waits_->accounted());
  auto report = fault_report(what, info_.ordinal, launches_.describe(), launch_blocking_);
  launches_.clear();
  // An ordinary launch error still waiting would otherwise be thrown first and the device's
  // loss only at the call after; the loss is what the caller must hear next.
  errors_.discard();
  mark_lost(info_.ordinal, report);
  return report;
}

cubert::handle cuda_server::empty(std::uint64_t size) {
  // A pool hit makes no driver call: the storage makes the context current where it calls the
  // driver, and this skips `make_current`'s query (8.5 ns of a ~100 ns pair on an H200 host).
  return reporting_failures([&] {
    check_lost();
    return reserve(size);
  });
}

cubert::handle cuda_server::reserve(std::uint64_t size) {
  cubert::handle h(memory_->reserve(size), size);
  // A freed slice handed out again: the new owner's stream waits for its last uses.
  touch(h.binding(), streams::access::write);
  submitted();  // The waits it may have enqueued are the stream's commands.
  return h;
}

cuda_staging& cuda_server::staging() {
  auto& ring = staging_[current_];
  if (!ring) [[unlikely]] {
    ring = std::make_unique<cuda_staging>(context_, stream(), staging_block_size_, staging_blocks_,
                                          *copies_, streaming_downloads_);
  }
  return *ring;
}

cubert::handle cuda_server::create(std::span<std::byte const> data) {
  return on_device([&] { return create_dense(data); });
}

cubert::handle cuda_server::create_dense(std::span<std::byte const> data) {
  auto h = reserve(data.size());
  if (!data.empty()) {
    auto const res = memory_->get_resource(h.binding());
    touch(h.binding(), streams::access::write);
    submission const counted{this};
    staging().upload(res.address(), data);
  }
  return h;
}

void cuda_server::write(cubert::binding const& dst, std::span<std::byte const> data) {
  on_device([&] {
    auto const res = memory_->get_resource(dst);
    backend::check_write(res, data.size());
    if (data.empty()) return;
    touch(dst, streams::access::write);
    submission const counted{this};
    staging().upload(res.address(), data);
  });
}

namespace {

// The rows-at-a-pitch layout `meta` describes, if it is one with padding.
std::optional<tensor_layout> padded_rows(binding_with_meta const& meta) {
  auto const rank = meta.shape.size();
  if (rank < 2 || meta.strides[rank - 1] != 1) return std::nullopt;
  auto const pitch = meta.strides[rank - 2];
  if (pitch <= meta.shape[rank - 1]) return std::nullopt;  // Dense (or overlapping) rows.
  tensor_layout l;
  l.rows = 1;
  for (std::size_t d = 0; d + 1 < rank; ++d) {
    if (d + 2 < rank && meta.strides[d] != meta.strides[d + 1] * meta.shape[d + 1]) {
      return std::nullopt;
    }
    l.rows *= meta.shape[d];
  }
  l.strides = meta.strides;
  l.row_bytes = meta.shape[rank - 1] * meta.elem_size;
  // A size-1 dimension's stride is never used, so it may be huge: its pitch wrapped to a small
  // one (0 for 2^62 × 4 bytes), below the row, and the driver refused the valid copy.
  if (__builtin_mul_overflow(pitch, meta.elem_size, &l.pitch) ||
      __builtin_mul_overflow(l.rows, l.pitch, &l.bytes)) {
    return std::nullopt;
  }
  // A 2D copy's pitch is an int for the driver (CU_DEVICE_ATTRIBUTE_MAX_PITCH): rows farther
  // apart go the default way.
  if (l.pitch > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) return std::nullopt;
  return l;
}

}  // namespace

void cuda_server::write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) {
  // Every other layout is the default's, which checks it (checked here too, it was checked
  // twice, the overlap count of interleaved strides included).
  auto const l = dst.shape.size() == dst.strides.size() ? padded_rows(dst) : std::nullopt;
  if (!l || data.empty()) {
    server::write_tensor(dst, data);
    return;
  }
  backend::check_writable_layout(dst, data.size());  // Also bounds the last row's end.
  on_device([&] {
    auto const res = memory_->get_resource(dst.binding);
    // Against the slice: the 2D copy writes wherever the layout says.
    backend::check_tensor_extent(dst, res.size, "write_tensor");
    touch(dst.binding, streams::access::write);
    upload_padded(res.address(), data, *l);
  });
}

void cuda_server::fill(cubert::binding const& dst, std::span<std::byte const> pattern) {
  on_device([&] {
    auto const res = memory_->get_resource(dst);
    if (!backend::check_fill(res, pattern)) return;
    auto const count = static_cast<std::size_t>(res.size / pattern.size());
    touch(dst, streams::access::write);
    submission const counted{this};
    auto* const on = stream();
    switch (pattern.size()) {
      case 1:
        CUBERT_CU_CALL(cuMemsetD8Async, res.address(), std::to_integer<unsigned char>(pattern[0]),
                       count, on);
        break;
      case 2: {
        std::uint16_t v = 0;
        std::memcpy(&v, pattern.data(), sizeof v);
        CUBERT_CU_CALL(cuMemsetD16Async, res.address(), v, count, on);
        break;
      }
      default: {
        std::uint32_t v = 0;
        std::memcpy(&v, pattern.data(), sizeof v);
        CUBERT_CU_CALL(cuMemsetD32Async, res.address(), v, count, on);
      }
    }
  });
}

void cuda_server::copy(cubert::binding const& src, cubert::binding const& dst) {
  on_device([&] {
    auto const from = memory_->get_resource(src);
    auto const to = memory_->get_resource(dst);
    if (!backend::check_copy(from, to)) return;
    touch(src, streams::access::read);
    touch(dst, streams::access::write);
    submission const counted{this};
    CUBERT_CU_CALL(cuMemcpyDtoDAsync, to.address(), from.address(),
                   static_cast<std::size_t>(to.size), stream());
  });
}

std::vector<cubert::tensor_allocation> cuda_server::create_tensors(
    std::vector<std::span<std::byte const>> const& data,
    std::vector<cubert::tensor_descriptor> const& descriptors) {
  backend::check_tensor_data(data, descriptors);
  return on_device([&] { return create_tensors_now(data, descriptors); });
}

std::vector<cubert::tensor_allocation> cuda_server::create_tensors_now(
    std::vector<std::span<std::byte const>> const& data,
    std::vector<cubert::tensor_descriptor> const& descriptors) {
  std::vector<cubert::tensor_allocation> out;
  out.reserve(data.size());
  for (std::size_t i = 0; i < data.size(); ++i) {
    auto const l = pitched_layout(descriptors[i].shape, descriptors[i].elem_size);
    if (!l.padded()) {
      out.push_back({create_dense(data[i]), l.strides});
      continue;
    }
    auto h = reserve(l.bytes);
    touch(h.binding(), streams::access::write);
    upload_padded(memory_->get_resource(h.binding()).address(), data[i], l);
    out.push_back({std::move(h), l.strides});
  }
  return out;
}

void cuda_server::upload_padded(CUdeviceptr dst, std::span<std::byte const> src,
                                tensor_layout const& l) {
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_HOST;
  copy.srcHost = src.data();
  copy.srcPitch = l.row_bytes;
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = dst;
  copy.dstPitch = l.pitch;
  copy.WidthInBytes = l.row_bytes;
  copy.Height = l.rows;
  // The caller touched the destination; each path below is one command on the stream.
  auto* const on = stream();
  if (is_pinned(src.data(), src.size())) {
    // One DMA, waited for: the caller may reuse `src` as soon as this returns.
    submission const counted{this};
    CUBERT_CU_CALL(cuMemcpy2DAsync, &copy, on);
    CUBERT_CU_CALL(cuStreamSynchronize, on);
    return;
  }
  // The driver's own staging of a pageable 2D copy runs at a seventh of the DMA rate (measured
  // on an H200), so upload densely through the staging ring and spread the rows on the device.
  std::optional<cubert::handle> dense;
  try {
    dense = create_dense(src);
  } catch (out_of_memory const&) {
    submission const counted{this};
    CUBERT_CU_CALL(cuMemcpy2DAsync, &copy, on);  // No room for the dense copy: slow path.
    return;
  }
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcHost = nullptr;
  copy.srcDevice = memory_->get_resource(dense->binding()).address();
  // `dense` is released when this returns; a reuse of its slice waits for this read.
  touch(dense->binding(), streams::access::read);
  submission const counted{this};
  CUBERT_CU_CALL(cuMemcpy2DAsync, &copy, on);
}

std::vector<cubert::tensor_allocation> cuda_server::empty_tensors(
    std::vector<cubert::tensor_descriptor> const& descriptors) {
  return on_device([&] {
    std::vector<cubert::tensor_allocation> out;
    out.reserve(descriptors.size());
    for (auto const& d : descriptors) {
      (void)backend::tensor_bytes(d.shape, d.elem_size, "empty_tensors");  // Refuses overflow.
      auto l = pitched_layout(d.shape, d.elem_size);
      out.push_back({reserve(l.bytes), std::move(l.strides)});
    }
    return out;
  });
}

void cuda_server::flush() {
  // Launches are submitted by the driver as they are made; what is left to report is a fault
  // the device has already hit (the query does not wait, and says "not ready" while work runs),
  // before a deferred error, as a sync reports them.
  on_device([&] {
    CUresult const state = driver().cuStreamQuery(stream());
    if (state != CUDA_ERROR_NOT_READY) check(state, "cuStreamQuery, flushing");
  });
  errors_.rethrow_if_any();
}

std::future<void> cuda_server::sync() {
  try {
    make_current();
    // Rare: a waiting launch error goes after the wait, so that a fault behind it is what the
    // caller hears; it waits here, inside the server.
    if (errors_.pending()) {
      sync_here();
      return backend::ready_future();
    }
    // Pages and pinned blocks given back while the device was busy are freed now if it has
    // drained, else by the first call after the wait that finds it idle (make_current):
    // cuMemFree and cuMemFreeHost wait for the whole device, which is not the server's to do for
    // a caller that waits outside.
    free_queued();
    return after<when_dropped::forget>(mark_stream("sync"));  // Dropped, it waits for nothing.
  } catch (...) {
    return backend::failed_future<void>(on_failure(std::current_exception()));
  }
}

std::future<void> cuda_server::sync_device() {
  if (one_stream()) return sync();
  auto const caller = current_;
  try {
    make_current();
    // Stream 0 waits, on the device, for what every other stream was given so far; a wait
    // for stream 0 then covers the device's work.
    for (streams::stream_index s = 1; s < streams_->count(); ++s) {
      if (streams_->is_made(s)) order_->order_after(0, s);
    }
    current_ = 0;
    auto done = sync();
    current_ = caller;
    return done;
  } catch (...) {
    current_ = caller;
    return backend::failed_future<void>(on_failure(std::current_exception()));
  }
}

void cuda_server::sync_here() {
  CUBERT_CU_CALL(cuStreamSynchronize, stream());
  if (one_stream()) launches_.clear();  // Other streams' launches may still run.
  staging().on_stream_idle();
  // Queued pages and retired pinned blocks, if every stream of the device is idle: this one is,
  // but a free while another client's stream runs would wait for it here, inside the server.
  free_queued();
  errors_.rethrow_if_any();
}

cubert::binding_resource cuda_server::get_resource(cubert::binding const& b) {
  return cubert::binding_resource{b, memory_->get_resource(b)};
}

memory::memory_usage cuda_server::memory_usage() {
  return memory_->usage();
}

std::string cuda_server::memory_report() {
  return memory_->report().to_string();
}

void cuda_server::memory_cleanup() {
  on_device([&] {
    memory_->cleanup(true);
    memory_->storage().flush();
    read_pool_->release_idle();
  });
}

profiling_token cuda_server::start_profile() {
  return on_device([&] { return profiler_->start(stream()); });
}

profile_duration cuda_server::end_profile(profiling_token token) {
  return on_device([&] { return profiler_->stop(token, stream()); });
}

}  // namespace cubert::cuda::detail
