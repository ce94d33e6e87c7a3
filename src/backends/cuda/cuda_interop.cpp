// SPDX-License-Identifier: Apache-2.0
// Where other libraries meet the CUDA server: their memory imported without a copy, and their
// streams ordered with cubert's (DLPack's producer and consumer contracts).
#include "cuda_server.hpp"

namespace cubert::cuda::detail {

cubert::handle cuda_server::import_memory(std::uint64_t address, std::uint64_t size,
                                          std::shared_ptr<void> owner) {
  return on_device([&] {
    cubert::handle h(memory_->adopt(address, size, std::move(owner)), size);
    // Only the calling stream was ordered after the producer's work: a first use on another
    // stream must wait for this one, as for a write here.
    touch(h.binding(), streams::access::write);
    return h;
  });
}

std::uint64_t cuda_server::native_stream() {
  return on_device(
      [&] { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(stream())); });
}

std::future<void> cuda_server::order_native_stream(std::uint64_t native) {
  // A waiting launch error is the caller's to hear before another library reads the results.
  if (errors_.pending()) [[unlikely]]
    return sync_device();
  try {
    on_device([&] {
      streams_->order_external(reinterpret_cast<CUstream>(static_cast<std::uintptr_t>(native)));
    });
  } catch (...) {
    return backend::failed_future<void>(std::current_exception());  // on_device reported it.
  }
  return backend::ready_future();
}

}  // namespace cubert::cuda::detail
