// SPDX-License-Identifier: Apache-2.0
// The user's entry point: a named tuner per device id, and the tunable sets it serves.
#pragma once

#include <cubert/config.hpp>
#include <cubert/tune/tunable_set.hpp>
#include <cubert/tune/tune_client.hpp>
#include <cubert/tune/tuner.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
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

  /// The set built by `make`, built once per `Make` type and shared afterwards.
  template <typename Make>
  auto init(Make&& make) -> std::shared_ptr<std::remove_cvref_t<decltype(make())> const> {
    using set_t = std::remove_cvref_t<decltype(make())>;
    std::type_index const type(typeid(std::remove_cvref_t<Make>));
    {
      std::shared_lock lock(sets_mutex_);
      if (auto it = sets_.find(type); it != sets_.end()) {
        return std::static_pointer_cast<set_t const>(it->second);
      }
    }
    auto built = std::make_shared<set_t const>(make());  // Outside the lock: may be slow.
    std::unique_lock lock(sets_mutex_);
    auto [it, inserted] = sets_.try_emplace(type, built);
    return std::static_pointer_cast<set_t const>(it->second);
  }

  /// Runs the best candidate of `set` for `inputs` on device `id`, tuning first if needed.
  /// @throws autotune_error if no candidate works; what the chosen candidate throws.
  template <tune_client Client, typename Output, typename... Inputs>
  Output execute(Id const& id, Client& client,
                 std::shared_ptr<tunable_set<Key, Output, Inputs...> const> const& set,
                 Inputs... inputs) {
    return tuner_for(id, client).execute(client, set, std::move(inputs)...);
  }

  /// The tuner of device `id`, created on first use from `client`'s fingerprint.
  template <tune_client Client>
  tuner<Key>& tuner_for(Id const& id, Client& client) {
    {
      std::shared_lock lock(tuners_mutex_);
      if (auto it = tuners_.find(id); it != tuners_.end()) return *it->second;
    }
    auto const options = options_ ? *options_ : tuner_options::from(config::get());
    auto made = std::make_unique<tuner<Key>>(name_, client.properties().fingerprint(), options);
    std::unique_lock lock(tuners_mutex_);
    auto [it, inserted] = tuners_.try_emplace(id, std::move(made));
    return *it->second;
  }

  /// Forgets every in-memory result (the persistent cache is kept).
  void clear() {
    std::unique_lock lock(tuners_mutex_);
    tuners_.clear();
  }

  [[nodiscard]] std::string const& name() const noexcept { return name_; }

 private:
  std::string name_;
  std::optional<tuner_options> options_;
  std::shared_mutex sets_mutex_;
  std::unordered_map<std::type_index, std::shared_ptr<void const>> sets_;
  std::shared_mutex tuners_mutex_;
  std::unordered_map<Id, std::unique_ptr<tuner<Key>>> tuners_;
};

}  // namespace cubert::tune
