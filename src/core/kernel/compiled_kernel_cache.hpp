// SPDX-License-Identifier: Apache-2.0
// A backend's compiled kernels of one context, by kernel id and execution mode, and the one
// order in which a compile goes through the on-disk kernel cache.
#pragma once

#include "kernel/kernel_disk_cache.hpp"

#include <cubert/kernel.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cubert::detail {

/// What a kernel's compiled code depends on, as a 128-bit digest. Kernels that differ only in
/// what their launch takes (cube dim, dynamic shared memory, other backends' payloads) have
/// different ids and one code key, so they share one loaded code.
struct code_key {
  std::uint64_t low = 0;
  std::uint64_t high = 0;
  bool operator==(code_key const&) const = default;
};

struct code_key_hash {
  std::size_t operator()(code_key const& k) const noexcept {
    return static_cast<std::size_t>(k.low);
  }
};

/// Builds a code_key from parts, each length-prefixed so that moving a boundary between two
/// parts changes the key.
class code_key_builder {
 public:
  code_key_builder& add(void const* data, std::size_t size);
  code_key_builder& add(std::string_view text) { return add(text.data(), text.size()); }
  [[nodiscard]] code_key finish() const noexcept;

 private:
  std::string bytes_;
};

/// How a cache's kernels came to be: built by the backend's compiler at their first launch, read
/// from the disk cache, loaded from code that needs no compiler (PTX, cubin), or built ahead of
/// their launch on another thread (`server::build_ahead`).
struct kernel_cache_counters {
  std::uint64_t built = 0;
  std::uint64_t disk_hits = 0;
  std::uint64_t prebuilt = 0;
  std::uint64_t built_ahead = 0;
};

/// The loaded kernels of one context: `Loaded` is the backend's loaded-code type (a module and
/// its function, a kernel object), one per distinct code key, handed out by kernel id (with the
/// execution mode). `release` frees what a Loaded holds, once per code, when the cache goes.
/// Not thread-safe: the server that owns it calls it from one thread at a time.
template <typename Loaded>
class compiled_kernel_cache {
 public:
  using release_fn = void (*)(Loaded&) noexcept;

  explicit compiled_kernel_cache(release_fn release) noexcept : release_(release) {}
  ~compiled_kernel_cache() {
    for (auto& [code, loaded] : codes_) release_(*loaded);
  }
  compiled_kernel_cache(compiled_kernel_cache const&) = delete;
  compiled_kernel_cache& operator=(compiled_kernel_cache const&) = delete;

  /// The kernel loaded for `id`, or null before its first load: every launch's lookup.
  [[nodiscard]] Loaded* find(kernel_id const& id) const noexcept {
    auto it = kernels_.find(id);
    return it == kernels_.end() ? nullptr : it->second;
  }

  /// The kernel for `id`, whose code is `code`: the one loaded for that code already, else what
  /// `make()` returns (a Loaded), recorded once. What `make` loaded is released if recording it
  /// fails for want of memory.
  template <typename Make>
  Loaded& insert(kernel_id const& id, code_key const& code, Make&& make) {
    auto found = codes_.find(code);
    if (found == codes_.end()) {
      Loaded made = std::forward<Make>(make)();
      try {
        found = codes_.emplace(code, std::make_unique<Loaded>(made)).first;
      } catch (...) {
        release_(made);
        throw;
      }
    }
    return *kernels_.emplace(id, found->second.get()).first->second;
  }

  /// How many distinct codes are loaded.
  [[nodiscard]] std::size_t codes() const noexcept { return codes_.size(); }

  [[nodiscard]] kernel_cache_counters& stats() noexcept { return stats_; }
  [[nodiscard]] kernel_cache_counters const& stats() const noexcept { return stats_; }

 private:
  release_fn release_;
  std::unordered_map<code_key, std::unique_ptr<Loaded>, code_key_hash> codes_;
  std::unordered_map<kernel_id, Loaded*> kernels_;  // into codes_
  kernel_cache_counters stats_;
};

/// What a compile through the disk cache gave.
template <typename Code>
struct disk_cached {
  Code code;
  bool from_disk = false;
};

/// The one order of a compile through the disk cache. Under `key` (empty: the kernel bypasses
/// the cache), the stored bytes are made into code by `from_bytes` (an empty optional where the
/// bytes no longer load: corrupt, or from another compiler); otherwise `build()` makes it and
/// its bytes are stored (`to_bytes`: an optional vector of bytes, or a pointer to one, empty or
/// null where there are none to keep), unless `still_valid()` says an input the key covers
/// changed while it built (a header edited during the compile may be compiled in either
/// version). Storing is a speed-up: a failure to store, even for want of host memory, leaves the
/// code as built.
template <typename Code, typename FromBytes, typename Build, typename ToBytes, typename StillValid>
[[nodiscard]] disk_cached<Code> compile_through(kernel_disk_cache const& disk,
                                                std::string const& key, FromBytes&& from_bytes,
                                                Build&& build, ToBytes&& to_bytes,
                                                StillValid&& still_valid) {
  if (!key.empty()) {
    if (auto bytes = disk.load(key)) {
      if (std::optional<Code> code = from_bytes(std::move(*bytes))) {
        return {std::move(*code), true};
      }
    }
  }
  disk_cached<Code> out{build(), false};
  if (!key.empty()) {
    try {
      if (still_valid()) {
        if (auto const bytes = to_bytes(out.code)) (void)disk.store(key, *bytes);
      }
    } catch (...) {
      // Built anyway: the next process builds it again.
    }
  }
  return out;
}

}  // namespace cubert::detail
