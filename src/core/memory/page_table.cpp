// SPDX-License-Identifier: Apache-2.0
#include "memory/page_table.hpp"

namespace cubert::memory {

void page_table::add(page_record& page, std::uint64_t bytes) {
  // Room in the list first: once the storage has handed out the page nothing may throw.
  if (pages_.size() == pages_.capacity()) pages_.reserve(pages_.size() * 2 + 4);
  page.storage = storage_->alloc(bytes);  // may throw out_of_memory; nothing changed yet
  page.table_index = pages_.size();
  pages_.push_back(&page);
  live_.bytes_reserved += bytes;
  stats_->add_reserved(bytes);
  peak_reserved_ = std::max(peak_reserved_, live_.bytes_reserved);
  peak_pages_ = std::max<std::uint64_t>(peak_pages_, pages_.size());
}

void page_table::remove(page_record& page) noexcept {
  storage_->dealloc(page.storage.id);
  live_.bytes_reserved -= page.storage.size;
  stats_->sub_reserved(page.storage.size);
  auto const index = page.table_index;
  if (index + 1 != pages_.size()) {
    pages_[index] = pages_.back();
    pages_[index]->table_index = index;
  }
  pages_.pop_back();
}

void page_table::reset_peaks() noexcept {
  peak_reserved_ = live_.bytes_reserved;
  peak_in_use_ = live_.bytes_in_use;
  peak_pages_ = pages_.size();
}

void page_table::report(pool_usage& row) const noexcept {
  row.pages = pages_.size();
  row.peak_pages = peak_pages_;
  row.usage = live_;
  row.peak_bytes_reserved = peak_reserved_;
  row.peak_bytes_in_use = peak_in_use_;
}

}  // namespace cubert::memory
