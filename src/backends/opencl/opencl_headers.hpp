// SPDX-License-Identifier: Apache-2.0
// The OpenCL API headers, for types and declarations only: nothing of OpenCL is linked.
#pragma once

// OpenCL 1.2 is what every platform cubert meets serves (NVIDIA's reports 3.0 but not every
// optional 2.x feature); the headers then declare its calls without deprecation warnings.
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
