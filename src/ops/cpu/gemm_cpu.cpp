// SPDX-License-Identifier: Apache-2.0
// The CPU GEMM engine: ISA dispatch, the candidate configurations, packing and the block driver.
#include "gemm_cpu.hpp"

#include "gemm_kernels.hpp"

#include <cubert/error.hpp>
#include <cubert/ops/half.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <new>
#include <string>
#include <type_traits>

#if __has_include(<unistd.h>)
#include <unistd.h>  // sysconf: the L2 size
#endif

#if defined(__x86_64__) || defined(__i386__)
#define CUBERT_GEMM_X86 1
#include <cpuid.h>  // F16C, which clang's __builtin_cpu_supports does not name
#else
#define CUBERT_GEMM_X86 0
#endif

namespace cubert::ops::cpu_gemm {
namespace {

/// One micro-kernel the engine can dispatch to.
struct kernel_entry {
  isa target;
  std::uint32_t mr, nr;
  kernels::micro_kernel fn;
};

// Every micro-kernel, by instruction set. The AVX2 and AVX-512 files are only built on x86.
constexpr kernel_entry kKernels[] = {
    {isa::generic, 4, 8, &kernels::generic_4x8},   {isa::generic, 6, 8, &kernels::generic_6x8},
    {isa::generic, 2, 16, &kernels::generic_2x16},
#if CUBERT_GEMM_X86
    {isa::avx2, 6, 16, &kernels::avx2_6x16},       {isa::avx2, 4, 24, &kernels::avx2_4x24},
    {isa::avx2, 4, 16, &kernels::avx2_4x16},       {isa::avx2, 8, 8, &kernels::avx2_8x8},
    {isa::avx2, 2, 32, &kernels::avx2_2x32},       {isa::avx512, 14, 32, &kernels::avx512_14x32},
    {isa::avx512, 12, 32, &kernels::avx512_12x32}, {isa::avx512, 6, 32, &kernels::avx512_6x32},
    {isa::avx512, 4, 48, &kernels::avx512_4x48},   {isa::avx512, 8, 16, &kernels::avx512_8x16},
    {isa::avx512, 2, 64, &kernels::avx512_2x64},
#endif
};

// The largest mr × nr of any kernel: the size of the scratch tile that edge tiles go through.
constexpr std::uint32_t kMaxTile = 14 * 32;
static_assert(std::all_of(std::begin(kKernels), std::end(kKernels),
                          [](kernel_entry const& e) { return e.mr * e.nr <= kMaxTile; }));

/// The micro-kernel of `target` with shape mr × nr, or nullptr.
kernels::micro_kernel find_kernel(isa target, std::uint32_t mr, std::uint32_t nr) noexcept {
  for (kernel_entry const& e : kKernels) {
    if (e.target == target && e.mr == mr && e.nr == nr) return e.fn;
  }
  return nullptr;
}

/// What this CPU runs, probed once.
struct cpu_features {
  bool avx2 = false;
  bool avx512 = false;
  bool f16c = false;
};

cpu_features const& features() noexcept {
  static cpu_features const probed = [] {
    cpu_features f;
#if CUBERT_GEMM_X86
    __builtin_cpu_init();
    // libgcc reports AVX and AVX-512 only when the OS saves their registers (XCR0).
    f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512 = f.avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    f.f16c = f.avx2 && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#endif
    return f;
  }();
  return probed;
}

/// A 64-byte-aligned float buffer that only grows: reused by every call of one thread.
class aligned_buffer {
 public:
  aligned_buffer() = default;
  aligned_buffer(aligned_buffer const&) = delete;
  aligned_buffer& operator=(aligned_buffer const&) = delete;
  ~aligned_buffer() { release(); }

  /// At least `n` floats; the contents are unspecified.
  float* get(std::size_t n) {
    if (n > size_) {
      release();
      data_ = static_cast<float*>(::operator new(n * sizeof(float), kAlign));
      size_ = n;
    }
    return data_;
  }

 private:
  static constexpr std::align_val_t kAlign{64};
  void release() noexcept {
    if (data_ != nullptr) ::operator delete(data_, kAlign);
    data_ = nullptr;
    size_ = 0;
  }
  float* data_ = nullptr;
  std::size_t size_ = 0;
};

/// The scratch memory of one thread: packed A, packed B, and the f32 block of a 16-bit output.
struct scratch {
  aligned_buffer a, b, c;
};

scratch& thread_scratch() {
  thread_local scratch s;
  return s;
}

std::uint64_t round_up(std::uint64_t x, std::uint64_t to) noexcept {
  return (x + to - 1) / to * to;
}

// --- Packing ------------------------------------------------------------------------------------

/// Loads of each input dtype as f32, one element or a contiguous run at a time.
struct load_f32 {
  using type = float;
  static float load(float v) noexcept { return v; }
  static void run(float const* src, std::uint32_t n, float* dst) noexcept {
    std::uint32_t i = 0;
    // Fixed-size copies compile to vector moves; a variable-size memcpy would be a library call.
    for (; i + 8 <= n; i += 8) std::memcpy(dst + i, src + i, 8 * sizeof(float));
    for (; i < n; ++i) dst[i] = src[i];
  }
};
struct load_f16 {
  using type = std::uint16_t;
  static float load(std::uint16_t h) noexcept { return f16_to_f32(h); }
  static void run(std::uint16_t const* src, std::uint32_t n, float* dst) noexcept {
#if CUBERT_GEMM_X86
    if (features().f16c) {
      kernels::load_f16_f16c(src, n, dst);
      return;
    }
#endif
    for (std::uint32_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
  }
};
struct load_bf16 {
  using type = std::uint16_t;
  static float load(std::uint16_t h) noexcept { return bf16_to_f32(h); }
  static void run(std::uint16_t const* src, std::uint32_t n, float* dst) noexcept {
    for (std::uint32_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
  }
};

/// A region of an operand to pack into panels of `w` lanes: `count` lanes from `lane0` (lane
/// stride `ls`) by `kc` steps from `step0` (step stride `ks`). Panel q holds lanes
/// [q·w, q·w + w) as kc steps of w floats (dst[q·kc·w + p·w + l]); lanes past `count` are zero,
/// so that the micro-kernel always runs whole tiles. The lanes of A are its rows, those of B its
/// columns: A(i, p) and B(p, j) are then both read as lane · ls + step · ks.
struct pack_job {
  operand src;
  std::int64_t ls, ks;
  std::uint64_t lane0, count, step0, kc;
  std::uint32_t w;
};

/// Packs with adjacent lanes (row-major B, column-major A). Steps go in strips of 8: for each
/// panel, the strip's runs of w lanes are copied one after the other. Reads are then 8 sequential
/// streams and writes 8 · w contiguous floats per panel; walking all panels step by step would
/// instead scatter every run to a different page of the packed buffer.
template <typename Load>
void pack_adjacent_lanes(typename Load::type const* base, pack_job const& job,
                         float* dst) noexcept {
  constexpr std::uint64_t kStrip = 8;
  std::int64_t const ks = job.ks;
  std::uint64_t const w = job.w, kc = job.kc;
  for (std::uint64_t p0 = 0; p0 < kc; p0 += kStrip) {
    std::uint64_t const steps = std::min(kStrip, kc - p0);
    for (std::uint64_t l0 = 0; l0 < job.count; l0 += w) {
      auto const lanes = static_cast<std::uint32_t>(std::min<std::uint64_t>(w, job.count - l0));
      typename Load::type const* in = base + static_cast<std::int64_t>(p0) * ks + l0;
      float* out = dst + l0 * kc + p0 * w;  // panel l0 / w, step p0
      for (std::uint64_t p = 0; p < steps; ++p, in += ks, out += w) {
        Load::run(in, lanes, out);
        std::fill(out + lanes, out + w, 0.0f);
      }
    }
  }
}

/// Packs with strided lanes (row-major A, column-major B). Steps go in blocks of 16 (one cache
/// line of f32 when the steps are adjacent), all lanes of a panel per block: every line fetched
/// is used up at once. Each lane prefetches the same block of the next panel's lane, a whole
/// panel ahead: the lanes are rows of A, far apart, and the hardware prefetcher does not follow
/// them in time.
template <typename Load>
void pack_strided_lanes(typename Load::type const* base, pack_job const& job, float* dst) noexcept {
  constexpr std::uint64_t kBlock = 16;
  // Plain locals and walking pointers: the loop nest is deep enough for GCC to spill otherwise.
  std::int64_t const ls = job.ls, ks = job.ks;
  std::uint64_t const w = job.w, kc = job.kc;
  std::int64_t const ahead = static_cast<std::int64_t>(w) * ls;
  for (std::uint64_t l0 = 0; l0 < job.count; l0 += w) {
    std::uint64_t const lanes = std::min<std::uint64_t>(w, job.count - l0);
    std::uint64_t const next_lanes = job.count - l0 > w ? std::min(w, job.count - l0 - w) : 0;
    float* const panel = dst + l0 * kc;
    typename Load::type const* const first = base + static_cast<std::int64_t>(l0) * ls;
    for (std::uint64_t p0 = 0; p0 < kc; p0 += kBlock) {
      std::uint64_t const steps = std::min(kBlock, kc - p0);
      typename Load::type const* lane = first + static_cast<std::int64_t>(p0) * ks;
      float* out = panel + p0 * w;
      for (std::uint64_t l = 0; l < lanes; ++l, lane += ls, ++out) {
        if (l < next_lanes) __builtin_prefetch(lane + ahead);
        if (steps == kBlock && ks == 1) {
          // The common case (row-major A), unrolled with a fixed count: a variable inner loop
          // here leaves GCC too few registers, and it keeps the counter in memory.
#pragma GCC unroll 16
          for (std::uint64_t p = 0; p < kBlock; ++p) out[p * w] = Load::load(lane[p]);
        } else {
          typename Load::type const* in = lane;
          float* to = out;
          for (std::uint64_t p = 0; p < steps; ++p, in += ks, to += w) *to = Load::load(*in);
        }
      }
    }
    for (std::uint64_t p = 0; p < kc && lanes < w; ++p) {
      std::fill(panel + p * w + lanes, panel + (p + 1) * w, 0.0f);
    }
  }
}

template <typename Load>
void pack_as(pack_job const& job, float* dst) noexcept {
  auto const* base = static_cast<typename Load::type const*>(job.src.data) +
                     static_cast<std::int64_t>(job.lane0) * job.ls +
                     static_cast<std::int64_t>(job.step0) * job.ks;
  if (job.ls == 1) {
    pack_adjacent_lanes<Load>(base, job, dst);
  } else {
    pack_strided_lanes<Load>(base, job, dst);
  }
}

/// Packs `job` into `dst` (round_up(count, w) · kc floats), converting to f32.
void pack(pack_job const& job, float* dst) noexcept {
  switch (job.src.type) {
    case elem::f16:
      pack_as<load_f16>(job, dst);
      return;
    case elem::bf16:
      pack_as<load_bf16>(job, dst);
      return;
    default:
      pack_as<load_f32>(job, dst);
      return;
  }
}

// --- The block driver ---------------------------------------------------------------------------

/// A validated configuration with its micro-kernel.
struct plan {
  kernels::micro_kernel kernel;
  std::uint32_t mr, nr, mc, nc, kc;
};

/// The f32 destination of the block: C itself, or the scratch block of a 16-bit C.
struct f32_block {
  float* data;
  std::int64_t ld;
};

/// Adds (or, without `accumulate`, copies) the rows × cols corner of an mr × nr scratch tile
/// into C: edge tiles are computed whole into the scratch tile and only their valid part is kept.
void merge_tile(float const* tile, std::uint32_t nr, float* c, std::int64_t ldc, std::uint32_t rows,
                std::uint32_t cols, bool accumulate) noexcept {
  for (std::uint32_t i = 0; i < rows; ++i) {
    float* const out = c + i * ldc;
    float const* const in = tile + i * nr;
    for (std::uint32_t j = 0; j < cols; ++j) out[j] = accumulate ? out[j] + in[j] : in[j];
  }
}

/// C (m × n at `c`) = or += packed A (m rows, in mr-row panels) · packed B (n columns, in
/// nr-column panels), kc steps. Column panels outside, row panels inside: one B micro-panel
/// stays in L1 while the A panels stream from L2.
void macro_kernel(plan const& p, std::uint64_t kc, float const* ap, float const* bp, float* c,
                  std::int64_t ldc, std::uint64_t m, std::uint64_t n, bool accumulate) noexcept {
  alignas(64) float tile[kMaxTile];
  for (std::uint64_t j = 0; j < n; j += p.nr) {
    auto const cols = static_cast<std::uint32_t>(std::min<std::uint64_t>(p.nr, n - j));
    float const* const b_panel = bp + j * kc;
    for (std::uint64_t i = 0; i < m; i += p.mr) {
      auto const rows = static_cast<std::uint32_t>(std::min<std::uint64_t>(p.mr, m - i));
      float const* const a_panel = ap + i * kc;
      float* const c_tile = c + static_cast<std::int64_t>(i) * ldc + static_cast<std::int64_t>(j);
      // The kernel reads (or writes) C only after its k loop: start fetching the tile now.
      for (std::uint32_t r = 0; r < rows; ++r) {
        __builtin_prefetch(c_tile + r * ldc, 1);
        __builtin_prefetch(c_tile + r * ldc + cols - 1, 1);
      }
      if (rows == p.mr && cols == p.nr) {
        p.kernel(kc, a_panel, b_panel, c_tile, ldc, accumulate);
      } else {
        p.kernel(kc, a_panel, b_panel, tile, p.nr, false);
        merge_tile(tile, p.nr, c_tile, ldc, rows, cols, accumulate);
      }
    }
  }
}

/// The bytes of packed A one thread keeps in L2: 3/8 of this CPU's L2 (leaving room for the B
/// panels and C tiles passing through, or for a second hardware thread), within [64, 768] KiB.
std::uint64_t a_block_bytes() noexcept {
  static std::uint64_t const bytes = [] {
    long l2 = 0;
#if defined(_SC_LEVEL2_CACHE_SIZE)
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    std::uint64_t const known = l2 > 0 ? static_cast<std::uint64_t>(l2) : 512 * 1024;
    return std::clamp<std::uint64_t>(known / 8 * 3, 64 * 1024, 768 * 1024);
  }();
  return bytes;
}

/// Rows of A packed at a time: the A block (rows × kc floats) should stay in L2 while the B
/// panels stream past it, so it gets a fixed share of L2; the cube's mc only bounds it. A cube
/// taller than this packs B once for several A blocks, which saves repacking B per cube.
std::uint64_t a_block_rows(plan const& p, std::uint64_t kc) noexcept {
  std::uint64_t const fit = a_block_bytes() / (kc * sizeof(float)) / p.mr * p.mr;
  return std::min<std::uint64_t>(p.mc, std::max<std::uint64_t>(p.mr, fit));
}

/// The block [m0, m0 + m) × [n0, n0 + n) of A·B into `c` (f32), k >= 1. Loops: nc columns of B,
/// then kc steps of K (B packed once per step block), then L2-sized blocks of rows of A (packed
/// once per step block and row block).
void compute(plan const& p, std::uint64_t k, operand const& a, operand const& b, f32_block c,
             std::uint64_t m0, std::uint64_t m, std::uint64_t n0, std::uint64_t n, scratch& s) {
  std::uint64_t const nc = std::min<std::uint64_t>(p.nc, n);
  std::uint64_t const kc = std::min<std::uint64_t>(p.kc, k);
  std::uint64_t const mc = std::min<std::uint64_t>(a_block_rows(p, kc), m);
  float* const bp = s.b.get(round_up(nc, p.nr) * kc);
  float* const ap = s.a.get(round_up(mc, p.mr) * kc);
  for (std::uint64_t jc = 0; jc < n; jc += nc) {
    std::uint64_t const ncur = std::min(nc, n - jc);
    for (std::uint64_t pc = 0; pc < k; pc += kc) {
      std::uint64_t const kcur = std::min(kc, k - pc);
      pack({b, b.col_stride, b.row_stride, n0 + jc, ncur, pc, kcur, p.nr}, bp);
      for (std::uint64_t ic = 0; ic < m; ic += mc) {
        std::uint64_t const mcur = std::min(mc, m - ic);
        pack({a, a.row_stride, a.col_stride, m0 + ic, mcur, pc, kcur, p.mr}, ap);
        float* const c_block =
            c.data + static_cast<std::int64_t>(ic) * c.ld + static_cast<std::int64_t>(jc);
        macro_kernel(p, kcur, ap, bp, c_block, c.ld, mcur, ncur, pc > 0);
      }
    }
  }
}

/// Rounds the f32 block (m × n, row stride `ld`) into C of a 16-bit dtype.
void store_converted(float const* src, std::int64_t ld, output const& c, std::uint64_t m0,
                     std::uint64_t m, std::uint64_t n0, std::uint64_t n) noexcept {
  auto* const base = static_cast<std::uint16_t*>(c.data);
  for (std::uint64_t i = 0; i < m; ++i) {
    float const* const in = src + static_cast<std::int64_t>(i) * ld;
    std::uint16_t* const out =
        base + static_cast<std::int64_t>(m0 + i) * c.row_stride + static_cast<std::int64_t>(n0);
    if (c.type == elem::bf16) {
      for (std::uint64_t j = 0; j < n; ++j) out[j] = f32_to_bf16(in[j]);
      continue;
    }
#if CUBERT_GEMM_X86
    if (features().f16c) {
      kernels::store_f16_f16c(in, n, out);
      continue;
    }
#endif
    for (std::uint64_t j = 0; j < n; ++j) out[j] = f32_to_f16(in[j]);
  }
}

/// Throws unless the arguments of gemm_block are usable; returns the plan of `t`.
plan check(tiles const& t, std::uint64_t k, operand const& a, operand const& b, output const& c,
           std::uint64_t n1) {
  if (!valid(t)) throw invalid_argument("cpu gemm: not a valid tile configuration");
  if (!supported(t.target)) {
    throw unsupported("cpu gemm: this CPU does not run " + std::string(to_string(t.target)));
  }
  bool const floating = a.type == elem::f32 || a.type == elem::f16 || a.type == elem::bf16;
  if (!floating || b.type != a.type) {
    throw invalid_argument("cpu gemm: A and B must share one dtype of f32, f16 or bf16");
  }
  if (c.type != elem::f32 && c.type != a.type) {
    throw invalid_argument("cpu gemm: C must be f32 or the inputs' dtype");
  }
  if (a.row_stride < 1 || a.col_stride < 1 || b.row_stride < 1 || b.col_stride < 1) {
    throw invalid_argument("cpu gemm: operand strides must be positive");
  }
  if (c.row_stride < 0 || static_cast<std::uint64_t>(c.row_stride) < n1) {
    throw invalid_argument("cpu gemm: the row stride of C is below its columns");
  }
  if ((k > 0 && (a.data == nullptr || b.data == nullptr)) || c.data == nullptr) {
    throw invalid_argument("cpu gemm: null operand");
  }
  return {find_kernel(t.target, t.mr, t.nr), t.mr, t.nr, t.mc, t.nc, t.kc};
}

}  // namespace

bool supported(isa target) noexcept {
  switch (target) {
    case isa::generic:
      return true;
    case isa::avx2:
      return features().avx2;
    case isa::avx512:
      return features().avx512;
  }
  return false;
}

isa best_isa() noexcept {
  if (supported(isa::avx512)) return isa::avx512;
  if (supported(isa::avx2)) return isa::avx2;
  return isa::generic;
}

std::string_view to_string(isa target) noexcept {
  switch (target) {
    case isa::generic:
      return "generic";
    case isa::avx2:
      return "avx2";
    case isa::avx512:
      return "avx512";
  }
  return "unknown";
}

bool valid(tiles const& t) noexcept {
  return find_kernel(t.target, t.mr, t.nr) != nullptr && t.mc > 0 && t.nc > 0 && t.kc > 0 &&
         t.mc % t.mr == 0 && t.nc % t.nr == 0;
}

// The candidates. Cube sizes (mc × nc) range from a few large cubes, which pack each operand
// the fewest times, to many small ones, which keep many cores busy and balance better; the
// packed A block is sized to L2 whatever mc is (a_block_rows). Row counts just above a power of
// two over a few (516, 258, 132) split power-of-two M into even cubes. No cube covers a whole
// 1024 × 1024 product: a single cube would leave all but one thread idle. kc = 256 keeps a 6 × 16
// kernel's B micro-panel at half of a 32 KiB L1; 128 suits two hardware threads sharing one L1, 384
// fewer passes over C. The narrow shapes are for skinny products: 4 × 16 and 2 × 32 for M of a few
// rows, 8 × 8 for N of a few columns.
std::vector<tiles> candidates(isa target) {
  switch (target) {
    case isa::generic:
      return {{isa::generic, 6, 8, 516, 512, 256},  {isa::generic, 4, 8, 256, 512, 256},
              {isa::generic, 6, 8, 96, 256, 256},   {isa::generic, 4, 8, 64, 256, 128},
              {isa::generic, 6, 8, 258, 1024, 256}, {isa::generic, 2, 16, 64, 1024, 256}};
    case isa::avx2:
      return {{isa::avx2, 6, 16, 516, 1024, 256}, {isa::avx2, 6, 16, 516, 512, 256},
              {isa::avx2, 6, 16, 132, 1024, 256}, {isa::avx2, 6, 16, 258, 1024, 256},
              {isa::avx2, 6, 16, 258, 2048, 384}, {isa::avx2, 6, 16, 192, 512, 256},
              {isa::avx2, 6, 16, 96, 512, 256},   {isa::avx2, 6, 16, 96, 256, 256},
              {isa::avx2, 6, 16, 516, 1024, 384}, {isa::avx2, 6, 16, 258, 1024, 128},
              {isa::avx2, 4, 24, 256, 1032, 256}, {isa::avx2, 4, 24, 512, 528, 256},
              {isa::avx2, 4, 16, 256, 1024, 256}, {isa::avx2, 4, 16, 64, 512, 256},
              {isa::avx2, 8, 8, 128, 512, 256},   {isa::avx2, 2, 32, 64, 1024, 256}};
    case isa::avx512:
      return {{isa::avx512, 14, 32, 518, 1024, 256}, {isa::avx512, 14, 32, 266, 1024, 256},
              {isa::avx512, 14, 32, 140, 512, 256},  {isa::avx512, 12, 32, 516, 1024, 384},
              {isa::avx512, 6, 32, 516, 1024, 256},  {isa::avx512, 4, 48, 256, 1056, 256},
              {isa::avx512, 8, 16, 128, 512, 256},   {isa::avx512, 2, 64, 64, 1024, 256}};
  }
  return {};
}

void gemm_block(tiles const& t, std::uint64_t k, operand a, operand b, output c, std::uint64_t m0,
                std::uint64_t m1, std::uint64_t n0, std::uint64_t n1) {
  if (m1 < m0 || n1 < n0) throw invalid_argument("cpu gemm: inverted block");
  plan const p = check(t, k, a, b, c, n1);
  std::uint64_t const m = m1 - m0;
  std::uint64_t const n = n1 - n0;
  if (m == 0 || n == 0) return;
  std::size_t const c_size = elem_size(c.type);
  if (k == 0) {
    auto* const base = static_cast<std::byte*>(c.data);
    for (std::uint64_t i = 0; i < m; ++i) {
      std::int64_t const at =
          static_cast<std::int64_t>(m0 + i) * c.row_stride + static_cast<std::int64_t>(n0);
      std::memset(base + at * static_cast<std::int64_t>(c_size), 0,
                  n * c_size);  // +0 in every dtype
    }
    return;
  }
  scratch& s = thread_scratch();
  if (c.type == elem::f32) {
    float* const origin = static_cast<float*>(c.data) +
                          static_cast<std::int64_t>(m0) * c.row_stride +
                          static_cast<std::int64_t>(n0);
    compute(p, k, a, b, {origin, c.row_stride}, m0, m, n0, n, s);
    return;
  }
  auto const ld = static_cast<std::int64_t>(n);
  float* const block = s.c.get(m * n);
  compute(p, k, a, b, {block, ld}, m0, m, n0, n, s);
  store_converted(block, ld, c, m0, m, n0, n);
}

}  // namespace cubert::ops::cpu_gemm
