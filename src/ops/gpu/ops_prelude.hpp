// SPDX-License-Identifier: Apache-2.0
// What the library's portable kernels share after cubert's prelude: 16-bit float conversions
// and short-vector loads and stores, written once for CUDA and for OpenCL C.
#pragma once

#include <cubert/bindings.hpp>

#include <string>
#include <string_view>

namespace cubert::ops::detail {

/// Defines, for both backends: `ops_f16_to_f32(ushort)`, `ops_f32_to_f16(float)` (round to
/// nearest even), `ops_bf16_to_f32(ushort)`, `ops_f32_to_bf16(float)` (round to nearest even,
/// NaN kept), and `OPS_LOAD2/4(T, p)`, `OPS_STORE2/4(T, p, v)`, `OPS_VEC2/4(T, …)` for the
/// vector types `float2/4` and `ushort2/4` (p must be aligned to the vector's size). CUDA needs
/// no header: the f16 conversions are one PTX instruction each.
inline constexpr char const ops_prelude[] = R"(
#if CUBERT_BACKEND_CUDA
CUBERT_FN float ops_f16_to_f32(ushort h) {
  float f;
  asm("{ .reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(f) : "h"(h));
  return f;
}
CUBERT_FN ushort ops_f32_to_f16(float f) {
  ushort h;
  asm("{ .reg .f16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(f));
  return h;
}
CUBERT_FN float ops_bits_to_f32(uint u) { return __uint_as_float(u); }
CUBERT_FN uint ops_f32_to_bits(float f) { return __float_as_uint(f); }
#define OPS_LOAD2(T, p) (*(const T##2*)(p))
#define OPS_LOAD4(T, p) (*(const T##4*)(p))
#define OPS_STORE2(T, p, v) (*(T##2*)(p) = (v))
#define OPS_STORE4(T, p, v) (*(T##4*)(p) = (v))
#define OPS_VEC2(T, a, b) make_##T##2(a, b)
#define OPS_VEC4(T, a, b, c, d) make_##T##4(a, b, c, d)
#else
CUBERT_FN float ops_f16_to_f32(ushort h) { return vload_half(0, (const half*)&h); }
CUBERT_FN ushort ops_f32_to_f16(float f) {
  ushort h;
  vstore_half_rte(f, 0, (half*)&h);
  return h;
}
CUBERT_FN float ops_bits_to_f32(uint u) { return as_float(u); }
CUBERT_FN uint ops_f32_to_bits(float f) { return as_uint(f); }
#define OPS_LOAD2(T, p) vload2(0, p)
#define OPS_LOAD4(T, p) vload4(0, p)
#define OPS_STORE2(T, p, v) vstore2(v, 0, p)
#define OPS_STORE4(T, p, v) vstore4(v, 0, p)
#define OPS_VEC2(T, a, b) ((T##2)(a, b))
#define OPS_VEC4(T, a, b, c, d) ((T##4)(a, b, c, d))
#endif
CUBERT_FN float ops_bf16_to_f32(ushort h) { return ops_bits_to_f32((uint)h << 16); }
CUBERT_FN ushort ops_f32_to_bf16(float f) {
  uint u = ops_f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
  return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
)";

/// How a kernel reads and writes one element of `type`: the storage type name ("float",
/// "ushort"), and the expressions that convert a storage value `x` to f32 and back.
struct dtype_code {
  std::string_view storage;
  std::string load;   ///< With `{}` for the stored value.
  std::string store;  ///< With `{}` for the f32 value.
};
[[nodiscard]] dtype_code code_for(elem type);

}  // namespace cubert::ops::detail
