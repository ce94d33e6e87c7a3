// SPDX-License-Identifier: Apache-2.0
#include <cubert/error.hpp>
#include <cubert/kernel.hpp>
#include <cubert/portable.hpp>

#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>

namespace cubert {

struct kernel::definition {
  std::string name;
  std::string info;
  cubert::cube_dim dim{};
  cubert::cube_dim cluster{};
  bool cooperative = false;
  std::uint64_t shared_memory = 0;
  kernel_id id{};
  std::optional<cpu_kernel_fn> cpu;
  std::optional<cuda_source_payload> cuda_source;
  std::optional<ptx_payload> ptx;
  std::optional<cubin_payload> cubin;
  std::optional<opencl_source_payload> opencl_source;
  std::optional<portable_source_payload> portable_source;
  std::optional<native_call_fn> cuda_native;
};

namespace {

// Length-prefixed fields with a tag each, so ("ab","c") and ("a","bc") hash differently and a
// missing payload differs from an empty one.
class id_writer {
 public:
  void field(char tag, std::string_view text) {
    out_.push_back(tag);
    number(text.size());
    out_.append(text);
  }
  void number(std::uint64_t v) {
    char bytes[8];
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    out_.append(bytes, 8);
  }
  void strings(char tag, std::vector<std::string> const& list) {
    out_.push_back(tag);
    number(list.size());
    for (auto const& s : list) field('o', s);
  }
  [[nodiscard]] std::uint64_t hash() const { return XXH3_64bits(out_.data(), out_.size()); }

 private:
  std::string out_;
};

std::uint64_t compute_id(kernel const& k) {
  id_writer w;
  w.field('n', k.name());
  w.field('i', k.info());
  w.number(k.cube_dim().x);
  w.number(k.cube_dim().y);
  w.number(k.cube_dim().z);
  w.number(k.shared_memory());
  // Tagged only when set, so every kernel without a cluster keeps the id it had before.
  if (auto const c = k.cluster_dim(); c.units() > 1) {
    w.field('K', "");
    w.number(c.x);
    w.number(c.y);
    w.number(c.z);
  }
  if (k.cooperative()) w.field('G', "");
  // The CPU callable has no stable bytes: only its presence is hashed.
  if (k.cpu()) w.field('C', "native");
  if (k.cuda_native()) w.field('N', "native");
  if (auto const* p = k.cuda_source()) {
    w.field('U', p->source);
    w.field('e', p->entry_point);
    w.strings('O', p->options);
  }
  if (auto const* p = k.ptx()) {
    w.field('P', p->text);
    w.field('e', p->entry_point);
  }
  if (auto const* p = k.cubin()) {
    w.field('B', std::string_view(reinterpret_cast<char const*>(p->bytes.data()), p->bytes.size()));
    w.field('e', p->entry_point);
  }
  if (auto const* p = k.opencl_source()) {
    w.field('L', p->source);
    w.field('e', p->entry_point);
    w.strings('O', p->options);
  }
  if (auto const* p = k.portable_source()) {
    w.field('T', p->source);
    w.field('e', p->entry_point);
    w.strings('O', p->options);
  }
  return w.hash();
}

std::string const& empty_string() {
  static std::string const s;
  return s;
}

}  // namespace

std::string kernel_id::to_string() const {
  if (!mode_) return fmt::format("{:016x}", hash_);
  return fmt::format("{:016x}-{}", hash_, cubert::to_string(*mode_));
}

std::string const& kernel::name() const noexcept {
  return def_ ? def_->name : empty_string();
}
std::string const& kernel::info() const noexcept {
  return def_ ? def_->info : empty_string();
}
cube_dim kernel::cube_dim() const noexcept {
  return def_ ? def_->dim : cubert::cube_dim{};
}
cube_dim kernel::cluster_dim() const noexcept {
  return def_ ? def_->cluster : cubert::cube_dim{};
}
bool kernel::cooperative() const noexcept {
  return def_ && def_->cooperative;
}
std::uint64_t kernel::shared_memory() const noexcept {
  return def_ ? def_->shared_memory : 0;
}
kernel_id kernel::id() const noexcept {
  return def_ ? def_->id : kernel_id{};
}

cpu_kernel_fn const* kernel::cpu() const noexcept {
  return def_ && def_->cpu ? &*def_->cpu : nullptr;
}
cuda_source_payload const* kernel::cuda_source() const noexcept {
  return def_ && def_->cuda_source ? &*def_->cuda_source : nullptr;
}
ptx_payload const* kernel::ptx() const noexcept {
  return def_ && def_->ptx ? &*def_->ptx : nullptr;
}
cubin_payload const* kernel::cubin() const noexcept {
  return def_ && def_->cubin ? &*def_->cubin : nullptr;
}
portable_source_payload const* kernel::portable_source() const noexcept {
  return def_ && def_->portable_source ? &*def_->portable_source : nullptr;
}
native_call_fn const* kernel::cuda_native() const noexcept {
  return def_ && def_->cuda_native ? &*def_->cuda_native : nullptr;
}
opencl_source_payload const* kernel::opencl_source() const noexcept {
  return def_ && def_->opencl_source ? &*def_->opencl_source : nullptr;
}

kernel::builder::builder(std::string name) : def_(std::make_unique<definition>()) {
  CUBERT_EXPECTS(!name.empty(), "kernel::builder: a kernel needs a name");
  def_->name = std::move(name);
}
kernel::builder::~builder() = default;
kernel::builder::builder(builder&&) noexcept = default;
kernel::builder& kernel::builder::operator=(builder&&) noexcept = default;

#define CUBERT_BUILDER_LIVE() \
  CUBERT_EXPECTS(def_ != nullptr, "kernel::builder: already built; make a new builder")

kernel::builder& kernel::builder::cube_dim(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  CUBERT_BUILDER_LIVE();
  if (x == 0 || y == 0 || z == 0) {
    throw invalid_argument(
        fmt::format("kernel '{}': cube_dim ({}, {}, {}) has an empty axis", def_->name, x, y, z));
  }
  def_->dim = {x, y, z};
  return *this;
}
kernel::builder& kernel::builder::cluster_dim(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  CUBERT_BUILDER_LIVE();
  if (x == 0 || y == 0 || z == 0) {
    throw invalid_argument(fmt::format("kernel '{}': cluster_dim ({}, {}, {}) has an empty axis",
                                       def_->name, x, y, z));
  }
  def_->cluster = {x, y, z};
  return *this;
}
kernel::builder& kernel::builder::cooperative() {
  CUBERT_BUILDER_LIVE();
  def_->cooperative = true;
  return *this;
}
kernel::builder& kernel::builder::shared_memory(std::uint64_t bytes) {
  CUBERT_BUILDER_LIVE();
  def_->shared_memory = bytes;
  return *this;
}
kernel::builder& kernel::builder::info(std::string info) {
  CUBERT_BUILDER_LIVE();
  def_->info = std::move(info);
  return *this;
}
kernel::builder& kernel::builder::cpu(cpu_kernel_fn fn) {
  CUBERT_BUILDER_LIVE();
  CUBERT_EXPECTS(static_cast<bool>(fn), "kernel::builder: empty CPU callable");
  def_->cpu = std::move(fn);
  return *this;
}
kernel::builder& kernel::builder::cuda_source(std::string source, std::string entry_point,
                                              std::vector<std::string> options) {
  CUBERT_BUILDER_LIVE();
  def_->cuda_source =
      cuda_source_payload{std::move(source), std::move(entry_point), std::move(options)};
  return *this;
}
kernel::builder& kernel::builder::cuda_native(native_call_fn fn) {
  CUBERT_BUILDER_LIVE();
  CUBERT_EXPECTS(static_cast<bool>(fn), "kernel::builder: empty CUDA native call");
  def_->cuda_native = std::move(fn);
  return *this;
}
kernel::builder& kernel::builder::ptx(std::string text, std::string entry_point) {
  CUBERT_BUILDER_LIVE();
  def_->ptx = ptx_payload{std::move(text), std::move(entry_point)};
  return *this;
}
kernel::builder& kernel::builder::cubin(std::vector<std::byte> bytes, std::string entry_point) {
  CUBERT_BUILDER_LIVE();
  def_->cubin = cubin_payload{std::move(bytes), std::move(entry_point)};
  return *this;
}
kernel::builder& kernel::builder::opencl_source(std::string source, std::string entry_point,
                                                std::vector<std::string> options) {
  CUBERT_BUILDER_LIVE();
  def_->opencl_source =
      opencl_source_payload{std::move(source), std::move(entry_point), std::move(options)};
  return *this;
}

kernel::builder& kernel::builder::portable_source(std::string source, std::string entry_point,
                                                  std::vector<std::string> options) {
  CUBERT_BUILDER_LIVE();
  def_->portable_source =
      portable_source_payload{std::move(source), std::move(entry_point), std::move(options)};
  return *this;
}

kernel kernel::builder::build() {
  CUBERT_BUILDER_LIVE();
  if (auto const& p = def_->portable_source) {
    if (!def_->cuda_source && !def_->ptx && !def_->cubin) {
      def_->cuda_source =
          cuda_source_payload{portable::cuda_prelude + p->source, p->entry_point, p->options};
    }
    if (!def_->opencl_source) {
      def_->opencl_source =
          opencl_source_payload{portable::opencl_prelude + p->source, p->entry_point, p->options};
    }
  }
  if (!def_->cpu && !def_->cuda_source && !def_->ptx && !def_->cubin && !def_->opencl_source &&
      !def_->cuda_native) {
    throw invalid_argument(fmt::format("kernel '{}' has no payload for any backend", def_->name));
  }
  std::shared_ptr<definition> def = std::move(def_);
  kernel out(def);
  def->id = kernel_id(compute_id(out));
  return out;
}

#undef CUBERT_BUILDER_LIVE

}  // namespace cubert
