// SPDX-License-Identifier: Apache-2.0
// How the library's portable kernels read and write each dtype.
#include "ops_prelude.hpp"

namespace cubert::ops::detail {

dtype_code code_for(elem type) {
  switch (type) {
    case elem::f16:
      return {"ushort", "ops_f16_to_f32({})", "ops_f32_to_f16({})"};
    case elem::bf16:
      return {"ushort", "ops_bf16_to_f32({})", "ops_f32_to_bf16({})"};
    default:
      return {"float", "{}", "{}"};
  }
}

}  // namespace cubert::ops::detail
