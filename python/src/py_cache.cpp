// SPDX-License-Identifier: Apache-2.0
// The autotune cache's whole-cache operations for Python (`cubert.cache`, python/cubert/cache.py
// wraps them): what `cubert cache list|show|export|import|prune|clear` does, as functions.
#include "py_common.hpp"

#include <cubert/config.hpp>
#include <cubert/tune/tune_cache_store.hpp>

#include <filesystem>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <optional>
#include <string>

namespace cubert::python {

namespace {

namespace fs = std::filesystem;

// The cache root: the one given, else the configuration's (autotune.cache_dir, CUBERT_CACHE_DIR).
fs::path root_of(std::optional<std::string> const& root) {
  return root ? fs::path(*root) : config::get().autotune.cache_dir;
}

}  // namespace

void bind_cache(nb::module_& m) {
  m.def(
      "_cache_root", [] { return config::get().autotune.cache_dir.string(); },
      "The configured cache root.");
  m.def(
      "_cache_list_json",
      [](std::optional<std::string> const& root) {
        auto const r = root_of(root);
        nb::gil_scoped_release nogil;
        return tune::list_cache_json(r);
      },
      nb::arg("root") = nb::none());
  m.def(
      "_cache_show_json",
      [](std::string const& target, std::optional<std::string> const& root) {
        auto const r = root_of(root);
        nb::gil_scoped_release nogil;
        std::string out = "[";
        auto const files = tune::select_cache(r, target);
        for (std::size_t i = 0; i < files.size(); ++i) {
          out += (i ? "," : "") + tune::show_cache_json(files[i]);
        }
        return out + "]";
      },
      nb::arg("target"), nb::arg("root") = nb::none());
  m.def(
      "_cache_export_bundle",
      [](std::optional<std::string> const& root) {
        auto const r = root_of(root);
        nb::gil_scoped_release nogil;
        return tune::export_cache(r);
      },
      nb::arg("root") = nb::none());
  m.def(
      "_cache_import_bundle",
      [](std::string const& bundle, std::optional<std::string> const& root) {
        auto const r = root_of(root);
        nb::gil_scoped_release nogil;
        return tune::import_cache(r, bundle);
      },
      nb::arg("bundle"), nb::arg("root") = nb::none());
  m.def(
      "_cache_prune",
      [](bool other_versions, std::optional<std::string> const& root) {
        auto const r = root_of(root);
        nb::gil_scoped_release nogil;
        return tune::prune_cache(r, other_versions);
      },
      nb::arg("other_versions") = false, nb::arg("root") = nb::none());
  m.def(
      "_cache_clear",
      [](std::optional<std::string> const& root) {
        auto const r = root_of(root);
        nb::gil_scoped_release nogil;
        return tune::clear_cache(r);
      },
      nb::arg("root") = nb::none());
}

}  // namespace cubert::python
