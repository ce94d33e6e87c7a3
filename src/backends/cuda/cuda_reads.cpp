// SPDX-License-Identifier: Apache-2.0
// cuda_server's reads: downloads into pooled pinned blocks, queued on the stream and waited for
// in the returned future, on the caller's thread, outside the server.
#include "cuda_host_buffer.hpp"
#include "cuda_library.hpp"
#include "cuda_server.hpp"
#include "cuda_storage.hpp"

#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <optional>
#include <utility>

namespace cubert::cuda::detail {
namespace {

// Declared after memory that downloads are queued into: when an exception unwinds it before the
// memory was handed to a wait (a later download failing, no event to be had), it waits for the
// stream, so no DMA lands in a pinned block after the block is handed out again or unpinned.
class drain_if_unwinding {
 public:
  drain_if_unwinding(CUstream stream, bool const& queued) noexcept
      : stream_(stream), queued_(queued), unwinding_(std::uncaught_exceptions()) {}
  drain_if_unwinding(drain_if_unwinding const&) = delete;
  drain_if_unwinding& operator=(drain_if_unwinding const&) = delete;
  ~drain_if_unwinding() {
    if (queued_ && std::uncaught_exceptions() > unwinding_) {
      (void)drain_stream(stream_);
    }
  }

 private:
  CUstream stream_;
  bool const& queued_;
  int unwinding_;
};

}  // namespace

std::optional<bytes> cuda_server::pooled_block(std::size_t size) {
  if (!read_pool_->pools(size)) return std::nullopt;
  try {
    return bytes(read_pool_->acquire(size), size);
  } catch (out_of_memory const&) {
    // The host will not pin more: give back what is cached, once the device is idle (unpinning
    // waits for it); the caller reads through pageable memory.
    read_pool_->retire_idle();
    return std::nullopt;
  }
}

bytes cuda_server::read_destination(std::size_t size) {
  if (auto block = pooled_block(size)) return std::move(*block);
  // Fresh pages would otherwise take every page fault on the copy threads' first writes, one
  // chunk at a time; fault them in up front, all threads at once.
  auto out = bytes::uninitialized(size);
  staging().populate(out.span());
  return out;
}

bytes cuda_server::read_one(cubert::binding const& b, bool& queued) {
  auto const res = memory_->get_resource(b);
  auto const size = static_cast<std::size_t>(res.size);
  if (size == 0) return {};
  // A pooled block is pinned, so the download is one DMA into resident pages, waited for
  // outside the server.
  auto out = read_destination(size);
  touch(b, streams::access::read);
  submission const counted{this};
  if (staging().download_queued(out.span(), res.address())) {
    queued = true;
    return out;
  }
  staging().download(out.span(), res.address());
  drained_here();
  return out;
}

stream_point cuda_server::mark_stream(char const* what) {
  auto event = events_->acquire();
  CUBERT_CU_CALL(cuEventRecord, event.get(), stream());
  // A wait on one stream says nothing of the launches on the others.
  if (one_stream()) launches_.forget_through(waits_->accounted());
  return stream_point(std::move(event), {waits_, launches_, info_.ordinal, launch_blocking_}, what);
}

std::future<void> cuda_server::read_into(cubert::binding const& b, std::span<std::byte> dst) {
  auto const res = on_device([&] {
    return memory_->get_resource(b);  // An unknown binding throws now.
  });
  if (dst.size() != res.size) {
    throw invalid_argument(fmt::format(
        "read_into: the destination holds {} bytes but the binding {}", dst.size(), res.size));
  }
  try {
    errors_.rethrow_if_any();
    if (!dst.empty()) {  // An empty read waits for nothing, so it proves no launch finished.
      bool queued = false;
      std::optional<bytes> block;  // Declared before the drain, which goes first.
      drain_if_unwinding const drain(stream(), queued);
      touch(b, streams::access::read);
      submission const counted{this};
      queued = staging().download_queued(dst, res.address());
      if (queued) {
        // Dropped unwaited, the future still waits: the caller may free `dst` right after.
        return after(mark_stream("read_into"));
      }
      // A small pageable read is one chunk on one thread in the staging ring too; through a
      // pooled pinned block its wait and copy-out run on the waiting thread instead.
      if (dst.size() <= cuda_staging::min_chunk) block = pooled_block(dst.size());
      if (block && staging().download_queued(block->span(), res.address())) {
        queued = true;
        // Dropped unwaited, the future still copies: `dst` is written either way, as by a DMA.
        auto point = mark_stream("read_into");  // Before the block moves: see drain_if_unwinding.
        return after<when_dropped::finish>(
            std::move(point), std::move(*block),
            [dst](bytes landed) { std::memcpy(dst.data(), landed.data(), dst.size()); });
      }
      staging().download(dst, res.address());
      drained_here();
    }
    return backend::ready_future();
  } catch (...) {
    return backend::failed_future<void>(on_failure(std::current_exception()));
  }
}

host_buffer cuda_server::alloc_host(std::uint64_t size) {
  return on_device([&] {
    auto const n = static_cast<std::size_t>(size);
    // A block of the read pool where it keeps the size: pinning costs milliseconds per 100 MiB
    // and unpinning waits for the device, so a buffer dropped goes back to the pool for the
    // next one. Larger ones are pinned for themselves.
    auto const pin = [&] {
      return read_pool_->pools(n) ? read_pool_->acquire(n) : make_pinned_buffer(info_.device, n);
    };
    try {
      return pin();
    } catch (out_of_memory const&) {
      read_pool_->release_idle();  // The host will not pin more: unpin what is cached, retry.
      return pin();
    }
  });
}

std::future<std::vector<bytes>> cuda_server::read(std::vector<cubert::binding> bindings) {
  return read_bindings(std::move(bindings), true);
}

bytes cuda_server::read_for_write(cubert::binding const& b) {
  std::vector<cubert::binding> one{b};
  return std::move(read_bindings(std::move(one), false).get().at(0));
}

std::future<std::vector<bytes>> cuda_server::read_bindings(std::vector<cubert::binding> bindings,
                                                           bool report_deferred) {
  on_device([&] {
    // Resolve every binding first: a bad one is the caller's error, thrown now.
    for (auto const& b : bindings) (void)memory_->get_resource(b);
  });
  try {
    if (report_deferred) errors_.rethrow_if_any();
    std::vector<bytes> out;
    out.reserve(bindings.size());
    bool queued = false;
    drain_if_unwinding const drain(stream(), queued);
    for (auto const& b : bindings) out.push_back(read_one(b, queued));
    if (!queued) return backend::ready_future(std::move(out));
    auto point = mark_stream("read");  // Before `out` moves: see drain_if_unwinding.
    return after(std::move(point), std::move(out), [](std::vector<bytes> r) { return r; });
  } catch (...) {
    return backend::failed_future<std::vector<bytes>>(on_failure(std::current_exception()));
  }
}

std::future<std::vector<bytes>> cuda_server::read_tensor(std::vector<binding_with_meta> tensors) {
  on_device([] {});
  try {
    errors_.rethrow_if_any();
    // What the caller got wrong is thrown now, before anything is queued.
    std::vector<bool> dense(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      auto const& t = tensors[i];
      auto const dense_bytes = backend::tensor_bytes(t.shape, t.elem_size, "read_tensor");
      auto const size = memory_->get_resource(t.binding).size;
      dense[i] = t.strides == backend::contiguous_strides(t.shape) && size == dense_bytes;
      if (!dense[i]) backend::check_gather(t, size);
    }
    std::vector<bytes> raw;
    raw.reserve(tensors.size());
    bool queued = false;
    drain_if_unwinding const drain(stream(), queued);
    for (auto const& t : tensors) raw.push_back(read_one(t.binding, queued));
    // Gathering strided ones waits for their bytes: on the caller's thread when they come by DMA.
    auto gather = [tensors = std::move(tensors), dense = std::move(dense)](std::vector<bytes> r) {
      std::vector<bytes> out;
      out.reserve(r.size());
      for (std::size_t i = 0; i < r.size(); ++i) {
        out.push_back(dense[i] ? std::move(r[i]) : backend::gather_dense(r[i], tensors[i]));
      }
      return out;
    };
    if (!queued) return backend::ready_future(gather(std::move(raw)));
    auto point = mark_stream("read_tensor");  // Before `raw` moves: see drain_if_unwinding.
    return after(std::move(point), std::move(raw), std::move(gather));
  } catch (invalid_argument const&) {
    throw;
  } catch (...) {
    return backend::failed_future<std::vector<bytes>>(on_failure(std::current_exception()));
  }
}

}  // namespace cubert::cuda::detail
