// SPDX-License-Identifier: Apache-2.0
// placeholder translation unit; replaced by the execution-core work.
namespace cubert {}
