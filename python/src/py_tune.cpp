// SPDX-License-Identifier: Apache-2.0
// Tunable sets with Python candidates: cubert.TunableSet (candidates, a key function, an input
// function) and cubert.Tuner (a named tuner per device: tunes a key once, keeps the fastest in
// memory and in the persistent cache, runs it). The C++ tuner runs with the GIL released and may
// call candidates on its own threads; every call into Python takes the GIL, and every Python
// object the tuner copies or drops is a gil_object, which takes it too.
#include "py_common.hpp"

#include <cubert/config.hpp>
#include <cubert/tune/anchor.hpp>
#include <cubert/tune/local_tuner.hpp>

#include <memory>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

namespace cubert::python {

namespace {

/// A Python object that C++ code may copy, move and drop without holding the GIL.
/// Invariant: `obj` is only touched with the GIL held (a move steals it without touching it).
class gil_object {
 public:
  gil_object() = default;
  explicit gil_object(nb::object o) noexcept : obj_(std::move(o)) {}
  gil_object(gil_object const& o) {
    nb::gil_scoped_acquire gil;
    obj_ = o.obj_;
  }
  gil_object(gil_object&& o) noexcept = default;
  gil_object& operator=(gil_object const& o) {
    if (this != &o) {
      nb::gil_scoped_acquire gil;
      obj_ = o.obj_;
    }
    return *this;
  }
  gil_object& operator=(gil_object&& o) noexcept {
    if (this != &o) {
      drop();
      obj_ = std::move(o.obj_);
    }
    return *this;
  }
  ~gil_object() { drop(); }

  /// The object; the caller holds the GIL.
  [[nodiscard]] nb::object const& get() const noexcept { return obj_; }
  [[nodiscard]] nb::object take() noexcept { return std::move(obj_); }

 private:
  void drop() noexcept {
    if (!obj_.is_valid()) return;
    if (!Py_IsInitialized()) {  // The interpreter is gone: the reference is left, as Python does.
      (void)obj_.release();
      return;
    }
    nb::gil_scoped_acquire gil;
    obj_.reset();
  }

  nb::object obj_;
};

// Key: the key function's result as text; output: what the candidate returns; input: the
// positional arguments, as one tuple.
using set_t = tune::tunable_set<std::string, gil_object, gil_object>;
using tuner_t = tune::local_tuner<std::string>;

gil_object call(gil_object const& fn, gil_object const& args) {
  nb::gil_scoped_acquire gil;
  return gil_object(fn.get()(*nb::borrow<nb::tuple>(args.get())));
}

struct py_tunable_set {
  // Replaced, never changed, when a candidate is added: a tuning in progress on another thread
  // keeps the set it started with.
  std::shared_ptr<set_t const> set;
};

struct py_tuner {
  std::unique_ptr<tuner_t> tuner;

  ~py_tuner() {
    // Joining a background tuning needs its candidates to take the GIL.
    nb::gil_scoped_release nogil;
    tuner.reset();
  }
};

gil_object args_of(nb::args const& args) {
  return gil_object(nb::borrow<nb::object>(args));
}

py_tunable_set make_set(nb::object key, nb::object inputs, nb::object check) {
  if (!PyCallable_Check(key.ptr())) throw nb::type_error("TunableSet: key must be callable");
  if (!inputs.is_none() && !PyCallable_Check(inputs.ptr())) {
    throw nb::type_error("TunableSet: inputs must be callable or None");
  }
  gil_object key_fn(std::move(key));
  gil_object inputs_fn(std::move(inputs));
  auto keys = [key_fn](gil_object const& args) {
    nb::gil_scoped_acquire gil;
    return nb::cast<std::string>(nb::str(key_fn.get()(*nb::borrow<nb::tuple>(args.get()))));
  };
  auto fresh = [inputs_fn](std::string const& k, gil_object const& args) {
    nb::gil_scoped_acquire gil;
    if (inputs_fn.get().is_none()) return std::tuple<gil_object>(args);
    nb::object made = inputs_fn.get()(k, *nb::borrow<nb::tuple>(args.get()));
    if (!nb::isinstance<nb::tuple>(made)) {
      throw nb::type_error("TunableSet: inputs(key, *args) must return a tuple of arguments");
    }
    return std::tuple<gil_object>(gil_object(std::move(made)));
  };
  auto s = std::make_shared<set_t>(keys, fresh);
  if (!check.is_none()) {
    gil_object check_fn(std::move(check));
    s->with_check([check_fn](gil_object const& reference,
                             gil_object const& candidate) -> std::optional<std::string> {
      nb::gil_scoped_acquire gil;
      nb::object verdict = check_fn.get()(reference.get(), candidate.get());
      if (verdict.is_none()) return std::nullopt;
      return nb::cast<std::string>(nb::str(verdict));
    });
  }
  return py_tunable_set{std::move(s)};
}

nb::list results_of(std::vector<tune::candidate_result> const& results) {
  nb::list out;
  for (auto const& r : results) {
    nb::dict d;
    d["index"] = r.index;
    d["name"] = r.name;
    d["version"] = r.version;
    d["status"] = std::string(tune::to_string(r.status));
    d["error"] = r.error;
    if (r.stats) {
      d["median_ns"] = r.stats->median.count();
      d["min_ns"] = r.stats->min.count();
      d["samples"] = r.stats->samples;
    }
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_tune(nb::module_& m) {
  nb::class_<py_tunable_set>(m, "TunableSet",
                             "The candidates of one operation, with how to key its inputs and how "
                             "to make benchmark inputs from them.")
      .def(
          "__init__",
          [](py_tunable_set* self, nb::object key, nb::object inputs, nb::object check) {
            new (self)
                py_tunable_set(make_set(std::move(key), std::move(inputs), std::move(check)));
          },
          nb::arg("key"), nb::kw_only(), nb::arg("inputs") = nb::none(),
          nb::arg("check") = nb::none(),
          "key(*args) names the inputs' class (its str() is the key: sizes rounded with "
          "cubert.anchor, say); inputs(key, *args) returns fresh arguments for benchmarking (so "
          "tuning never writes into the caller's outputs; None: the caller's own); "
          "check(reference, output) returns None when a candidate's output matches candidate "
          "0's, else the reason (used when autotune checks are on).")
      .def(
          "add",
          [](py_tunable_set& self, std::string name, nb::object fn, std::string version) {
            if (!PyCallable_Check(fn.ptr()))
              throw nb::type_error("TunableSet.add: fn must be callable");
            auto next = std::make_shared<set_t>(*self.set);
            gil_object held(std::move(fn));
            next->with(
                std::move(name), [held](gil_object args) { return call(held, args); },
                std::move(version));
            self.set = std::move(next);
            return &self;
          },
          nb::arg("name"), nb::arg("fn"), nb::arg("version") = "", nb::rv_policy::reference,
          "Adds a candidate fn(*args) (the first added is the safe default). Change `version` when "
          "fn changes: only that candidate is timed again.")
      .def_prop_ro("names",
                   [](py_tunable_set const& self) {
                     nb::list out;
                     for (std::size_t i = 0; i < self.set->listed(); ++i) {
                       out.append(self.set->name_of(i));
                     }
                     return out;
                   })
      .def("__len__", [](py_tunable_set const& self) { return self.set->size(); });

  nb::class_<py_tuner>(m, "Tuner",
                       "A named tuner: per device and key, the fastest candidate of a set, tuned "
                       "once, kept in memory and in the persistent cache (shared by processes).")
      .def(
          "__init__",
          [](py_tuner* self, std::string const& name, std::optional<std::string> const& cache_dir,
             std::optional<bool> checks, std::optional<bool> cache) {
            auto options = tune::tuner_options::from(config::get());
            if (cache_dir) options.cache_dir = *cache_dir;
            if (checks) options.checks = *checks;
            if (cache) options.cache_enabled = *cache;
            new (self) py_tuner{std::make_unique<tuner_t>(name, std::move(options))};
          },
          nb::arg("name"), nb::kw_only(), nb::arg("cache_dir") = nb::none(),
          nb::arg("checks") = nb::none(), nb::arg("cache") = nb::none(),
          "`name` names the tuner in the persistent cache; cache_dir, checks and cache override "
          "the configuration's [autotune] cache_dir, checks and cache.")
      .def(
          "execute",
          [](py_tuner& self, py_client const& c, py_tunable_set const& s, nb::args args) {
            auto input = args_of(args);
            auto set = s.set;
            gil_object out;
            {
              nb::gil_scoped_release nogil;
              auto client = c.client;
              out = self.tuner->execute(c.device, client, set, std::move(input));
            }
            return out.take();
          },
          nb::arg("client"), nb::arg("set"), nb::arg("args"),
          "Runs the fastest candidate of `set` for the arguments' key on the client's device, "
          "tuning the key first if neither memory nor the persistent cache knows it; returns what "
          "the candidate returns. AutotuneError when no candidate works.")
      .def(
          "choice",
          [](py_tuner& self, py_client const& c, py_tunable_set const& s,
             nb::args args) -> std::optional<std::string> {
            auto const key = s.set->generate_key(args_of(args));
            nb::gil_scoped_release nogil;
            auto client = c.client;
            auto const i = self.tuner->tuner_for(c.device, client)->fastest(key);
            if (!i) return std::nullopt;
            return s.set->name_of(*i);
          },
          nb::arg("client"), nb::arg("set"), nb::arg("args"),
          "The name of the candidate chosen for the arguments' key, or None if not tuned yet.")
      .def(
          "results",
          [](py_tuner& self, py_client const& c, py_tunable_set const& s, nb::args args) {
            auto const key = s.set->generate_key(args_of(args));
            std::vector<tune::candidate_result> results;
            {
              nb::gil_scoped_release nogil;
              auto client = c.client;
              results = self.tuner->tuner_for(c.device, client)->results(key);
            }
            return results_of(results);
          },
          nb::arg("client"), nb::arg("set"), nb::arg("args"),
          "Each candidate's result for the arguments' key (measured here or read from the cache): "
          "dicts of index, name, version, status, error, and median_ns, min_ns, samples when "
          "measured.")
      .def(
          "clear",
          [](py_tuner& self) {
            nb::gil_scoped_release nogil;
            self.tuner->clear();
          },
          "Forgets the in-memory results (the persistent cache is kept).")
      .def_prop_ro("name", [](py_tuner const& self) { return self.tuner->name(); });

  m.def(
      "anchor",
      [](std::uint64_t x, std::optional<std::uint64_t> max, std::optional<std::uint64_t> min) {
        return tune::anchor(x, max, min);
      },
      nb::arg("x"), nb::arg("max") = nb::none(), nb::arg("min") = nb::none(),
      "`x` rounded up to a power of two (scaled by the autotune level), clamped to [min, max]: "
      "sizes that tune alike share a key.");
}

}  // namespace cubert::python
