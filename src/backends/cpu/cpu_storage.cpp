// SPDX-License-Identifier: Apache-2.0
// placeholder translation unit; replaced by the CPU backend work.
namespace cubert::cpu {}
