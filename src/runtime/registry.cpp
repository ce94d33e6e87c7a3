// SPDX-License-Identifier: Apache-2.0
// The device registry: which devices exist and the one client per device of this process.
// Backends are read from the table the build generates (device/backend_entry.hpp): none is
// named here.
#include "channel/channel.hpp"
#include "device/backend_entry.hpp"

#include <cubert/backend/server.hpp>
#include <cubert/client.hpp>
#include <cubert/detail/exit_threads.hpp>
#include <cubert/error.hpp>

#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <cstdint>
#include <map>
#include <mutex>
#include <pthread.h>
#include <thread>
#include <utility>

namespace cubert {

namespace {

struct device_ref {
  std::string backend;
  int ordinal = 0;
};

device_ref parse_id(std::string_view id) {
  auto const colon = id.find(':');
  device_ref ref{std::string(id.substr(0, colon)), 0};
  if (colon != std::string_view::npos) {
    auto const digits = id.substr(colon + 1);
    // Digits only, in the one spelling devices() lists: "cuda:-0" and "cuda:01" are refused.
    bool const canonical = !digits.empty() && digits.front() >= '0' && digits.front() <= '9' &&
                           (digits.size() == 1 || digits.front() != '0');
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ref.ordinal);
    if (!canonical || ec != std::errc{} || end != digits.data() + digits.size()) {
      throw unsupported(fmt::format(
          "device '{}': the part after ':' must be a device ordinal (e.g. cuda:0)", id));
    }
  }
  return ref;
}

std::string available_ids() {
  std::string out;
  for (auto const& d : devices()) out += (out.empty() ? "" : ", ") + d.id;
  return out;
}

client create_client(device_ref const& ref, std::string_view id, client_options const& opts) {
  for (auto const& known : backend::known_backends()) {
    if (known.name != ref.backend) continue;
    if (known.entry == nullptr) {
      throw unsupported(fmt::format("device '{}' is not available: {}", id, known.note));
    }
    auto const& b = *known.entry;
    int const count = b.device_count();
    if (count == 0) {
      throw unsupported(
          fmt::format("device '{}' is not available: {}", id, b.unavailable_reason()));
    }
    if (ref.ordinal >= count) {
      throw unsupported(
          fmt::format("device '{}' does not exist: {} {} device(s) present", id, count, b.title));
    }
    return client(backend::make_channel(b.make_server(ref.ordinal, opts), opts.channel));
  }
  throw unsupported(fmt::format("unknown device '{}'; devices present: {}", id, available_ids()));
}

// The clients of make_client. A fork() child starts with an empty cache: the parent's clients
// there have no threads (an actor channel's refuses every call and says to make a new client) and
// are left alone, since destroying a CUDA one would call a driver the child cannot use.
//
// The mutex is held across fork(), so that the child never inherits it locked by a thread it does
// not have; except by a thread that forks while it holds it (a driver forking a helper inside
// cuInit, under make_client): locking it again would deadlock, and that thread is the one the
// child has.
class client_cache {
 public:
  static client_cache& get() {
    // Never destroyed: clients may be used from static destructors and detached threads.
    static auto* const cache = [] {
      auto* c = new client_cache();
      ::pthread_atfork(before_fork, after_fork, after_fork);
      return c;
    }();
    return *cache;
  }

  void lock() {
    mutex_.lock();
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  void unlock() {
    owner_.store(std::thread::id{}, std::memory_order_relaxed);
    mutex_.unlock();
  }

  // Called with the mutex held.
  std::map<std::string, client>& current() {
    if (auto const now = cubert::detail::process_generation(); now != generation_) {
      clients_ = new std::map<std::string, client>();  // The parent's: never destroyed here.
      generation_ = now;
    }
    return *clients_;
  }

 private:
  static bool& locked_for_fork() {
    thread_local bool locked = false;
    return locked;
  }
  static void before_fork() {
    auto& c = get();
    if (c.owner_.load(std::memory_order_relaxed) == std::this_thread::get_id()) return;
    c.lock();
    locked_for_fork() = true;
  }
  static void after_fork() {
    if (std::exchange(locked_for_fork(), false)) get().unlock();
  }

  std::mutex mutex_;
  std::atomic<std::thread::id> owner_{};
  std::map<std::string, client>* clients_ = new std::map<std::string, client>();
  std::uint64_t generation_ = cubert::detail::process_generation();
};

// Made while the program loads, before any thread of its own: a fork() while another thread was
// still constructing the cache (its first make_client) left the child waiting for ever on that
// static's initialisation, and the fork handlers were not yet registered.
[[maybe_unused]] client_cache const& cache_at_load = client_cache::get();

}  // namespace

std::vector<device_info> devices() {
  std::vector<device_info> out;
  for (auto const& known : backend::known_backends()) {
    if (known.entry == nullptr) continue;
    auto const& b = *known.entry;
    int const count = b.device_count();
    for (int i = 0; i < count; ++i) {
      auto p = b.properties(i);
      auto id = b.one_device ? std::string(b.name) : fmt::format("{}:{}", b.name, i);
      out.push_back({std::move(id), p.name, std::string(b.name), std::move(p)});
    }
  }
  return out;
}

std::vector<backend_info> backends() {
  std::vector<backend_info> out;
  for (auto const& known : backend::known_backends()) {
    if (known.entry == nullptr) {
      out.push_back({std::string(known.name), false, 0, std::string(known.note)});
      continue;
    }
    int const count = known.entry->device_count();
    out.push_back({std::string(known.name), true, count,
                   count == 0 ? known.entry->unavailable_reason() : std::string{}});
  }
  return out;
}

client make_client(std::string_view id, client_options options) {
  auto const ref = parse_id(id);
  auto const key = fmt::format("{}:{}", ref.backend, ref.ordinal);
  auto& cache = client_cache::get();
  std::lock_guard lock(cache);
  auto& clients = cache.current();
  if (auto it = clients.find(key); it != clients.end()) return it->second;
  auto c = create_client(ref, id, options);
  clients.emplace(key, c);
  return c;
}

}  // namespace cubert
