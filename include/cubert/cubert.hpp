// SPDX-License-Identifier: Apache-2.0
// Umbrella header: the whole public API of cubert.
#pragma once

#include <cubert/bindings.hpp>
#include <cubert/build_config.hpp>
#include <cubert/client.hpp>
#include <cubert/config.hpp>
#include <cubert/cpu.hpp>
#include <cubert/device.hpp>
#include <cubert/error.hpp>
#include <cubert/graph.hpp>
#include <cubert/handle.hpp>
#include <cubert/kernel.hpp>
#include <cubert/logging.hpp>
#include <cubert/memory/configuration.hpp>
#include <cubert/memory/memory_manager.hpp>
#include <cubert/memory/memory_usage.hpp>
#include <cubert/portable.hpp>
#include <cubert/profiling.hpp>
#include <cubert/tune/anchor.hpp>
#include <cubert/tune/local_tuner.hpp>
#include <cubert/tune/tunable_set.hpp>
#if CUBERT_HAS_CUDA
#include <cubert/cuda.hpp>
#endif
#if CUBERT_HAS_OPENCL
#include <cubert/opencl.hpp>
#endif
