// SPDX-License-Identifier: Apache-2.0
// The OpenCL server's reads: non-blocking reads on the caller's stream's queue, waited for by the
// deferred futures on the caller's thread.
#include "opencl_library.hpp"
#include "opencl_server.hpp"
#include "opencl_tensor_rect.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>

#include <optional>
#include <utility>

namespace cubert::opencl::detail {
namespace {

// An owned reference to a newly enqueued command's event.
event_ptr take(cl_event e) noexcept {
  return event_ptr(e);
}

}  // namespace

std::future<std::vector<bytes>> opencl_server::read(std::vector<cubert::binding> bindings) {
  refuse_forked();
  errors_.rethrow_if_any();
  std::vector<cubert::resource> sources;
  sources.reserve(bindings.size());
  for (auto const& b : bindings) sources.push_back(memory_->get_resource(b));
  for (auto const& b : bindings) touch(b, streams::access::read);
  submission const counted{this};
  auto* const q = queue();
  struct pending {
    std::vector<bytes> out;
    guarded_event last;  // Declared after `out`: destroyed, so waited for, first.
  } p;
  p.out.reserve(sources.size());
  for (auto const& src : sources) {
    auto& dst = p.out.emplace_back(bytes::uninitialized(src.size));
    if (src.size == 0) continue;
    if (staged(dst.data(), dst.size())) {
      // Behind the reads queued before it on this in-order queue, so those are done too.
      staged_transfer("clEnqueueReadBuffer (staged)", [&] {
        staging_->download(q, dst.span(), static_cast<cl_mem>(src.native), src.offset);
      });
      continue;
    }
    cl_event e = nullptr;
    CUBERT_CL(clEnqueueReadBuffer, q, static_cast<cl_mem>(src.native), CL_FALSE, src.offset,
              src.size, dst.data(), 0, nullptr, &e);
    // In order: the last read's completion covers the ones before it.
    (void)take(p.last.release());
    p.last = guarded_event(e);
  }
  CUBERT_CL(clFlush, q);
  return std::async(std::launch::deferred, [p = std::move(p)]() mutable {
    if (p.last) wait_for(p.last.get(), "read");
    return std::move(p.out);
  });
}

std::future<std::vector<bytes>> opencl_server::read_tensor(std::vector<binding_with_meta> tensors) {
  refuse_forked();
  errors_.rethrow_if_any();
  std::vector<cubert::resource> sources;
  sources.reserve(tensors.size());
  for (auto const& t : tensors) {  // Every tensor is checked before anything is queued.
    sources.push_back(memory_->get_resource(t.binding));
    backend::check_gather(t, sources.back().size);
  }
  for (auto const& t : tensors) touch(t.binding, streams::access::read);
  submission const counted{this};
  auto* const q = queue();
  struct pending {
    std::vector<bytes> out;
    std::vector<std::optional<bytes>> whole;  // Read whole, gathered in the future.
    std::vector<binding_with_meta> metas;
    guarded_event last;  // Declared last: destroyed, so waited for, first.
  } p;
  p.out.reserve(tensors.size());
  p.whole.resize(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    auto const& t = tensors[i];
    auto const& src = sources[i];
    auto* const mem = static_cast<cl_mem>(src.native);
    auto const dense = backend::tensor_bytes(t.shape, t.elem_size, "read_tensor");
    auto& dst = p.out.emplace_back(bytes::uninitialized(dense));
    if (dense == 0) continue;
    cl_event e = nullptr;
    if (auto const rect = tensor_rect_of(t)) {
      std::size_t const origin[3] = {static_cast<std::size_t>(src.offset), 0, 0};
      std::size_t const host[3] = {0, 0, 0};
      CUBERT_CL(clEnqueueReadBufferRect, q, mem, CL_FALSE, origin, host, rect->region.data(),
                rect->row_pitch, rect->slice_pitch, rect->region[0],
                rect->region[0] * rect->region[1], dst.data(), 0, nullptr, &e);
      ++rect_copies_;
    } else {
      auto& raw = p.whole[i].emplace(bytes::uninitialized(src.size));
      CUBERT_CL(clEnqueueReadBuffer, q, mem, CL_FALSE, src.offset, src.size, raw.data(), 0, nullptr,
                &e);
    }
    // In order: the last read's completion covers the ones before it.
    (void)take(p.last.release());
    p.last = guarded_event(e);
  }
  CUBERT_CL(clFlush, q);
  p.metas = std::move(tensors);
  return std::async(std::launch::deferred, [p = std::move(p)]() mutable {
    if (p.last) wait_for(p.last.get(), "read_tensor");
    for (std::size_t i = 0; i < p.out.size(); ++i) {
      if (p.whole[i]) p.out[i] = backend::gather_dense(p.whole[i]->span(), p.metas[i]);
    }
    return std::move(p.out);
  });
}

std::future<void> opencl_server::read_into(cubert::binding const& b, std::span<std::byte> dst) {
  refuse_forked();
  auto const src = memory_->get_resource(b);
  if (dst.size() != src.size) {
    throw invalid_argument(fmt::format(
        "read_into: the destination holds {} bytes but the binding {}", dst.size(), src.size));
  }
  errors_.rethrow_if_any();
  guarded_event done;
  if (!dst.empty()) {
    touch(b, streams::access::read);
    submission const counted{this};
    auto* const q = queue();
    if (staged(dst.data(), dst.size())) {
      // Waits here, on the server's side of the channel, as CUDA's staged reads do.
      staged_transfer("clEnqueueReadBuffer (staged)", [&] {
        staging_->download(q, dst, static_cast<cl_mem>(src.native), src.offset);
      });
      return std::async(std::launch::deferred, [] {});
    }
    cl_event e = nullptr;
    CUBERT_CL(clEnqueueReadBuffer, q, static_cast<cl_mem>(src.native), CL_FALSE, src.offset,
              src.size, dst.data(), 0, nullptr, &e);
    done = guarded_event(e);
    CUBERT_CL(clFlush, q);
  }
  return std::async(std::launch::deferred, [done = std::move(done)]() {
    if (done) wait_for(done.get(), "read_into");
  });
}

bytes opencl_server::read_for_write(cubert::binding const& b) {
  auto const src = memory_->get_resource(b);
  auto out = bytes::uninitialized(src.size);
  if (src.size != 0) {
    touch(b, streams::access::read);
    submission const counted{this};
    CUBERT_CL(clEnqueueReadBuffer, queue(), static_cast<cl_mem>(src.native), CL_TRUE, src.offset,
              src.size, out.data(), 0, nullptr, nullptr);
  }
  return out;
}

}  // namespace cubert::opencl::detail
