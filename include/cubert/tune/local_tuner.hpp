// SPDX-License-Identifier: Apache-2.0
// The user's entry point: a named tuner per device id, and the tunable sets it serves.
#pragma once

#include <cubert/config.hpp>
#include <cubert/tune/tunable_set.hpp>
#include <cubert/tune/tune_client.hpp>
#include <cubert/tune/tuner.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <type_traits>
#include <typeindex>
#include <unordered_map>
#include <utility>

namespace cubert::tune {

/// Usually a function-local static: `static local_tuner<std::string> tuner{"matmul"};`.
///
/// `init` builds a set once per process; `execute` picks (tuning if needed) the best candidate
/// for the inputs' key on the device `id` and runs it. Thread-safe.
template <typename Key, typename Id = std::string>
class local_tuner {
 public:
  /// @param name names the tuner in the persistent cache and in logs.
  /// @param options overrides the configuration's autotune options (tests, tools).
  explicit local_tuner(std::string name, std::optional<tuner_options> options = std::nullopt)
      : name_(std::move(name)), options_(std::move(options)) {}

  /// The set built by `make`, built once per factory and shared afterwards.
  ///
  /// A factory's identity is its type, and for a function (or function pointer) also its
  /// address: two functions of one signature are two factories. A lambda or function object is
  /// identified by its type only (one set per lambda expression, whatever it captures). A
  /// `std::function` is refused at compile time: its type says nothing about what it calls.
  template <typename Make>
  auto init(Make&& make) -> std::shared_ptr<std::remove_cvref_t<decltype(make())> const> {
    using set_t = std::remove_cvref_t<decltype(make())>;
    using make_t = std::decay_t<Make>;
    static_assert(!is_std_function<make_t>::value,
                  "local_tuner::init: a std::function cannot identify its set (every "
                  "std::function of one signature has one type); pass the function, a function "
                  "pointer or a lambda instead");
    factory_id id{std::type_index(typeid(make_t)), 0};
    if constexpr (std::is_pointer_v<make_t> && std::is_function_v<std::remove_pointer_t<make_t>>) {
      make_t const fn = make;
      id.address = reinterpret_cast<std::uintptr_t>(fn);
    }
    std::shared_ptr<set_slot> slot;
    {
      std::shared_lock lock(sets_mutex_);
      if (auto it = sets_.find(id); it != sets_.end()) {
        if (it->second->set) return std::static_pointer_cast<set_t const>(it->second->set);
        slot = it->second;
      }
    }
    if (!slot) {
      std::unique_lock lock(sets_mutex_);
      slot = sets_.try_emplace(id, std::make_shared<set_slot>()).first->second;
    }
    // Built once, outside sets_mutex_ (it may be slow, and may init other sets): threads racing
    // to the first call wait for one build instead of each building a set of their own.
    std::lock_guard building(slot->mutex);
    if (slot->set) return std::static_pointer_cast<set_t const>(slot->set);
    auto built = std::make_shared<set_t const>(make());
    std::unique_lock lock(sets_mutex_);
    slot->set = built;
    return built;
  }

  /// Runs the best candidate of `set` for `inputs` on device `id`, tuning first if needed.
  /// The tuner stays alive until this returns, even if `clear()` is called meanwhile.
  /// @throws autotune_error if no candidate works; what the chosen candidate throws.
  template <tune_client Client, typename Output, typename... Inputs>
  Output execute(Id const& id, Client& client,
                 std::shared_ptr<tunable_set<Key, Output, Inputs...> const> const& set,
                 Inputs... inputs) {
    auto const t = tuner_for(id, client);
    return t->execute(client, set, std::move(inputs)...);
  }

  /// The tuner of device `id`, created on first use from `client`'s fingerprint. Shared, not
  /// borrowed: `clear()` only drops the map's hold, so a tuner obtained before it stays usable
  /// (it is no longer the one `execute` uses; the next `tuner_for` makes a fresh one).
  template <tune_client Client>
  [[nodiscard]] std::shared_ptr<tuner<Key>> tuner_for(Id const& id, Client& client) {
    {
      std::shared_lock lock(tuners_mutex_);
      if (auto it = tuners_.find(id); it != tuners_.end()) return it->second;
    }
    auto const options = options_ ? *options_ : tuner_options::from(config::get());
    auto made = std::make_shared<tuner<Key>>(name_, client.properties().fingerprint(), options);
    std::unique_lock lock(tuners_mutex_);
    auto [it, inserted] = tuners_.try_emplace(id, std::move(made));
    return it->second;
  }

  /// Forgets every in-memory result (the persistent cache is kept). A tuner still held (by a
  /// running `execute` or a `tuner_for` caller) is destroyed when its last holder lets go.
  void clear() {
    std::unordered_map<Id, std::shared_ptr<tuner<Key>>> old;
    {
      std::unique_lock lock(tuners_mutex_);
      old.swap(tuners_);
    }
    // `old` dies here, outside the lock: a tuner's destructor joins its background workers.
  }

  [[nodiscard]] std::string const& name() const noexcept { return name_; }

 private:
  template <typename T>
  struct is_std_function : std::false_type {};
  template <typename R, typename... A>
  struct is_std_function<std::function<R(A...)>> : std::true_type {};

  struct factory_id {
    std::type_index type;
    std::uintptr_t address;  // A function's address; 0 for function objects.
    bool operator==(factory_id const&) const = default;
  };
  struct factory_hash {
    std::size_t operator()(factory_id const& f) const noexcept {
      return f.type.hash_code() ^ (std::hash<std::uintptr_t>{}(f.address) * 0x9e3779b97f4a7c15ULL);
    }
  };

  struct set_slot {
    std::mutex mutex;                 // Held while building.
    std::shared_ptr<void const> set;  // Written holding both mutex and sets_mutex_.
  };

  std::string name_;
  std::optional<tuner_options> options_;
  std::shared_mutex sets_mutex_;
  std::unordered_map<factory_id, std::shared_ptr<set_slot>, factory_hash> sets_;
  std::shared_mutex tuners_mutex_;
  std::unordered_map<Id, std::shared_ptr<tuner<Key>>> tuners_;
};

}  // namespace cubert::tune
