// SPDX-License-Identifier: Apache-2.0
// The kernel library (`cubert::ops`, library `cubert_ops`): tuned elementwise operations,
// reductions and matrix multiplication on every device.
#pragma once

#include <cubert/ops/ceilings.hpp>
#include <cubert/ops/elementwise.hpp>
#include <cubert/ops/half.hpp>
#include <cubert/ops/matmul.hpp>
#include <cubert/ops/reduce.hpp>
#include <cubert/ops/tensor.hpp>
#include <cubert/ops/tuning.hpp>
#include <cubert/ops/workload.hpp>
