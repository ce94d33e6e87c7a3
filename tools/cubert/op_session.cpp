// SPDX-License-Identifier: Apache-2.0
// The flow shared by `cubert tune` and `cubert bench`.
#include "op_session.hpp"

#include <cubert/build_config.hpp>

#include <chrono>

namespace cubert::cli {

namespace {

// Everything the command line can get wrong, refused before a device or a cache is touched.
std::vector<ops::problem> checked(op_options const& o) {
  auto problems = problems_of(o);
  for (auto const& p : problems) ops::workload::validate(p);
  (void)parse_budget(o.budget);
  return problems;
}

// The library's tuning configured (after the checks, before any tuner exists), then the device.
client configured_device(op_options const& o, tune::progress_fn progress) {
  configure_tuning(o, std::move(progress));
  return make_client(o.device);
}

}  // namespace

op_session::op_session(op_options const& o, std::string command)
    : options_(o),
      problems_(checked(o)),
      client_(configured_device(
          o,
          [this](tune::tune_progress const& p) {
            if (p.what == tune::tune_progress::stage::finished) {
              decided_ms_ = std::chrono::duration<double, std::milli>(p.elapsed).count();
            }
            bar_(p);
          })),
      doc_{{"command", std::move(command)},
           {"argv", o.argv},
           {"cubert_version", CUBERT_VERSION_STRING},
           {"date", utc_now()},
           {"keys", nlohmann::json::array()}} {}

void op_session::for_each(std::function<void(tuned_problem&)> const& each) {
  for (auto const& p : problems_) {
    ops::workload w(client_, p);
    auto const tuner = w.tuner();
    auto const before = tuner->benchmarked();
    decided_ms_ = 0;
    auto const start = std::chrono::steady_clock::now();
    w.run();  // Tunes first when neither memory nor the persistent cache knows the problem.
    client_.sync();
    double const ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    bar_.clear();
    bool const cached = tuner->benchmarked() == before;
    if (!ceilings_) ceilings_ = ops::ceilings(client_);
    auto key = key_json(w, *ceilings_, cached, ms);
    key["decided_ms"] = decided_ms_;
    tuned_problem t{w, key, cached, ms, decided_ms_, tuner->benchmarked() - before};
    each(t);
    doc_["keys"].push_back(std::move(key));
  }
}

void op_session::finish() {
  if (!ceilings_) ceilings_ = ops::ceilings(client_);
  doc_["device"] = device_json(client_, *ceilings_);
  emit(options_, doc_);
}

}  // namespace cubert::cli
