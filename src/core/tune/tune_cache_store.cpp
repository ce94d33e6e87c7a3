// SPDX-License-Identifier: Apache-2.0
#include "tune/cache_record.hpp"
#include "tune/file_lock.hpp"

#include <cubert/build_config.hpp>
#include <cubert/error.hpp>
#include <cubert/tune/tune_cache.hpp>
#include <cubert/tune/tune_cache_store.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>

namespace cubert::tune {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct parsed_file {
  std::vector<json> records;
  std::size_t corrupt = 0;
};

// Why a bundled record is not one a tuner wrote, or nullopt. Checked before anything is written:
// the merge below reads these fields as strings.
std::optional<std::string> record_problem(json const& r) {
  if (!r.is_object()) return "not an object";
  auto const type = r.find("type");
  if (type == r.end() || !type->is_string()) return "no 'type'";
  auto const text = [&](char const* field) -> std::optional<std::string> {
    auto const it = r.find(field);
    if (it == r.end() || !it->is_string()) return fmt::format("'{}' is not a string", field);
    return std::nullopt;
  };
  if (auto const why = text("key")) return why;
  if (auto const t = r.find("time"); t != r.end() && !t->is_number_integer()) {
    return "'time' is not an integer";
  }
  if (*type == "candidate") {
    if (auto const c = r.find("checksum"); c != r.end() && !c->is_string()) {
      return "'checksum' is not a string";
    }
    try {
      (void)detail::parse_candidate(r);
    } catch (json::exception const& e) {
      return fmt::format("malformed candidate: {}", e.what());
    }
    return std::nullopt;
  }
  if (*type == "decision") {
    if (auto const why = text("checksum")) return why;
    if (auto const why = text("winner_name")) return why;
    if (!r.contains("winner") || !r["winner"].is_number_unsigned()) {
      return "'winner' is not an index";
    }
    return std::nullopt;
  }
  return fmt::format("unknown type {}", type->dump());
}

// A line of a cache file as the tools read it: a record passes the checks an import makes, or the
// line is corrupt (a well-checksummed line with a numeric key made every command fail), so what
// `export` writes `import` takes.
std::optional<json> decode_record(std::string_view line) {
  auto r = detail::decode_line(line);
  if (!r || record_problem(*r)) return std::nullopt;
  return r;
}

// A field the tools read as text: "" when absent or not a string (another version's record).
std::string text_of(json const& r, char const* field) {
  auto const it = r.find(field);
  return it != r.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

// Caller holds the file's lock (flock locks of two descriptors of one process conflict).
parsed_file parse_locked(fs::path const& file) {
  parsed_file out;
  auto const text = detail::read_from(file, 0);
  std::size_t consumed = 0;
  detail::for_each_line(text, consumed, [&](std::string_view line, bool) {
    if (line.empty()) return;
    if (auto r = decode_record(line)) {
      out.records.push_back(std::move(*r));
    } else {
      ++out.corrupt;
    }
  });
  return out;
}

parsed_file parse(fs::path const& file) {
  detail::file_lock lock(file, detail::file_lock::mode::shared);
  return parse_locked(file);
}

std::string read_small(fs::path const& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Identity of a record for de-duplication: a candidate by (key, name, version, explicit set
// checksum), a decision by (key, checksum). The latest one of each identity is the one that counts.
std::string identity(json const& r) {
  auto const key = text_of(r, "key");
  auto const type = text_of(r, "type");
  if (type == "candidate") {
    // A verdict per reference is kept (sets whose candidate 0 differs share candidates).
    return "c\x1f" + key + '\x1f' + text_of(r, "name") + '\x1f' + text_of(r, "version") + '\x1f' +
           text_of(r, "checksum") + '\x1f' + text_of(r, "reference");
  }
  return "d\x1f" + key + '\x1f' + text_of(r, "checksum");
}

// When a record was written (seconds since the epoch; 0 if unknown).
std::int64_t time_of(json const& r) {
  auto const it = r.find("time");
  return it != r.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}

// Every cache file under `root`, sorted: <root>/autotune/<version>/<device>/<tuner>.jsonl. A
// directory or a dangling link named *.jsonl is not one; listing it made every command fail,
// `clear` included.
std::vector<fs::path> cache_files(fs::path const& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  auto const base = root / "autotune";
  if (!fs::is_directory(base, ec)) return out;
  for (auto const& version : fs::directory_iterator(base, ec)) {
    if (!version.is_directory(ec)) continue;
    for (auto const& device : fs::directory_iterator(version.path(), ec)) {
      if (!device.is_directory(ec)) continue;
      for (auto const& file : fs::directory_iterator(device.path(), ec)) {
        if (file.path().extension() == ".jsonl" && file.is_regular_file(ec)) {
          out.push_back(file.path());
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

[[noreturn]] void cannot_remove(fs::path const& p, std::error_code ec) {
  throw io_error(fmt::format("cannot remove '{}': {}", p.string(), ec.message()));
}

// What a tuner writes besides its files and locks: device.txt, and the temporaries a rewrite
// goes through (`<file>.tmp.<pid>.<salt>.<n>`, file_lock.cpp). Anything else in the cache folder
// was put there by someone else, and a clear leaves it (and so its folders).
bool written_by_cubert(std::string_view name) {
  // Named as a tuner file or a lock but not one (a link, say): in cubert's namespace all the same.
  if (name == "device.txt" || name.ends_with(".jsonl") || name.ends_with(".lock")) return true;
  auto const tmp = name.find(".tmp.");
  if (tmp == std::string_view::npos) return false;
  auto const base = name.substr(0, tmp);
  return base == "device.txt" || base.ends_with(".jsonl");
}

// Removes a file that is not a lock file nor a cache file (device.txt, a temporary file).
void remove_plain(fs::path const& p) {
  std::error_code ec;
  fs::remove(p, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) cannot_remove(p, ec);
}

// Removes `dir` with what it holds; returns the cache files (*.jsonl) removed, counted without
// reading them, so that a damaged cache can still be cleared. A cache file and its lock file go
// under that lock, as writers take it: an append or prune in progress ends first, one waiting
// starts over on a new file, and two writers never hold the lock of one file at once.
std::size_t remove_tree(fs::path const& dir) {
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    entries.push_back(*it);
  }
  if (ec && ec != std::errc::no_such_file_or_directory) cannot_remove(dir, ec);
  std::size_t removed = 0;
  std::vector<fs::path> plain;
  for (auto const& e : entries) {
    auto const& p = e.path();
    if (e.is_directory(ec) && !e.is_symlink(ec)) {
      removed += remove_tree(p);
    } else if (p.extension() == ".jsonl" && e.is_regular_file(ec)) {
      detail::file_lock lock(p, detail::file_lock::mode::exclusive);
      if (fs::remove(p, ec)) ++removed;
      if (ec && ec != std::errc::no_such_file_or_directory) cannot_remove(p, ec);
      lock.remove_held(p);
    } else if (p.extension() == ".lock" && e.is_regular_file(ec)) {
      if (!fs::exists(p, ec)) continue;  // Removed with its cache file above.
      auto const locked = fs::path(p).replace_extension();
      detail::file_lock lock(locked, detail::file_lock::mode::exclusive);
      lock.remove_held(locked);
    } else if (written_by_cubert(p.filename().string())) {
      plain.push_back(p);
    }
  }
  // Only now: a writer that held a lock when the folder was listed may have been writing
  // device.txt through a temporary file, and is done once its lock was had.
  for (auto const& p : plain) remove_plain(p);
  fs::remove(dir, ec);
  // Not empty: a writer started a new file after its folder was emptied (it is newer than the
  // clear and stays), or the folder holds what cubert did not write.
  if (ec && ec != std::errc::directory_not_empty && ec != std::errc::no_such_file_or_directory) {
    cannot_remove(dir, ec);
  }
  return removed;
}

json info_json(cache_file_info const& f) {
  return {{"file", f.file.string()},
          {"cubert_version", f.cubert_version},
          {"device_hash", f.device_hash},
          {"device", f.device},
          {"tuner", f.tuner},
          {"keys", f.keys},
          {"candidates", f.candidates},
          {"decisions", f.decisions},
          {"corrupt", f.corrupt},
          {"bytes", f.bytes}};
}

}  // namespace

std::vector<cache_file_info> list_cache(fs::path const& root) {
  std::vector<cache_file_info> out;
  for (auto const& path : cache_files(root)) {
    std::error_code ec;
    auto const device_dir = path.parent_path();
    cache_file_info info;
    info.file = path;
    info.cubert_version = device_dir.parent_path().filename().string();
    info.device_hash = device_dir.filename().string();
    info.device = read_small(device_dir / "device.txt");
    info.tuner = path.stem().string();
    info.bytes = fs::file_size(path, ec);
    auto const parsed = parse(path);
    std::set<std::string> keys;
    for (auto const& r : parsed.records) {
      keys.insert(text_of(r, "key"));
      (text_of(r, "type") == "candidate" ? info.candidates : info.decisions) += 1;
    }
    info.keys = keys.size();
    info.corrupt = parsed.corrupt;
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<cache_file_info> select_cache(fs::path const& root, std::string const& target) {
  std::vector<cache_file_info> out;
  auto const stem = tune_cache::file_for({}, target, {}).stem().string();
  for (auto const& f : list_cache(root)) {
    // By identity, not spelling: the listed path is under the root as given, the user's path is
    // relative to the working directory or spelled another way.
    std::error_code ec;
    if (f.tuner == target || f.tuner == stem || fs::equivalent(f.file, target, ec)) {
      out.push_back(f);
    }
  }
  if (out.empty()) {
    throw invalid_argument(
        fmt::format("no tune cache file or tuner named '{}' under {}", target, root.string()));
  }
  return out;
}

std::string list_cache_json(fs::path const& root) {
  json arr = json::array();
  for (auto const& f : list_cache(root)) arr.push_back(info_json(f));
  return arr.dump(2, ' ', false, json::error_handler_t::replace);
}

std::string show_cache_json(cache_file_info const& file) {
  auto parsed = parse(file.file);
  json j = info_json(file);
  j["records"] = std::move(parsed.records);
  return j.dump(2, ' ', false, json::error_handler_t::replace);
}

std::string export_cache(fs::path const& root) {
  json files = json::array();
  for (auto const& f : list_cache(root)) {
    files.push_back({{"cubert_version", f.cubert_version},
                     {"device_hash", f.device_hash},
                     {"device", f.device},
                     {"tuner", f.tuner},
                     {"records", parse(f.file).records}});
  }
  // device.txt and file names are whatever the disk holds; invalid UTF-8 becomes U+FFFD.
  return json{{"format", "cubert-tune-cache"}, {"format_version", 1}, {"files", files}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

std::size_t import_cache(fs::path const& root, std::string_view bundle) {
  auto j = json::parse(bundle, nullptr, false);
  if (j.is_discarded() || !j.is_object() || text_of(j, "format") != "cubert-tune-cache" ||
      !j.contains("files") || !j["files"].is_array()) {
    throw invalid_argument("not a cubert tune cache bundle (expected format cubert-tune-cache)");
  }
  // Validate everything before writing anything.
  for (auto const& f : j["files"]) {
    for (char const* k : {"cubert_version", "device_hash", "tuner"}) {
      if (!f.contains(k) || !f[k].is_string() || f[k].get<std::string>().empty()) {
        throw invalid_argument(fmt::format("bundle entry without '{}'", k));
      }
    }
    if (!f.contains("records") || !f["records"].is_array()) {
      throw invalid_argument("bundle entry without 'records'");
    }
    if (f.contains("device") && !f["device"].is_string()) {
      throw invalid_argument("bundle entry whose 'device' is not a string");
    }
    for (std::size_t i = 0; i < f["records"].size(); ++i) {
      if (auto const why = record_problem(f["records"][i])) {
        throw invalid_argument(fmt::format("bundle entry for tuner '{}': record {}: {}",
                                           f["tuner"].get<std::string>(), i, *why));
      }
    }
  }
  std::size_t added = 0;
  for (auto const& f : j["files"]) {
    auto const dir = root / "autotune" / detail::sanitise(f["cubert_version"].get<std::string>()) /
                     detail::sanitise(f["device_hash"].get<std::string>());
    auto const file = dir / (detail::sanitise(f["tuner"].get<std::string>()) + ".jsonl");
    detail::file_lock lock(file, detail::file_lock::mode::exclusive);
    std::set<std::string> present;
    std::map<std::string, std::int64_t> local_time;  // Latest local record per identity.
    std::error_code ec;
    if (fs::exists(file, ec)) {
      for (auto const& r : parse_locked(file).records) {
        present.insert(r.dump());
        auto& t = local_time[identity(r)];
        t = std::max(t, time_of(r));
      }
    }
    std::string data;
    for (auto const& r : f["records"]) {
      if (!r.is_object() || !r.contains("type") || !present.insert(r.dump()).second) continue;
      // The latest line of an identity wins: an older imported record appended after a newer
      // local one would override it, so it is skipped.
      if (auto it = local_time.find(identity(r));
          it != local_time.end() && it->second >= time_of(r)) {
        continue;
      }
      data += detail::encode_line(r);
      ++added;
    }
    auto const device = text_of(f, "device");
    if (!device.empty() && !fs::exists(dir / "device.txt", ec)) {
      detail::replace_file(dir / "device.txt", device);
    }
    if (!data.empty()) detail::append_lines(file, data);
  }
  return added;
}

std::size_t prune_cache(fs::path const& root, bool other_versions) {
  std::size_t removed = 0;
  std::error_code ec;
  if (other_versions) {
    auto const current = detail::sanitise(CUBERT_VERSION_STRING);
    for (auto const& version : fs::directory_iterator(root / "autotune", ec)) {
      if (version.path().filename() == current) continue;
      for (auto const& f : fs::recursive_directory_iterator(version.path(), ec)) {
        if (f.path().extension() != ".jsonl" || !f.is_regular_file(ec)) continue;
        // Only counted: a file that cannot be read goes with the rest all the same.
        try {
          removed += parse(f.path()).records.size();
        } catch (io_error const&) {
        }
      }
      fs::remove_all(version.path(), ec);
      if (ec && ec != std::errc::no_such_file_or_directory) cannot_remove(version.path(), ec);
    }
  }
  for (auto const& f : list_cache(root)) {
    detail::file_lock lock(f.file, detail::file_lock::mode::exclusive);
    if (!fs::exists(f.file, ec)) {  // Cleared since it was listed: rewriting it would revive it.
      lock.remove_held(f.file);
      continue;
    }
    std::string text = detail::read_from(f.file, 0);
    std::vector<json> records;
    std::size_t lines = 0;
    std::size_t consumed = 0;
    detail::for_each_line(text, consumed, [&](std::string_view line, bool) {
      if (line.empty()) return;
      ++lines;
      if (auto r = decode_record(line)) records.push_back(std::move(*r));
    });
    std::map<std::string, std::size_t> latest;
    for (std::size_t i = 0; i < records.size(); ++i) latest[identity(records[i])] = i;
    std::string out;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < records.size(); ++i) {
      if (latest[identity(records[i])] != i) continue;
      out += detail::encode_line(records[i]);
      ++kept;
    }
    detail::replace_file(f.file, out);
    removed += lines - kept;
  }
  return removed;
}

std::size_t clear_cache(fs::path const& root) {
  auto const base = root / "autotune";
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(base, ec))) return 0;
  return remove_tree(base);
}

}  // namespace cubert::tune
