// SPDX-License-Identifier: Apache-2.0
// The OpenCL server's uploads (create, write, write_tensor) and the host memory it hands out.
#include "opencl_library.hpp"
#include "opencl_server.hpp"
#include "opencl_tensor_rect.hpp"

#include <cubert/error.hpp>

#include <cstring>
#include <utility>

namespace cubert::opencl::detail {
namespace {

// Staged upload bytes the server keeps before it waits for the oldest write: a caller writing
// faster than the device reads would otherwise hold a copy of everything queued.
constexpr std::size_t max_staged = std::size_t{256} << 20;

}  // namespace

bool opencl_server::staged(std::byte const* host, std::size_t n) const {
  return staging_ && n >= direct_upload && !pinned_->contains(host, n);
}

host_buffer opencl_server::alloc_host(std::uint64_t size) {
  refuse_forked();
  if (!staging_ || size == 0 || size > device_->max_alloc) return server::alloc_host(size);
  return make_pinned_buffer(context_, streams_->at(0), static_cast<std::size_t>(size), pinned_);
}

cubert::handle opencl_server::create(std::span<std::byte const> data) {
  auto h = empty(data.size());
  if (!data.empty()) {
    auto const res = memory_->get_resource(h.binding());
    touch(h.binding(), streams::access::write);
    submission const counted{this};
    upload_to(res, data);
  }
  return h;
}

void opencl_server::reap_uploads(std::size_t incoming) {
  while (!uploads_.empty()) {
    auto& front = uploads_.front();
    bool const over = staged_bytes_ + incoming > max_staged;
    if (!over && !finished(front.done.get())) break;
    try {
      wait_for(front.done.get(), "a staged write");
    } catch (...) {
      // The write's own call returned long ago: its failure is for the next sync.
      errors_.record(std::current_exception());
    }
    staged_bytes_ -= front.size;
    uploads_.pop_front();
  }
}

void opencl_server::upload_to(cubert::resource const& dst, std::span<std::byte const> data) {
  if (data.size() >= direct_upload) {
    // A copy into fresh heap memory cost 5x the transfer itself for 64 MiB on NVIDIA's OpenCL
    // (page faults, then the platform's own staging of pageable memory): a large upload goes
    // through the pinned blocks, or from the caller's memory, waiting.
    auto* const q = queue();
    auto* const mem = static_cast<cl_mem>(dst.native);
    if (staged(data.data(), data.size())) {
      staged_transfer("clEnqueueWriteBuffer (staged)",
                      [&] { staging_->upload(q, mem, dst.offset, data); });
      return;
    }
    enqueue_backed("clEnqueueWriteBuffer", [&] {
      return opencl().clEnqueueWriteBuffer(q, mem, CL_TRUE, dst.offset, data.size(), data.data(), 0,
                                           nullptr, nullptr);
    });
    return;
  }
  reap_uploads(data.size());
  upload u;
  u.data = std::make_unique_for_overwrite<std::byte[]>(data.size());
  u.size = data.size();
  std::memcpy(u.data.get(), data.data(), data.size());
  cl_event e = nullptr;
  auto* const q = queue();
  enqueue_backed("clEnqueueWriteBuffer", [&] {
    return opencl().clEnqueueWriteBuffer(q, static_cast<cl_mem>(dst.native), CL_FALSE, dst.offset,
                                         data.size(), u.data.get(), 0, nullptr, &e);
  });
  u.done = guarded_event(e);
  uploads_.push_back(std::move(u));
  staged_bytes_ += data.size();
}

void opencl_server::write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) {
  refuse_forked();
  backend::check_writable_layout(dst, data.size());
  auto const res = memory_->get_resource(dst.binding);  // Unknown ones refused, data or none.
  if (data.empty()) return;
  auto const rect = tensor_rect_of(dst);
  if (!rect) {
    server::write_tensor(dst, data);
    return;
  }
  backend::check_tensor_extent(dst, res.size, "write_tensor");
  std::size_t const origin[3] = {static_cast<std::size_t>(res.offset), 0, 0};
  std::size_t const host[3] = {0, 0, 0};
  touch(dst.binding, streams::access::write);
  submission const counted{this};
  CUBERT_CL(clEnqueueWriteBufferRect, queue(), static_cast<cl_mem>(res.native), CL_TRUE, origin,
            host, rect->region.data(), rect->row_pitch, rect->slice_pitch, rect->region[0],
            rect->region[0] * rect->region[1], data.data(), 0, nullptr, nullptr);
  ++rect_copies_;
}

void opencl_server::write(cubert::binding const& dst, std::span<std::byte const> data) {
  refuse_forked();
  auto const res = memory_->get_resource(dst);
  backend::check_write(res, data.size());
  if (data.empty()) return;
  touch(dst, streams::access::write);
  submission const counted{this};
  upload_to(res, data);
}

}  // namespace cubert::opencl::detail
