// SPDX-License-Identifier: Apache-2.0
// `cubert run`: a real workload on a device (elementwise and reduction kernels over generated
// data), each result checked against a host reference, then the memory and profiling reports.
#include "command.hpp"
#include "run_check.hpp"
#include "run_footprint.hpp"
#include "run_kernels.hpp"

#include <cubert/client.hpp>
#include <cubert/cpu.hpp>
#include <cubert/error.hpp>
#include <cubert/profiling_summary.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

namespace {

using namespace cubert;
using cli::check;
using cli::max_keeping_nan;

struct run_options {
  std::string device = "cpu";
  std::uint32_t size = 1 << 22;
  std::string channel = "mutex";
  unsigned repeat = 5;
  unsigned threads = 0;
};

template <typename T>
std::vector<T> read_values(client const& c, handle const& h) {
  auto const got = c.read_one(h.binding());
  std::vector<T> out(got.size() / sizeof(T));
  std::memcpy(out.data(), got.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
std::span<std::byte const> as_bytes(std::vector<T> const& v) {
  return std::as_bytes(std::span{v});
}

// Runs `launch` once unprofiled, then `repeat` times inside profile windows, recording each into
// `summary`. The first launch compiles and loads the kernel (NVRTC took ~90 ms on cuda:0 without
// a disk cache), which device timing would otherwise charge to the kernel: the device idles
// between the window's start and the late launch. Every workload launch is idempotent.
template <typename F>
void timed(client const& c, profiling::profiling_summary& summary, std::string const& name,
           unsigned repeat, F&& launch) {
  launch();
  for (unsigned r = 0; r < repeat; ++r) summary.record(name, c.profile(launch, name));
}

std::vector<check> run_workload(client const& c, run_options const& opts,
                                profiling::profiling_summary& summary, std::string& memory) {
  std::uint32_t const n = opts.size;
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> a(n), b(n);
  for (auto& v : a) v = dist(gen);
  for (auto& v : b) v = dist(gen);
  auto ha = c.create(as_bytes(a));
  auto hb = c.create(as_bytes(b));
  auto out = c.empty(std::uint64_t{n} * sizeof(float));
  auto const cubes =
      static_cast<std::uint32_t>((std::uint64_t{n} + run_kernels::block - 1) / run_kernels::block);
  std::vector<check> checks;

  auto add = run_kernels::add_f32();
  timed(c, summary, "add_f32", opts.repeat, [&] {
    c.execute(add, cube_count{cubes},
              bindings{}
                  .with_buffers({ha.binding(), hb.binding(), out.binding()})
                  .with_scalar(elem::u32, {n}));
  });
  auto sum = read_values<float>(c, out);
  check add_check{"add_f32 (a + b)", n, 0, 0};
  for (std::uint32_t i = 0; i < n; ++i) {
    add_check.note(std::fabs(sum[i] - (a[i] + b[i])));
  }
  checks.push_back(add_check);

  float const alpha = 1.5f;
  auto axpy = run_kernels::axpy_f32();
  timed(c, summary, "axpy_f32", opts.repeat, [&] {
    c.execute(axpy, cube_count{cubes},
              bindings{}
                  .with_buffers({ha.binding(), hb.binding(), out.binding()})
                  .with_scalar(alpha)
                  .with_scalar(elem::u32, {n}));
  });
  auto ax = read_values<float>(c, out);
  check axpy_check{"axpy_f32 (1.5·a + b)", n, 0, 1e-6};
  for (std::uint32_t i = 0; i < n; ++i) {
    double const ref = double(alpha) * a[i] + b[i];
    axpy_check.note(std::fabs(ax[i] - ref));
  }
  checks.push_back(axpy_check);

  // Two-pass sum: per-cube partials, then one cube over the partials.
  std::uint32_t const chunk = 1 << 14;
  // In 64 bits like `cubes`: past 2^32 - chunk elements the sum wrapped to 0 partials.
  auto const parts = static_cast<std::uint32_t>((std::uint64_t{n} + chunk - 1) / chunk);
  auto partial = c.empty(std::uint64_t{parts} * sizeof(double));
  auto total = c.empty(sizeof(double));
  auto sum_f32 = run_kernels::sum_f32_to_f64();
  auto sum_f64 = run_kernels::sum_f64();
  timed(c, summary, "sum (two-pass)", opts.repeat, [&] {
    c.execute(sum_f32, cube_count{parts},
              bindings{}
                  .with_buffers({ha.binding(), partial.binding()})
                  .with_scalar(elem::u32, {n, chunk}));
    c.execute(sum_f64, cube_count{1},
              bindings{}
                  .with_buffers({partial.binding(), total.binding()})
                  .with_scalar(elem::u32, {parts, parts}));
  });
  double ref_sum = 0;
  for (float v : a) ref_sum += v;
  double const got_sum = read_values<double>(c, total).at(0);
  checks.push_back({"sum_f32 (Σ a)", n, std::fabs(got_sum - ref_sum), 1e-9 * n});

  auto max_kernel = run_kernels::max_abs_f32();
  auto partial_max = c.empty(std::uint64_t{parts} * sizeof(float));
  timed(c, summary, "max_abs_f32", opts.repeat, [&] {
    c.execute(max_kernel, cube_count{parts},
              bindings{}
                  .with_buffers({hb.binding(), partial_max.binding()})
                  .with_scalar(elem::u32, {n, chunk}));
  });
  float ref_max = 0;
  for (float v : b) ref_max = std::max(ref_max, std::fabs(v));
  float got_max = 0;
  for (float v : read_values<float>(c, partial_max)) got_max = max_keeping_nan(got_max, v);
  checks.push_back({"max_abs_f32 (max |b|)", n, std::fabs(double(got_max) - ref_max), 0});

  // Into existing buffers: a write from the host, then a copy on the device.
  std::vector<float> fresh(n);
  for (auto& v : fresh) v = dist(gen);
  c.write(out.binding(), as_bytes(fresh));
  auto copied = c.empty(std::uint64_t{n} * sizeof(float));
  timed(c, summary, "copy (device)", opts.repeat, [&] { c.copy(out.binding(), copied.binding()); });
  auto const back = read_values<float>(c, copied);
  check copy_check{"write + copy (bytes)", n, 0, 0};
  for (std::uint32_t i = 0; i < n; ++i) {
    copy_check.note(std::fabs(back[i] - fresh[i]));
  }
  checks.push_back(copy_check);

  // Captured once, replayed: the add again and a copy of its result, as one graph.
  auto replayed = c.empty(std::uint64_t{n} * sizeof(float));
  graph const g = c.capture([&] {
    c.execute(add, cube_count{cubes},
              bindings{}
                  .with_buffers({ha.binding(), hb.binding(), out.binding()})
                  .with_scalar(elem::u32, {n}));
    c.copy(out.binding(), replayed.binding());
  });
  c.fill(out.binding(), 0.0f);
  timed(c, summary, g.native() ? "graph replay (device graph)" : "graph replay (steps)",
        opts.repeat, [&] { c.replay(g); });
  auto const again = read_values<float>(c, replayed);
  check graph_check{"graph replay (a + b)", n, 0, 0};
  for (std::uint32_t i = 0; i < n; ++i) {
    graph_check.note(std::fabs(again[i] - (a[i] + b[i])));
  }
  checks.push_back(graph_check);
  c.sync();
  // Reported while the buffers are still alive, so it shows what the workload held.
  memory = fmt::format("{}\n\n{}", c.memory_report(), c.memory_usage().to_string());
  return checks;
}

void run_command(run_options const& opts) {
  CUBERT_EXPECTS(opts.size > 0, "--size must be positive");
  CUBERT_EXPECTS(opts.repeat > 0, "--repeat must be positive");
  client_options copts;
  copts.channel = cubert::parse_channel_kind(opts.channel);
  copts.threads = opts.threads;
  auto c = make_client(opts.device, copts);
  auto const& props = c.properties();
  // The CPU device's memory is what this process may use of the host; devices() would also query
  // every GPU.
  cli::check_fits(props, opts.size, cpu::make_properties(0).total_memory);
  fmt::print("device   {} ({}), {} compute units, channel {}\n", props.name, opts.device,
             props.hardware.num_compute_units, cubert::to_string(c.channel_kind()));
  fmt::print("workload {} elements, {} repetitions per kernel\n\n", opts.size, opts.repeat);

  profiling::profiling_summary summary;
  std::string memory;
  auto const checks = run_workload(c, opts, summary, memory);
  bool all_pass = true;
  fmt::print("| {:<24} | {:>10} | {:>11} | {:>11} | {:<6} |\n", "Check", "Elements", "Max error",
             "Tolerance", "Result");
  fmt::print("|{:-<26}|{:-<12}|{:-<13}|{:-<13}|{:-<8}|\n", "", "", "", "", "");
  for (auto const& ch : checks) {
    all_pass = all_pass && ch.pass();
    fmt::print("| {:<24} | {:>10} | {:>11.3e} | {:>11.3e} | {:<6} |\n", ch.name, ch.elements,
               ch.max_error, ch.tolerance, ch.pass() ? "PASS" : "FAIL");
  }
  fmt::print("\nMemory while the workload's buffers were live:\n{}\n", memory);
  fmt::print("\nProfiling summary ({} timing):\n{}", to_string(props.timing), summary.table());
  fmt::print("\n{}\n", all_pass ? "all checks passed" : "MISMATCH: some checks failed");
  if (!all_pass) cli::exit_code() = 1;
}

void setup(CLI::App& app) {
  auto opts = std::make_shared<run_options>();
  auto* cmd = app.add_subcommand(
      "run",
      "Run elementwise and reduction kernels on a device and check them against a reference");
  cmd->add_option("--device", opts->device, "Device id (see `cubert devices`)")
      ->capture_default_str();
  cmd->add_option("--size", opts->size, "Elements per buffer")
      ->check(cubert::cli::decimal())
      ->capture_default_str();
  cmd->add_option("--channel", opts->channel, "Channel: mutex, actor or inline")
      ->check(CLI::IsMember({"mutex", "actor", "single_thread"}))
      ->capture_default_str();
  cmd->add_option("--repeat", opts->repeat, "Profiled launches of each kernel, after one warm-up")
      ->check(cubert::cli::decimal())
      ->capture_default_str();
  cmd->add_option("--threads", opts->threads, "CPU threads (0 = all)")
      ->check(cubert::cli::decimal())
      ->capture_default_str();
  cmd->callback([opts] { run_command(*opts); });
}

cubert::cli::command_registrar const reg{"run", setup};

}  // namespace
