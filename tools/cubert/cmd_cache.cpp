// SPDX-License-Identifier: Apache-2.0
// `cubert cache list|show|export|import|prune|clear`: inspect and ship the autotune cache.
#include "command.hpp"

#include <cubert/config.hpp>
#include <cubert/error.hpp>
#include <cubert/tune/tune_cache_store.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <system_error>

namespace {

namespace fs = std::filesystem;

struct cache_options {
  std::string dir;  // Empty: from the configuration.
  bool json = false;
  std::string target;
  std::string path;
  bool other_versions = false;
};

fs::path root_of(cache_options const& o) {
  return o.dir.empty() ? cubert::config::get().autotune.cache_dir : fs::path(o.dir);
}

void print_list(cache_options const& o) {
  auto const root = root_of(o);
  if (o.json) {
    std::cout << cubert::tune::list_cache_json(root) << "\n";
    return;
  }
  auto const files = cubert::tune::list_cache(root);
  if (files.empty()) {
    std::cout << "no autotune results under " << root.string() << "\n";
    return;
  }
  std::cout << fmt::format("{:<24} {:<10} {:<40} {:>6} {:>10} {:>8} {:>10}\n", "tuner", "version",
                           "device", "keys", "candidates", "corrupt", "bytes");
  for (auto const& f : files) {
    std::cout << fmt::format("{:<24} {:<10} {:<40} {:>6} {:>10} {:>8} {:>10}\n", f.tuner,
                             f.cubert_version, f.device.empty() ? f.device_hash : f.device, f.keys,
                             f.candidates, f.corrupt, f.bytes);
  }
}

void show(cache_options const& o) {
  auto const files = cubert::tune::select_cache(root_of(o), o.target);
  std::cout << (files.size() > 1 ? "[\n" : "");
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::cout << cubert::tune::show_cache_json(files[i]) << (i + 1 < files.size() ? ",\n" : "\n");
  }
  std::cout << (files.size() > 1 ? "]\n" : "");
}

void do_export(cache_options const& o) {
  auto const bundle = cubert::tune::export_cache(root_of(o));
  if (o.path.empty() || o.path == "-") {
    std::cout << bundle << "\n";
    return;
  }
  std::ofstream out(o.path, std::ios::binary | std::ios::trunc);
  out << bundle << "\n";
  // A small bundle sits in the stream's buffer until close, so a full disk shows only there.
  out.close();
  if (!out) throw cubert::io_error(fmt::format("cannot write '{}'", o.path));
  std::cerr << "exported to " << o.path << "\n";
}

void do_import(cache_options const& o) {
  std::stringstream ss;
  if (o.path == "-") {
    ss << std::cin.rdbuf();
  } else {
    // A directory opens as a stream on Linux and reads as nothing: "not a bundle" misled.
    std::error_code ec;
    if (std::filesystem::is_directory(o.path, ec)) {
      throw cubert::io_error(fmt::format("cannot read '{}': it is a directory", o.path));
    }
    std::ifstream in(o.path, std::ios::binary);
    if (!in) throw cubert::io_error(fmt::format("cannot read '{}'", o.path));
    ss << in.rdbuf();
    if (in.bad()) throw cubert::io_error(fmt::format("cannot read '{}'", o.path));
  }
  auto const added = cubert::tune::import_cache(root_of(o), ss.str());
  std::cout << fmt::format("imported {} records into {}\n", added, root_of(o).string());
}

void setup(CLI::App& app) {
  auto opts = std::make_shared<cache_options>();
  auto* cmd = app.add_subcommand("cache", "Inspect, ship and clean the autotune cache");
  cmd->require_subcommand(1);
  cmd->add_option("--dir", opts->dir, "Cache root (default: autotune.cache_dir / CUBERT_CACHE_DIR)")
      ->check(cubert::cli::non_empty());

  auto* list = cmd->add_subcommand("list", "List tuner files with key and candidate counts");
  list->add_flag("--json", opts->json, "JSON output");
  list->callback([opts] { print_list(*opts); });

  auto* sh = cmd->add_subcommand("show", "Print a tuner's records as JSON");
  sh->add_option("target", opts->target, "Tuner name or file path")->required();
  sh->add_flag("--json", opts->json, "JSON output (the only format)");
  sh->callback([opts] { show(*opts); });

  auto* ex = cmd->add_subcommand("export", "Write every record to a bundle (JSON)");
  ex->add_option("file", opts->path, "Output file ('-' or none: stdout)");
  ex->callback([opts] { do_export(*opts); });

  auto* im = cmd->add_subcommand("import", "Merge a bundle into the cache");
  im->add_option("file", opts->path, "Bundle file ('-': stdin)")->required();
  im->callback([opts] { do_import(*opts); });

  auto* pr = cmd->add_subcommand("prune", "Drop superseded records (and other versions)");
  pr->add_flag("--other-versions", opts->other_versions, "Also remove other cubert versions");
  pr->callback([opts] {
    auto const n = cubert::tune::prune_cache(root_of(*opts), opts->other_versions);
    std::cout << fmt::format("removed {} records\n", n);
  });

  auto* cl = cmd->add_subcommand("clear", "Remove every autotune result");
  cl->callback([opts] {
    auto const root = root_of(*opts);
    auto const n = cubert::tune::clear_cache(root);
    std::cout << fmt::format("removed {} tuner files from {}\n", n, root.string());
    std::error_code ec;
    if (std::filesystem::exists(root / "autotune", ec)) {
      std::cout << fmt::format("kept {}: it holds files cubert did not write\n",
                               (root / "autotune").string());
    }
  });
}

static cubert::cli::command_registrar reg{"cache", setup};

}  // namespace
