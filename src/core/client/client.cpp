// SPDX-License-Identifier: Apache-2.0
#include "base/spin_wait.hpp"
#include "channel/channel.hpp"
#include "client/graph_state.hpp"

#include <cubert/client.hpp>
#include <cubert/config.hpp>
#include <cubert/error.hpp>
#include <cubert/logging.hpp>
#include <cubert/profiling_summary.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace cubert {
struct client::state {
  explicit state(std::shared_ptr<backend::channel> c)
      : channel(std::move(c)), spin(config::get().channel.spin_us) {}

  // Profiling ownership lives in the channel, beside the lock that orders its calls
  // (channel/profile_gate.hpp): checking it there costs a call nothing it does not already pay.
  std::shared_ptr<backend::channel> channel;
  std::chrono::microseconds spin;  // Before a wait for a future sleeps.
  profiling::profiling_summary summary;
};

namespace {

// The devices (channels) the calling thread is inside a memory_persistent_allocation of, one
// entry per open scope.
thread_local std::vector<backend::channel const*> persistent_channels;

bool persistent_on(backend::channel const& c) noexcept {
  return !persistent_channels.empty() &&
         std::find(persistent_channels.begin(), persistent_channels.end(), &c) !=
             persistent_channels.end();
}

}  // namespace

// The channel, with this client's stream bound on the calling thread until the end of the
// full expression that calls it (an unbound client leaves the thread's own stream), and the
// call marked persistent inside the thread's memory_persistent_allocation of this device.
class client::channel_call {
 public:
  channel_call(backend::channel& c, std::uint32_t stream) noexcept
      : channel_(c), bound_(stream), persistent_(persistent_on(c)) {}
  backend::channel* operator->() const noexcept { return &channel_; }

 private:
  backend::channel& channel_;
  backend::stream_binding_scope bound_;
  backend::persistent_call_scope persistent_;
};

client::persistent_scope::persistent_scope(client const& c) : state_(c.state_) {
  persistent_channels.push_back(state_->channel.get());
}

client::persistent_scope::~persistent_scope() {
  // Scopes close in the reverse order they opened on a thread: the last entry is this one's.
  persistent_channels.pop_back();
}

client::channel_call client::channel() const {
  return {*state_->channel, stream_};
}

client::client(std::shared_ptr<backend::channel> channel) {
  CUBERT_EXPECTS(channel != nullptr, "client: null channel");
  state_ = std::make_shared<state>(std::move(channel));
}

namespace {

void refuse_inside_kernel() {
  if (backend::inside_kernel_body()) [[unlikely]] {
    throw invalid_argument(
        "a kernel called a cubert client while running; kernels cannot use the client (through "
        "the mutex or actor channel the call would wait for the launch that made it)");
  }
}

thread_local detail::recording* open_recordings = nullptr;

// Calls that wait or move host data would act before the recorded work ran.
void refuse_while_capturing(backend::channel const* channel, std::string_view call) {
  if (open_recordings != nullptr && detail::recording_of(channel) != nullptr) [[unlikely]] {
    throw invalid_argument(fmt::format(
        "{} inside a capture: it would act before the recorded work has run; call it before or "
        "after `capture` (inside, only launches, copies, fills, replays and allocations)",
        call));
  }
}

}  // namespace

namespace detail {

recording* recording_of(backend::channel const* channel) noexcept {
  for (auto* r = open_recordings; r != nullptr; r = r->outer) {
    if (r->channel == channel) return r;
  }
  return nullptr;
}

}  // namespace detail

client::capture_scope::capture_scope(client const& c) : state_(c.state_) {
  refuse_inside_kernel();
  auto const* channel = state_->channel.get();
  CUBERT_EXPECTS(detail::recording_of(channel) == nullptr,
                 "capture: this thread is already capturing for this device; captures of one "
                 "device do not nest (replay a graph inside a capture to include it)");
  auto r = std::make_unique<detail::recording>();
  r->channel = channel;
  r->outer = open_recordings;
  open_recordings = r.get();
  recording_ = r.release();
}

client::capture_scope::~capture_scope() {
  auto* r = static_cast<detail::recording*>(recording_);
  if (r == nullptr) return;
  open_recordings = r->outer;
  delete r;  // NOLINT(cppcoreguidelines-owning-memory): owned since the constructor.
}

graph client::capture_scope::finish() {
  std::unique_ptr<detail::recording> r(static_cast<detail::recording*>(recording_));
  recording_ = nullptr;
  open_recordings = r->outer;
  auto steps = std::make_shared<std::vector<graph_step> const>(std::move(r->steps));
  auto const id = state_->channel->instantiate_graph(steps);
  return graph(std::make_shared<graph::state const>(state_->channel, std::move(steps), id));
}

bool client::capturing() const noexcept {
  return detail::recording_of(state_->channel.get()) != nullptr;
}

void client::replay(graph const& g) const {
  refuse_inside_kernel();
  CUBERT_EXPECTS(g.state_ != nullptr,
                 "replay: a default-constructed graph (make one with capture)");
  CUBERT_EXPECTS(g.state_->channel == state_->channel,
                 "replay: the graph was captured on another device (or another channel of it)");
  if (auto* r = detail::recording_of(state_->channel.get())) [[unlikely]] {
    r->steps.insert(r->steps.end(), g.state_->steps->begin(), g.state_->steps->end());
    return;
  }
  auto const& st = *g.state_;
  if (log::enabled(log::category::profiling, log_level::minimal)) [[unlikely]] {
    auto const label = fmt::format("graph replay ({} steps)", st.steps->size());
    if (log::enabled(log::category::profiling, log_level::basic)) {
      submit_measured(label, [&] { channel()->launch_graph(st.id, st.steps); });
      return;
    }
    log::write(log::category::profiling, "Executing {}", label);
  }
  channel()->launch_graph(st.id, st.steps);
}

void client::submit_measured(std::string const& label, std::function<void()> const& submit) const {
  bool submitted = false;
  try {
    auto d = profile(
        [&] {
          submitted = true;
          submit();
        },
        label);
    state_->summary.record(label, std::move(d));
  } catch (profile_error const& e) {
    // The work failed while running: like any launch, it reports that at the next
    // sync/read/flush. The implicit measurement is only logged, not thrown a second time.
    // A window that did not open is only logged too, and the work goes unmeasured (it was
    // lost: the error came before it was submitted).
    log::write(log::category::profiling, "{}: not measured: {}", label, e.what());
    if (!submitted) submit();
  }
}

client::profile_scope::profile_scope(client const& c, std::string_view /*name*/)
    : state_(c.state_), stream_(c.stream_) {
  refuse_inside_kernel();
  refuse_while_capturing(state_->channel.get(), "profile");
  backend::stream_binding_scope const bound(stream_);
  token_ = state_->channel->start_profile();
}

profile_duration client::profile_scope::finish() {
  finished_ = true;
  backend::stream_binding_scope const bound(stream_);
  return state_->channel->end_profile(token_);
}

client::profile_scope::~profile_scope() {
  if (finished_) return;
  finished_ = true;
  try {
    backend::stream_binding_scope const bound(stream_);
    (void)state_->channel->end_profile(token_);
  } catch (...) {  // fn already threw; its exception is the one the caller needs.
  }
}

handle client::create(std::span<std::byte const> data) const {
  refuse_inside_kernel();
  refuse_while_capturing(state_->channel.get(), "create");
  return channel()->create(data);
}

cubert::tensor_allocation client::create_tensor(std::span<std::byte const> data,
                                                std::vector<std::uint64_t> shape,
                                                std::uint64_t elem_size) const {
  auto out = create_tensors({data}, {cubert::tensor_descriptor{std::move(shape), elem_size}});
  return std::move(out.front());
}

std::vector<cubert::tensor_allocation> client::create_tensors(
    std::vector<std::span<std::byte const>> const& data,
    std::vector<cubert::tensor_descriptor> const& descriptors) const {
  refuse_inside_kernel();
  refuse_while_capturing(state_->channel.get(), "create_tensors");
  return channel()->create_tensors(data, descriptors);
}

handle client::empty(std::uint64_t size) const {
  refuse_inside_kernel();
  return channel()->empty(size);
}

cubert::tensor_allocation client::empty_tensor(std::vector<std::uint64_t> shape,
                                               std::uint64_t elem_size) const {
  auto out = empty_tensors({cubert::tensor_descriptor{std::move(shape), elem_size}});
  return std::move(out.front());
}

std::vector<cubert::tensor_allocation> client::empty_tensors(
    std::vector<cubert::tensor_descriptor> const& descriptors) const {
  refuse_inside_kernel();
  return channel()->empty_tensors(descriptors);
}

std::future<std::vector<bytes>> client::read_async(std::vector<binding> bindings) const {
  refuse_inside_kernel();
  refuse_while_capturing(state_->channel.get(), "read");
  return channel()->read(std::move(bindings));
}

std::vector<bytes> client::read(std::vector<binding> bindings) const {
  return backend::await_future(read_async(std::move(bindings)), state_->spin);
}

bytes client::read_one(binding b) const {
  std::vector<binding> one;
  one.push_back(std::move(b));
  return std::move(read(std::move(one)).front());
}

std::future<void> client::read_into_async(binding const& b, std::span<std::byte> dst) const {
  refuse_inside_kernel();
  refuse_while_capturing(state_->channel.get(), "read_into");
  // Checked here so every channel reports it the same way, at once.
  CUBERT_EXPECTS(dst.size() == b.size(),
                 fmt::format("read_into: the destination holds {} bytes but the binding {}",
                             dst.size(), b.size()));
  return channel()->read_into(b, dst);
}

void client::read_into(binding const& b, std::span<std::byte> dst) const {
  backend::await_future(read_into_async(b, dst), state_->spin);
}

void client::write(binding const& dst, std::span<std::byte const> data) const {
  refuse_inside_kernel();
  refuse_while_capturing(state_->channel.get(), "write");
  backend::check_write(dst.size(), data.size());  // Every channel refuses it at once.
  channel()->write(dst, data);
}

void client::write_tensor(binding_with_meta const& dst, std::span<std::byte const> data) const {
  refuse_inside_kernel();
  refuse_while_capturing(state_->channel.get(), "write_tensor");
  backend::check_writable_layout(dst, data.size());  // Every channel refuses it at once.
  channel()->write_tensor(dst, data);
}

void client::fill(binding const& dst, std::span<std::byte const> pattern) const {
  refuse_inside_kernel();
  auto const width = pattern.size();
  backend::check_fill_pattern(dst.size(), width);
  if (auto* r = detail::recording_of(state_->channel.get())) [[unlikely]] {
    graph_step step;
    step.what = graph_step::kind::fill;
    step.dst = dst;
    std::copy(pattern.begin(), pattern.end(), step.pattern.begin());
    step.width = static_cast<std::uint8_t>(width);
    r->steps.push_back(std::move(step));
    return;
  }
  channel()->fill(dst, pattern);
}

void client::copy(binding const& src, binding const& dst) const {
  refuse_inside_kernel();
  backend::check_copy_sizes(src.size(), dst.size());
  if (auto* r = detail::recording_of(state_->channel.get())) [[unlikely]] {
    graph_step step;
    step.what = graph_step::kind::copy;
    step.src = src;
    step.dst = dst;
    r->steps.push_back(std::move(step));
    return;
  }
  channel()->copy(src, dst);
}

handle client::import_memory(std::uint64_t address, std::uint64_t size,
                             std::shared_ptr<void> owner) const {
  refuse_inside_kernel();
  return channel()->import_memory(address, size, std::move(owner));
}

host_buffer client::alloc_host(std::uint64_t size) const {
  refuse_inside_kernel();
  return channel()->alloc_host(size);
}

std::vector<bytes> client::read_tensor(std::vector<binding_with_meta> tensors) const {
  return backend::await_future(read_tensor_async(std::move(tensors)), state_->spin);
}

std::future<std::vector<bytes>> client::read_tensor_async(
    std::vector<binding_with_meta> tensors) const {
  refuse_inside_kernel();
  refuse_while_capturing(state_->channel.get(), "read_tensor");
  return channel()->read_tensor(std::move(tensors));
}

bytes client::read_one_tensor(binding_with_meta tensor) const {
  std::vector<binding_with_meta> one;
  one.push_back(std::move(tensor));
  return std::move(read_tensor(std::move(one)).front());
}

void client::execute(kernel const& k, cube_count const& count, bindings args) const {
  execute_inner(k, count, std::move(args), execution_mode::checked);
}

void client::execute_unchecked(kernel const& k, cube_count const& count, bindings args) const {
  execute_inner(k, count, std::move(args), execution_mode::unchecked);
}

void client::build(kernel const& k, bool unchecked) const {
  if (!k.valid()) throw invalid_argument("client::build: the kernel is empty");
  state_->channel->build_ahead(k, unchecked ? execution_mode::unchecked : execution_mode::checked);
}

void client::execute_inner(kernel const& k, cube_count const& count, bindings args,
                           execution_mode mode) const {
  if (open_recordings != nullptr) [[unlikely]] {
    if (auto* r = detail::recording_of(state_->channel.get())) {
      refuse_inside_kernel();
      graph_step step;
      step.what = graph_step::kind::launch;
      step.k = k;
      step.count = count;
      step.args = std::move(args);
      step.mode = mode;
      r->steps.push_back(std::move(step));
      return;
    }
  }
  // Profiling level basic or more times every launch, which makes each one synchronising.
  if (log::enabled(log::category::profiling, log_level::basic)) [[unlikely]] {
    std::string label = log::enabled(log::category::profiling, log_level::full)
                            ? fmt::format("{}: {} CubeCount {}", k.name(),
                                          k.id().with_mode(mode).to_string(), count.to_string())
                            : k.name();
    submit_measured(label, [&] { channel()->execute(k, count, std::move(args), mode); });
    return;
  }
  refuse_inside_kernel();
  if (log::enabled(log::category::profiling, log_level::minimal)) [[unlikely]] {
    log::write(log::category::profiling, "Executing {}", k.name());
  }
  channel()->execute(k, count, std::move(args), mode);
}

void client::flush() const {
  refuse_inside_kernel();
  refuse_while_capturing(state_->channel.get(), "flush");
  channel()->flush();
}

void client::sync() const {
  auto pending = [&] {
    refuse_inside_kernel();
    refuse_while_capturing(state_->channel.get(), "sync");
    return channel()->sync();
  }();
  backend::await_future(std::move(pending), state_->spin);
  if (!state_->summary.empty()) {
    auto const table = state_->summary.take_table();
    log::write(log::category::profiling, std::string_view(table));
  }
}

cubert::binding_resource client::get_resource(binding const& b) const {
  refuse_inside_kernel();
  return channel()->get_resource(b);
}

memory::memory_usage client::memory_usage() const {
  refuse_inside_kernel();
  return channel()->memory_usage();
}

std::string client::memory_report() const {
  refuse_inside_kernel();
  return channel()->memory_report();
}

void client::memory_cleanup() const {
  refuse_inside_kernel();
  channel()->memory_cleanup();
}

device_properties const& client::properties() const noexcept {
  return state_->channel->properties();
}

cubert::channel_kind client::channel_kind() const noexcept {
  return state_->channel->kind();
}

std::uint32_t client::stream_count() const noexcept {
  return state_->channel->stream_count();
}

std::uint32_t client::stream() const noexcept {
  backend::stream_binding_scope const bound(stream_);
  return backend::calling_stream().index(stream_count());
}

client client::on_stream(std::uint32_t index) const {
  if (index >= stream_count()) {
    throw invalid_argument(
        fmt::format("on_stream: stream {} does not exist: the device spreads work over {} stream{} "
                    "([streaming] max_streams)",
                    index, stream_count(), stream_count() == 1 ? "" : "s"));
  }
  client bound = *this;
  bound.stream_ = index;
  return bound;
}

std::uint64_t client::native_stream() const {
  refuse_inside_kernel();
  return channel()->native_stream();
}

void client::order_native_stream(std::uint64_t stream) const {
  auto pending = [&] {
    refuse_inside_kernel();
    refuse_while_capturing(state_->channel.get(), "order_native_stream");
    return channel()->order_native_stream(stream);
  }();
  backend::await_future(std::move(pending), state_->spin);
}

void client::sync_device() const {
  auto pending = [&] {
    refuse_inside_kernel();
    refuse_while_capturing(state_->channel.get(), "sync_device");
    return channel()->sync_device();
  }();
  backend::await_future(std::move(pending), state_->spin);
}

}  // namespace cubert
