// SPDX-License-Identifier: Apache-2.0
#include "cuda_pinned_pool.hpp"

#include "cuda_host_buffer.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>
#include <vector>

namespace cubert::cuda::detail {

// What a leased block's release needs: the block itself and the pool it goes back to.
struct cuda_pinned_pool::lease {
  std::shared_ptr<cuda_pinned_pool> pool;
  host_buffer block;
};

std::shared_ptr<cuda_pinned_pool> cuda_pinned_pool::make(CUdevice device,
                                                         std::size_t max_idle_bytes) {
  return std::shared_ptr<cuda_pinned_pool>(new cuda_pinned_pool(device, max_idle_bytes));
}

std::size_t cuda_pinned_pool::size_class(std::size_t size) noexcept {
  constexpr std::size_t page = 4096;
  if (size <= page) return page;
  // A quarter of the largest power of two not above `size`: at most 25% slack per block.
  std::size_t const step = std::max(page, std::bit_floor(size) / 4);
  if (size > std::numeric_limits<std::size_t>::max() - (step - 1)) {
    return std::numeric_limits<std::size_t>::max();  // No such block; pools() refuses it.
  }
  return (size + step - 1) / step * step;
}

bool cuda_pinned_pool::pools(std::size_t size) const noexcept {
  return size > 0 && size_class(size) <= max_idle_bytes_;  // A class is never below its size.
}

host_buffer cuda_pinned_pool::acquire(std::size_t size) {
  if (size == 0) return {};
  std::size_t const cls = size_class(size);
  auto l = std::make_unique<lease>();
  l->pool = shared_from_this();
  {
    std::lock_guard lock(mutex_);
    if (auto it = idle_.find(cls); it != idle_.end()) {
      l->block = std::move(it->second.block);
      idle_.erase(it);
      counters_.idle_bytes -= cls;
      --counters_.idle_blocks;
      ++counters_.reused;
      counters_.leased_bytes += cls;
    }
  }
  if (l->block.empty()) {
    // Pinned outside the lock: it takes milliseconds, and returns from other threads must not
    // wait for it.
    l->block = make_pinned_buffer(device_, cls);
    std::lock_guard lock(mutex_);
    ++counters_.pinned;
    counters_.leased_bytes += cls;
  }
  std::byte* const data = l->block.data();
  // The caller sees the size it asked for; the lease gives the whole block back.
  return host_buffer(data, size, true, &give_back, l.release());
}

void cuda_pinned_pool::give_back(std::byte*, std::size_t, void* context) noexcept {
  std::unique_ptr<lease> l(static_cast<lease*>(context));
  l->pool->take_back(std::move(l->block));
  // `l` dies here, and with it possibly the last reference to the pool.
}

void cuda_pinned_pool::take_back(host_buffer block) noexcept {
  std::vector<host_buffer> unpin;  // Past the retired cap only; unpinned after the lock.
  std::size_t const cls = block.size();
  try {
    std::lock_guard lock(mutex_);
    counters_.leased_bytes -= cls;
    if (closed_) {
      ++counters_.released;  // Unpinned by `block`, after the lock.
      return;
    }
    if (cls > max_idle_bytes_) {
      retire(std::move(block));
    } else {
      while (counters_.idle_bytes + cls > max_idle_bytes_ && !idle_.empty()) {
        auto oldest = std::min_element(
            idle_.begin(), idle_.end(),
            [](auto const& a, auto const& b) { return a.second.returned < b.second.returned; });
        retire(std::move(oldest->second.block));
        counters_.idle_bytes -= oldest->first;
        --counters_.idle_blocks;
        idle_.erase(oldest);
      }
      idle_block returned{std::move(block), ++clock_};
      try {
        idle_.emplace(cls, std::move(returned));
      } catch (...) {  // The node is allocated before `returned` is moved from.
        block = std::move(returned.block);
        throw;
      }
      counters_.idle_bytes += cls;
      ++counters_.idle_blocks;
    }
    if (counters_.retired_bytes > max_idle_bytes_) unpin = take_retired();
  } catch (...) {
    // Out of host memory for the bookkeeping: the block is simply unpinned (by `block`'s
    // destructor, after the lock, waiting for the device) instead of cached.
  }
}

void cuda_pinned_pool::retire(host_buffer&& block) {
  retired_.push_back(std::move(block));
  counters_.retired_bytes += retired_.back().size();
  ++counters_.retired_blocks;
  retired_count_.store(retired_.size(), std::memory_order_release);
}

std::vector<host_buffer> cuda_pinned_pool::take_retired() noexcept {
  std::vector<host_buffer> out;
  out.swap(retired_);
  counters_.released += out.size();
  counters_.retired_bytes = 0;
  counters_.retired_blocks = 0;
  retired_count_.store(0, std::memory_order_release);
  return out;
}

void cuda_pinned_pool::release_idle() noexcept {
  std::multimap<std::size_t, idle_block> dropped;
  std::vector<host_buffer> unpin;
  {
    std::lock_guard lock(mutex_);
    dropped.swap(idle_);
    unpin = take_retired();
    counters_.released += counters_.idle_blocks;
    counters_.idle_bytes = 0;
    counters_.idle_blocks = 0;
  }
}

void cuda_pinned_pool::close() noexcept {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  release_idle();
}

void cuda_pinned_pool::retire_idle() noexcept {
  std::lock_guard lock(mutex_);
  try {
    retired_.reserve(retired_.size() + idle_.size());
  } catch (...) {
    return;  // No room to note them: they stay idle, for a cleanup or the pool's end.
  }
  for (auto& [cls, b] : idle_) retire(std::move(b.block));  // Cannot throw: reserved.
  idle_.clear();
  counters_.idle_bytes = 0;
  counters_.idle_blocks = 0;
}

void cuda_pinned_pool::free_retired() noexcept {
  std::vector<host_buffer> unpin;
  std::lock_guard lock(mutex_);
  unpin = take_retired();
  // Unpinned as `unpin` goes, after the lock: declared before it.
}

cuda_pinned_pool::counters cuda_pinned_pool::stats() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace cubert::cuda::detail
