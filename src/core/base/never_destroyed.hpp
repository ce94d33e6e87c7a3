// SPDX-License-Identifier: Apache-2.0
// Process-wide objects that are never destroyed (servers and exit handlers may use them while
// the process exits) and whose making allocates nothing of its own: a first use in a noexcept
// path cannot fail for want of host memory, as `*new T` could.
#pragma once

#include <new>
#include <utility>

namespace cubert::detail {

/// Holds a T built in place; its destructor leaves the T alone. Use as a function-local static.
template <typename T>
class never_destroyed {
 public:
  template <typename... Args>
  explicit never_destroyed(Args&&... args) {
    ::new (static_cast<void*>(storage_)) T(std::forward<Args>(args)...);
  }
  never_destroyed(never_destroyed const&) = delete;
  never_destroyed& operator=(never_destroyed const&) = delete;
  ~never_destroyed() = default;

  [[nodiscard]] T& get() noexcept { return *std::launder(reinterpret_cast<T*>(storage_)); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace cubert::detail
