// SPDX-License-Identifier: Apache-2.0
#include "cuda_tensor_map.hpp"

#include "cuda_library.hpp"

#include <cubert/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <type_traits>

namespace cubert::cuda::detail {
namespace {

constexpr std::uint64_t max_dim = std::uint64_t{1} << 32;
constexpr std::uint64_t max_byte_stride = std::uint64_t{1} << 40;

// cubert's enums are declared in the driver's order, so they convert by value.
static_assert(static_cast<int>(tensor_map_interleave::b32) == CU_TENSOR_MAP_INTERLEAVE_32B);
static_assert(static_cast<int>(tensor_map_swizzle::b128) == CU_TENSOR_MAP_SWIZZLE_128B);
static_assert(static_cast<int>(tensor_map_prefetch::b256) == CU_TENSOR_MAP_L2_PROMOTION_L2_256B);

[[noreturn]] void bad(std::string_view why) {
  throw invalid_argument(fmt::format("tensor map: {}", why));
}

// TMA copies bits, so a signed or boolean type travels as the unsigned type of its width.
CUtensorMapDataType data_type(elem type) {
  switch (type) {
    case elem::f16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case elem::bf16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case elem::f32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case elem::f64:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    case elem::i32:
      return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case elem::i64:
      return CU_TENSOR_MAP_DATA_TYPE_INT64;
    case elem::u32:
      return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    case elem::u64:
      return CU_TENSOR_MAP_DATA_TYPE_UINT64;
    case elem::i16:
    case elem::u16:
      return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    case elem::i8:
    case elem::u8:
    case elem::boolean:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  }
  bad("unknown element type");
}

bool is_float(elem type) {
  return type == elem::f16 || type == elem::bf16 || type == elem::f32 || type == elem::f64;
}

std::uint32_t swizzle_span(tensor_map_swizzle s) {
  switch (s) {
    case tensor_map_swizzle::none:
      return 0;
    case tensor_map_swizzle::b32:
      return 32;
    case tensor_map_swizzle::b64:
      return 64;
    case tensor_map_swizzle::b128:
      return 128;
  }
  return 0;
}

// The global layout: dimensions, strides, alignment and the extent inside the binding.
void layout(tensor_map_meta const& m, CUdeviceptr address, std::uint64_t size, tensor_map_args& a) {
  auto const rank = m.rank;
  if (rank < 1 || rank > 5) bad(fmt::format("rank {} is outside 1..5", rank));
  if (m.shape.size() != rank || m.strides.size() != rank) {
    bad(fmt::format("rank {} but {} shape and {} stride entries", rank, m.shape.size(),
                    m.strides.size()));
  }
  if (!m.elem_stride.empty() && m.elem_stride.size() != rank) {
    bad(fmt::format("rank {} but {} element strides", rank, m.elem_stride.size()));
  }
  auto const elem_bytes = elem_size(m.type);
  std::uint64_t const align = m.interleave == tensor_map_interleave::b32 ? 32 : 16;
  if (address % align != 0) {
    bad(fmt::format("the bound address must be {}-byte aligned (offset {} bytes past it)", align,
                    address % align));
  }
  if (m.strides[rank - 1] != 1) {
    bad(fmt::format("the innermost dimension must be contiguous (stride 1, not {})",
                    m.strides[rank - 1]));
  }
  // Offset of the last element the map can address. Each dimension is below 2^32 and each
  // stride below 2^40 bytes, so the extent can pass 2^64: sums and products are checked, or a
  // map reaching far past its binding would wrap around to a small size and be accepted.
  std::uint64_t last_elem = 0;
  bool overflow = false;
  for (std::uint32_t i = 0; i < rank; ++i) {
    auto const d = rank - 1 - i;  // The driver counts from the innermost dimension.
    if (m.shape[i] == 0 || m.shape[i] > max_dim) {
      bad(fmt::format("dimension {} has size {}; sizes are 1..2^32", i, m.shape[i]));
    }
    a.dims[d] = m.shape[i];
    auto const es = m.elem_stride.empty() ? 1U : m.elem_stride[i];
    if (es < 1 || es > 8)
      bad(fmt::format("element stride {} of dimension {} is outside 1..8", es, i));
    a.elem_strides[d] = es;
    std::uint64_t reach = 0;
    overflow = overflow || __builtin_mul_overflow(m.shape[i] - 1, m.strides[i], &reach) ||
               __builtin_add_overflow(last_elem, reach, &last_elem);
    if (d == 0) continue;
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(m.strides[i], elem_bytes, &bytes) || bytes % align != 0 ||
        bytes >= max_byte_stride) {
      bad(
          fmt::format("stride of dimension {} is {} elements of {} bytes; in bytes it must be a "
                      "multiple of {} below 2^40 (pad the rows)",
                      i, m.strides[i], elem_bytes, align));
    }
    a.byte_strides[d - 1] = bytes;
  }
  std::uint64_t extent = 0;
  overflow = overflow || __builtin_add_overflow(last_elem, 1, &extent) ||
             __builtin_mul_overflow(extent, elem_bytes, &extent);
  if (overflow) {
    bad(fmt::format("shape {} with strides {} reaches past 2^64 bytes, past the {} bytes bound",
                    m.shape, m.strides, size));
  }
  if (extent > size) {
    bad(fmt::format("shape {} with strides {} reaches {} bytes, past the {} bytes bound", m.shape,
                    m.strides, extent, size));
  }
  a.rank = rank;
  a.address = address;
}

// Rules on the shared-memory side: the inner box row against 16-byte units and the swizzle.
void check_inner_box(tensor_map_meta const& m, std::uint64_t inner_elems, char const* what) {
  auto const bytes = inner_elems * elem_size(m.type);
  if (m.interleave != tensor_map_interleave::none) {
    if (m.interleave == tensor_map_interleave::b32 && m.swizzle != tensor_map_swizzle::b32) {
      bad("32-byte interleave needs the 32-byte swizzle");
    }
    return;
  }
  if (bytes % 16 != 0) {
    bad(fmt::format("{} is {} bytes; it must be a multiple of 16", what, bytes));
  }
  if (auto span = swizzle_span(m.swizzle); span != 0 && bytes > span) {
    bad(fmt::format("{} is {} bytes, more than the {}-byte swizzle span", what, bytes, span));
  }
}

void tiled(tensor_map_meta const& m, tensor_map_tiled const& t, tensor_map_args& a) {
  a.format = tensor_map_args::kind::tiled;
  if (t.tile_size.size() != m.rank) {
    bad(fmt::format("rank {} but {} tile sizes", m.rank, t.tile_size.size()));
  }
  for (std::uint32_t i = 0; i < m.rank; ++i) {
    if (t.tile_size[i] < 1 || t.tile_size[i] > 256) {
      bad(fmt::format("tile size {} of dimension {} is outside 1..256", t.tile_size[i], i));
    }
    a.box[m.rank - 1 - i] = t.tile_size[i];
  }
  check_inner_box(m, t.tile_size[m.rank - 1], "the innermost tile row");
}

void check_pixels(std::uint32_t channels, std::uint32_t pixels, std::uint32_t max_pixels) {
  if (channels < 1 || channels > 256) bad(fmt::format("{} channels per pixel; 1..256", channels));
  if (pixels < 1 || pixels > max_pixels) {
    bad(fmt::format("{} pixels per column; 1..{}", pixels, max_pixels));
  }
}

void im2col(tensor_map_meta const& m, tensor_map_im2col const& f, tensor_map_args& a) {
  a.format = tensor_map_args::kind::im2col;
  if (m.rank < 3) bad(fmt::format("im2col needs rank 3..5 (N, spatial..., C), not {}", m.rank));
  auto const spatial = m.rank - 2;
  if (f.pixel_box_lower_corner.size() != spatial || f.pixel_box_upper_corner.size() != spatial) {
    bad(fmt::format("rank {} has {} spatial dimensions but the pixel box corners have {} and {}",
                    m.rank, spatial, f.pixel_box_lower_corner.size(),
                    f.pixel_box_upper_corner.size()));
  }
  // The driver's range for each offset narrows with the rank (cuTensorMapEncodeIm2col).
  int const reach = spatial == 1 ? 32768 : spatial == 2 ? 128 : 16;
  for (std::uint32_t i = 0; i < spatial; ++i) {
    for (int const corner : {f.pixel_box_lower_corner[i], f.pixel_box_upper_corner[i]}) {
      if (corner < -reach || corner > reach - 1) {
        bad(fmt::format("pixel box corner offset {} is outside [{}, {}], the range at rank {}",
                        corner, -reach, reach - 1, m.rank));
      }
    }
  }
  // Corners are outer-first (D, H, W) like the shape; the driver takes W first.
  for (std::uint32_t i = 0; i < spatial; ++i) {
    a.lower_corner[spatial - 1 - i] = f.pixel_box_lower_corner[i];
    a.upper_corner[spatial - 1 - i] = f.pixel_box_upper_corner[i];
  }
  check_pixels(f.channels_per_pixel, f.pixels_per_column, 1024);
  a.channels_per_pixel = f.channels_per_pixel;
  a.pixels_per_column = f.pixels_per_column;
  check_inner_box(m, f.channels_per_pixel, "a pixel's channels");
}

void im2col_wide(tensor_map_meta const& m, tensor_map_im2col_wide const& f, int arch,
                 tensor_map_args& a) {
  if (arch < 100) {
    throw unsupported(fmt::format(
        "tensor map: im2col_wide needs compute capability 10.0 or newer (this device: {}.{})",
        arch / 10, arch % 10));
  }
  a.format = tensor_map_args::kind::im2col_wide;
  if (m.rank < 3) bad(fmt::format("im2col_wide needs rank 3..5, not {}", m.rank));
  for (int const corner : {f.pixel_box_lower_corner_width, f.pixel_box_upper_corner_width}) {
    if (corner < -32768 || corner > 32767) {
      bad(fmt::format("pixel box width offset {} is outside [-32768, 32767]", corner));
    }
  }
  if (m.swizzle != tensor_map_swizzle::b64 && m.swizzle != tensor_map_swizzle::b128) {
    bad("im2col_wide needs the 64- or 128-byte swizzle (the driver supports no other)");
  }
  a.lower_corner[0] = f.pixel_box_lower_corner_width;
  a.upper_corner[0] = f.pixel_box_upper_corner_width;
  check_pixels(f.channels_per_pixel, f.pixels_per_column, 1024);
  a.channels_per_pixel = f.channels_per_pixel;
  a.pixels_per_column = f.pixels_per_column;
  check_inner_box(m, f.channels_per_pixel, "a pixel's channels");
}

}  // namespace

tensor_map_args make_tensor_map_args(tensor_map_meta const& meta, CUdeviceptr address,
                                     std::uint64_t size, int arch) {
  if (arch < 90) {
    throw unsupported(
        fmt::format("tensor maps need compute capability 9.0 or newer (this device: {}.{})",
                    arch / 10, arch % 10));
  }
  tensor_map_args a;
  a.type = data_type(meta.type);
  layout(meta, address, size, a);
  if (meta.interleave != tensor_map_interleave::none && meta.rank < 3) {
    bad("an interleaved layout needs rank 3 or more");
  }
  if (meta.oob_fill == tensor_map_oob_fill::nan && !is_float(meta.type)) {
    bad("NaN out-of-bounds fill needs a floating-point element type");
  }
  std::visit(
      [&](auto const& f) {
        using F = std::decay_t<decltype(f)>;
        if constexpr (std::is_same_v<F, tensor_map_tiled>) {
          tiled(meta, f, a);
        } else if constexpr (std::is_same_v<F, tensor_map_im2col>) {
          im2col(meta, f, a);
        } else {
          im2col_wide(meta, f, arch, a);
        }
      },
      meta.format);
  a.interleave = static_cast<CUtensorMapInterleave>(meta.interleave);
  a.swizzle = static_cast<CUtensorMapSwizzle>(meta.swizzle);
  a.l2_promotion = static_cast<CUtensorMapL2promotion>(meta.prefetch);
  a.oob_fill = meta.oob_fill == tensor_map_oob_fill::nan
                   ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                   : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
  return a;
}

CUtensorMap encode_tensor_map(tensor_map_args const& a) {
  auto const& api = driver();
  CUtensorMap map{};
  void* const address = reinterpret_cast<void*>(static_cast<std::uintptr_t>(a.address));
  CUresult r = CUDA_SUCCESS;
  char const* call = "cuTensorMapEncodeTiled";
  switch (a.format) {
    case tensor_map_args::kind::tiled:
      r = api.cuTensorMapEncodeTiled(&map, a.type, a.rank, address, a.dims.data(),
                                     a.byte_strides.data(), a.box.data(), a.elem_strides.data(),
                                     a.interleave, a.swizzle, a.l2_promotion, a.oob_fill);
      break;
    case tensor_map_args::kind::im2col:
      call = "cuTensorMapEncodeIm2col";
      r = api.cuTensorMapEncodeIm2col(
          &map, a.type, a.rank, address, a.dims.data(), a.byte_strides.data(),
          a.lower_corner.data(), a.upper_corner.data(), a.channels_per_pixel, a.pixels_per_column,
          a.elem_strides.data(), a.interleave, a.swizzle, a.l2_promotion, a.oob_fill);
      break;
    case tensor_map_args::kind::im2col_wide:
      call = "cuTensorMapEncodeIm2colWide";
      if (api.cuTensorMapEncodeIm2colWide == nullptr) {
        throw unsupported("tensor map: the CUDA driver lacks cuTensorMapEncodeIm2colWide");
      }
      r = api.cuTensorMapEncodeIm2colWide(
          &map, a.type, a.rank, address, a.dims.data(), a.byte_strides.data(), a.lower_corner[0],
          a.upper_corner[0], a.channels_per_pixel, a.pixels_per_column, a.elem_strides.data(),
          a.interleave, CU_TENSOR_MAP_IM2COL_WIDE_MODE_W, a.swizzle, a.l2_promotion, a.oob_fill);
      break;
  }
  // CUDA_ERROR_NOT_SUPPORTED refuses the request on this device or driver, not its
  // description, which may be valid elsewhere; anything else the driver refuses is forbidden by
  // its rules, so the caller's description is at fault.
  check(r, call, r == CUDA_ERROR_NOT_SUPPORTED ? errc::unsupported : errc::invalid_argument);
  return map;
}

}  // namespace cubert::cuda::detail
