// SPDX-License-Identifier: Apache-2.0
// Segregated free lists in the manner of TLSF: 32 bins per power of two, two bitmaps, so that
// finding a free block is O(1) and at most ~3 % larger than the request class.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace cubert::memory {

/// Free blocks indexed by size. `Node` has `size`, `prev_free`, `next_free` and `bin` members.
template <typename Node>
class size_bins {
 public:
  static constexpr unsigned sl_bits = 5;
  static constexpr unsigned sl_count = 1u << sl_bits;
  static constexpr unsigned fl_count = 64 - sl_bits + 1;

  void insert(Node* n) noexcept {
    auto const [fl, sl] = mapping(n->size);
    auto& head = heads_[fl][sl];
    n->prev_free = nullptr;
    n->next_free = head;
    if (head) head->prev_free = n;
    head = n;
    n->bin = fl * sl_count + sl;
    sl_map_[fl] |= 1u << sl;
    fl_map_ |= std::uint64_t{1} << fl;
  }

  void remove(Node* n) noexcept {
    unsigned const fl = n->bin / sl_count;
    unsigned const sl = n->bin % sl_count;
    if (n->prev_free) {
      n->prev_free->next_free = n->next_free;
    } else {
      heads_[fl][sl] = n->next_free;
    }
    if (n->next_free) n->next_free->prev_free = n->prev_free;
    n->prev_free = n->next_free = nullptr;
    if (!heads_[fl][sl]) {
      sl_map_[fl] &= ~(1u << sl);
      if (!sl_map_[fl]) fl_map_ &= ~(std::uint64_t{1} << fl);
    }
  }

  /// A free block of at least `size` bytes, preferring the smallest: first an exact or close
  /// fit among the first `scan_limit` blocks of the request's own bin, then the head of the next
  /// bin whose every block is large enough, then the best fit among the rest of the request's
  /// own bin. nullptr only when no free block fits.
  [[nodiscard]] Node* find(std::uint64_t size) const noexcept {
    auto const [fl0, sl0] = mapping(size);
    Node* best = nullptr;
    int budget = scan_limit;
    Node* n = heads_[fl0][sl0];
    for (; n && budget > 0; n = n->next_free, --budget) {
      if (n->size == size) return n;
      if (n->size > size && (!best || n->size < best->size)) best = n;
    }
    if (best) return best;
    if (Node* larger = head_above(fl0, sl0)) return larger;
    return n ? best_fit_from(n, size) : nullptr;
  }

  /// The smallest free block of at least `size` bytes that `accept` takes, or nullptr: a walk
  /// over every bin from the request's class up, for the miss path of a caller that refused
  /// what `find` gave (a few blocks at most where it is used).
  template <typename Accept>
  [[gnu::noinline, gnu::cold]] Node* find_if(std::uint64_t size, Accept&& accept) const {
    Node* best = nullptr;
    for (unsigned bin = first_nonempty_from(index_of(size)); bin < bin_count;
         bin = first_nonempty_from(bin + 1)) {
      for (Node* n = heads_[bin / sl_count][bin % sl_count]; n; n = n->next_free) {
        if (n->size >= size && (!best || n->size < best->size) && accept(n)) best = n;
      }
    }
    return best;
  }

  [[nodiscard]] bool empty() const noexcept { return fl_map_ == 0; }

  /// Whether `find(size)` would return a block of `merged` bytes (merged > size) were `n`
  /// removed and that block inserted: true only when `n` is alone in its bin and no other
  /// block could be chosen first, so that a merge of `n` followed by the split of that block
  /// at `size` would leave every list as it is now. False whenever unsure.
  [[nodiscard]] bool would_find_merged(Node const* n, std::uint64_t size,
                                       std::uint64_t merged) const noexcept {
    if (n->prev_free != nullptr || n->next_free != nullptr) return false;
    unsigned const own = index_of(size);
    unsigned const target = index_of(merged);
    unsigned first = first_nonempty_from(own);
    if (first == n->bin) first = first_nonempty_from(first + 1);
    // Sharing the request's own bin, the merged block must be alone there to be the best fit;
    // in a higher bin it must be in the first non-empty one, whose head it would be.
    return target == own ? first > target : first >= target;
  }

 private:
  static constexpr int scan_limit = 16;

  /// The miss path: a long bin (many slightly smaller blocks in front) may still hold a block
  /// that fits further down. Searching it costs less than growing the pool or failing. Out of
  /// line, so that the hit path stays as small as it was.
  [[gnu::noinline, gnu::cold]] static Node* best_fit_from(Node* n, std::uint64_t size) noexcept {
    Node* best = nullptr;
    for (; n; n = n->next_free) {
      if (n->size == size) return n;
      if (n->size > size && (!best || n->size < best->size)) best = n;
    }
    return best;
  }

  /// The head of the first non-empty bin above bin (fl, sl): every block there is large enough.
  [[nodiscard]] Node* head_above(unsigned fl, unsigned sl) const noexcept {
    auto const bin = first_nonempty_from(fl * sl_count + sl + 1);
    return bin < bin_count ? heads_[bin / sl_count][bin % sl_count] : nullptr;
  }

  static constexpr unsigned bin_count = fl_count * sl_count;

  /// The first non-empty bin at or after linear index `bin`, or bin_count.
  [[nodiscard]] unsigned first_nonempty_from(unsigned bin) const noexcept {
    if (bin >= bin_count) return bin_count;
    unsigned fl = bin / sl_count;
    std::uint32_t bits = sl_map_[fl] & (~0u << (bin % sl_count));
    if (!bits) {
      if (fl + 1 >= fl_count) return bin_count;
      std::uint64_t const fl_bits = fl_map_ & (~std::uint64_t{0} << (fl + 1));
      if (!fl_bits) return bin_count;
      fl = static_cast<unsigned>(std::countr_zero(fl_bits));
      bits = sl_map_[fl];
    }
    return fl * sl_count + static_cast<unsigned>(std::countr_zero(bits));
  }

  struct bin_index {
    unsigned fl;
    unsigned sl;
  };
  static bin_index mapping(std::uint64_t size) noexcept {
    if (size < sl_count) return {0, static_cast<unsigned>(size)};
    auto const msb = static_cast<unsigned>(63 - std::countl_zero(size));
    return {msb - sl_bits + 1, static_cast<unsigned>(size >> (msb - sl_bits)) - sl_count};
  }

  static unsigned index_of(std::uint64_t size) noexcept {
    auto const [fl, sl] = mapping(size);
    return fl * sl_count + sl;
  }

  std::uint64_t fl_map_ = 0;
  std::array<std::uint32_t, fl_count> sl_map_{};
  std::array<std::array<Node*, sl_count>, fl_count> heads_{};
};

}  // namespace cubert::memory
