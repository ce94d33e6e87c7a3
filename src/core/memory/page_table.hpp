// SPDX-License-Identifier: Apache-2.0
// The bookkeeping every pool shares: the pages it holds, its byte counters and peaks, and the
// choice of an idle page to give back.
#pragma once

#include <cubert/backend/storage.hpp>
#include <cubert/memory/memory_usage.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cubert::memory {

/// Manager-wide byte counters that every pool's page table updates, so the manager's peaks are
/// peaks of the sum and not sums of per-pool peaks. Server thread only.
struct reservation_stats {
  std::uint64_t reservations = 0;  ///< Calls of memory_manager::reserve so far (the pools' clock).
  std::uint64_t reserved = 0;
  std::uint64_t peak_reserved = 0;
  std::uint64_t in_use = 0;
  std::uint64_t peak_in_use = 0;

  void add_reserved(std::uint64_t n) noexcept {
    reserved += n;
    peak_reserved = std::max(peak_reserved, reserved);
  }
  void sub_reserved(std::uint64_t n) noexcept { reserved -= n; }
  void add_in_use(std::uint64_t n) noexcept {
    in_use += n;
    peak_in_use = std::max(peak_in_use, in_use);
  }
  void sub_in_use(std::uint64_t n) noexcept { in_use -= n; }
};

/// What a page table knows of a page; each pool's page type derives from it and adds its
/// policy's fields. Pools own their page objects; the table only lists them.
struct page_record {
  backend::storage_handle storage;  ///< Valid while listed.
  std::size_t table_index = 0;      ///< Position in the table's list while listed.
};

/// Chooses the idle page to give back towards `deficit` bytes among pages offered in turn: the
/// smallest that covers the deficit alone, else the largest; the first offered of equals. Few
/// storage calls, and a large cached page is not traded for a small growth.
class idle_choice {
 public:
  explicit idle_choice(std::uint64_t deficit) noexcept : deficit_(deficit) {}
  /// Offers a page of `bytes`; true when it is the choice so far.
  bool offer(std::uint64_t bytes) noexcept {
    bool const covers = bytes >= deficit_;
    bool const chosen_covers = chosen_ && bytes_ >= deficit_;
    if (!chosen_ || (covers && (!chosen_covers || bytes < bytes_)) ||
        (!covers && !chosen_covers && bytes > bytes_)) {
      chosen_ = true;
      bytes_ = bytes;
      return true;
    }
    return false;
  }
  [[nodiscard]] bool chosen() const noexcept { return chosen_; }
  /// The chosen page's bytes (0 when none was offered).
  [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }

 private:
  std::uint64_t deficit_;
  std::uint64_t bytes_ = 0;
  bool chosen_ = false;
};

/// The pages one pool holds and its figures: memory_usage, peaks, page count. Keeps the
/// manager-wide `reservation_stats` in step with every change, so that the manager's peaks are
/// peaks of the sum. Server thread only.
///
/// Invariants: `usage().bytes_reserved` is the sum of the listed pages' sizes; `pages()` lists
/// exactly the pages whose storage this pool holds; the manager-wide counters include this
/// table's bytes until `close()`.
class page_table {
 public:
  page_table(backend::storage& storage, reservation_stats& stats) noexcept
      : storage_(&storage), stats_(&stats) {}
  page_table(page_table const&) = delete;
  page_table& operator=(page_table const&) = delete;

  /// Allocates `bytes` of storage for `page` and lists it. Host memory is taken first, so that
  /// nothing may throw once the storage has handed out the page (it would leak).
  /// @throws std::bad_alloc or the storage's out_of_memory; nothing changed then.
  void add(page_record& page, std::uint64_t bytes);
  /// Gives the page's storage back and unlists it: the last listed page takes its position.
  void remove(page_record& page) noexcept;
  /// Gives every listed page's storage back, hands each page to `dispose` after that (a pool
  /// that allocated its page objects deletes them there), and takes this table's bytes out of
  /// the manager-wide counters: for the pool's destructor. The table lists nothing afterwards.
  template <class Dispose>
  void close(Dispose const& dispose) noexcept {
    for (page_record* p : pages_) {
      storage_->dealloc(p->storage.id);
      dispose(p);
    }
    pages_.clear();
    stats_->sub_reserved(live_.bytes_reserved);
    stats_->sub_in_use(live_.bytes_in_use);
    live_.bytes_reserved = 0;
    live_.bytes_in_use = 0;
  }
  void close() noexcept {
    close([](page_record*) {});
  }

  /// The listed pages, in list order (creation order until a removal moves the last page into
  /// the gap).
  [[nodiscard]] std::span<page_record* const> pages() const noexcept { return pages_; }
  [[nodiscard]] std::size_t page_count() const noexcept { return pages_.size(); }

  // The slice counters are inline: they are on every pool hit.

  /// Counts a slice handed out: `requested` bytes live, `padding` more taken from its page.
  void hand_out(std::uint64_t requested, std::uint64_t padding) noexcept {
    ++live_.number_allocs;
    live_.bytes_in_use += requested;
    live_.bytes_padding += padding;
    stats_->add_in_use(requested);
    peak_in_use_ = std::max(peak_in_use_, live_.bytes_in_use);
  }
  /// Counts a slice given back (the figures `hand_out` counted for it).
  void give_back(std::uint64_t requested, std::uint64_t padding) noexcept {
    --live_.number_allocs;
    live_.bytes_in_use -= requested;
    live_.bytes_padding -= padding;
    stats_->sub_in_use(requested);
  }
  /// Counts a live slice of `extent` bytes handed out again for `requested` bytes instead of
  /// `was_requested`, as give_back then hand_out would, without a second allocation count.
  void hand_out_again(std::uint64_t was_requested, std::uint64_t requested,
                      std::uint64_t extent) noexcept {
    live_.bytes_in_use = live_.bytes_in_use - was_requested + requested;
    live_.bytes_padding = live_.bytes_padding - (extent - was_requested) + (extent - requested);
    stats_->sub_in_use(was_requested);
    stats_->add_in_use(requested);
    peak_in_use_ = std::max(peak_in_use_, live_.bytes_in_use);
  }

  /// Live figures: allocations, bytes in use, padding, bytes reserved.
  [[nodiscard]] memory_usage const& usage() const noexcept { return live_; }
  /// Restarts the peaks (reserved, in use, pages) from the current values.
  void reset_peaks() noexcept;
  /// Fills a report row's figures: pages, peak pages, usage, peak bytes reserved and in use.
  void report(pool_usage& row) const noexcept;

  /// The idle page to give back towards `deficit` bytes (see idle_choice) among `candidates`
  /// (page_record pointers, in the pool's order) for which `idle` holds; nullptr if none.
  template <class Range, class Idle>
  [[nodiscard]] static page_record* idle_page_for(std::uint64_t deficit, Range const& candidates,
                                                  Idle const& idle) noexcept {
    idle_choice choice(deficit);
    page_record* chosen = nullptr;
    for (page_record* p : candidates) {
      if (idle(*p) && choice.offer(p->storage.size)) chosen = p;
    }
    return chosen;
  }

 private:
  backend::storage* storage_;  // Not owned; the manager's, which outlives its pools.
  reservation_stats* stats_;   // Not owned; the manager's.
  std::vector<page_record*> pages_;
  memory_usage live_;
  std::uint64_t peak_reserved_ = 0;
  std::uint64_t peak_in_use_ = 0;
  std::uint64_t peak_pages_ = 0;
};

}  // namespace cubert::memory
