// SPDX-License-Identifier: Apache-2.0
// Shared helpers of the memory tests.
#pragma once

#include <cubert/error.hpp>
#include <cubert/memory/host_storage.hpp>
#include <cubert/memory/memory_manager.hpp>

#include <map>
#include <memory>
#include <optional>

namespace cubert::memory::test {

inline constexpr std::uint64_t mib = 1024 * 1024;

/// cubecl's DUMMY_MEM_PROPS.
inline constexpr device_memory_properties dummy_props{128 * mib, 32};

inline std::unique_ptr<memory_manager> make_manager(device_memory_properties props,
                                                    memory_configuration config,
                                                    std::optional<std::uint64_t> capacity = {}) {
  return std::make_unique<memory_manager>(std::make_unique<host_storage>(64, capacity), props,
                                          std::move(config));
}

/// A storage without memory that keeps a ledger of the pages it handed out: what the pools hold
/// (`held`, `pages`) and frees of pages it never gave or already took back (`unknown_frees`).
/// `admit` may refuse a request by throwing before anything is recorded.
class ledger_storage : public backend::storage {
 public:
  [[nodiscard]] std::uint64_t alignment() const noexcept override { return 1; }
  [[nodiscard]] backend::storage_handle alloc(std::uint64_t size) override {
    admit(size);
    auto const id = backend::next_storage_id();
    pages.emplace(id, size);  // May throw bad_alloc: nothing recorded then.
    held += size;
    return {id, 0, size};
  }
  void dealloc(backend::storage_id id) noexcept override {
    auto it = pages.find(id);
    if (it == pages.end()) {
      ++unknown_frees;
      return;
    }
    held -= it->second;
    pages.erase(it);
  }
  [[nodiscard]] cubert::resource get(backend::storage_handle const&) const override {
    throw unsupported("ledger_storage has no memory");
  }

  std::map<backend::storage_id, std::uint64_t> pages;
  std::uint64_t held = 0;
  std::uint64_t unknown_frees = 0;

 protected:
  virtual void admit(std::uint64_t /*size*/) {}
};

/// The report row of pool `index`.
inline pool_usage pool_row(memory_manager const& m, std::size_t index) {
  return m.report().pools.at(index);
}

}  // namespace cubert::memory::test
