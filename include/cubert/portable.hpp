// SPDX-License-Identifier: Apache-2.0
// The portable kernel dialect: one C source for the CUDA and the OpenCL backends.
//
// A kernel given with `kernel::builder::portable_source(source, entry)` is compiled as CUDA C++
// (NVRTC) on cuda:N and as OpenCL C on opencl:N: `build()` turns it into a CUDA source payload
// (`cuda_prelude` + source) unless the kernel has a CUDA payload of its own (source, PTX or
// cubin), and into an OpenCL source payload (`opencl_prelude` + source) unless it has one of its
// own. A `#line 1` after each prelude keeps the compilers' line numbers those of `source` (the
// OpenCL backend renumbers the logs of compilers that ignore the directive). The
// CPU backend runs the kernel's native callable, as always.
//
// Write the common subset of CUDA C++ and OpenCL C: C expressions and statements, the types
// `uchar ushort uint ulong` (the preludes define them for CUDA), `float`, `double` (fp64 is
// enabled where the OpenCL device has it), and the type-generic math functions both have
// (`sqrt`, `fabs`, `fmin`, `fmax`, `exp`, `log`, `pow`…, not CUDA's `f`-suffixed ones). What
// differs goes through these macros:
//
//   CUBERT_KERNEL name(params)        a kernel: `extern "C" __global__ void` / `__kernel void`
//   CUBERT_FN                         a helper function: `static __device__ inline` / `static
//   inline` CUBERT_GLOBAL                     a buffer parameter's pointee: (nothing) / `__global`
//   CUBERT_RESTRICT                   `__restrict__` / `restrict`
//   CUBERT_SHARED                     memory of the cube, declared in the kernel's body:
//                                     `__shared__` / `__local`
//   CUBERT_DYNAMIC_SHARED_PARAM(T, n) after the last parameter (no comma before it): the
//                                     kernel's dynamic shared memory, as `T n[]`: (nothing) /
//                                     `, __local T* n`
//   CUBERT_DYNAMIC_SHARED(T, n);      first in the body, with the above: `extern __shared__ T n[]`
//                                     / (nothing)
//   CUBERT_UNIT_POS_X/_Y/_Z           the unit in its cube: threadIdx / get_local_id
//   CUBERT_CUBE_POS_X/_Y/_Z           the cube in the grid: blockIdx / get_group_id
//   CUBERT_CUBE_DIM_X/_Y/_Z           units per cube: blockDim / get_local_size
//   CUBERT_CUBE_COUNT_X/_Y/_Z         cubes in the grid: gridDim / get_num_groups
//   CUBERT_ABSOLUTE_POS_X/_Y/_Z       the unit in the grid: cube pos × cube dim + unit pos /
//                                     get_global_id
//   CUBERT_SYNC_CUBE()                a barrier of the cube, shared and global memory:
//                                     `__syncthreads()` / `barrier(...)`
//   CUBERT_ATOMIC_ADD(p, v)           atomic add on an int or uint in global or shared memory,
//                                     returning the old value: `atomicAdd` / `atomic_add`
//   CUBERT_BACKEND_CUDA, CUBERT_BACKEND_OPENCL   1 where compiled for that backend, for the rest
//
// Every position macro is a `uint`. Parameters follow the backends' one convention (buffers,
// scalars in `elem` order, the metadata struct, then the dynamic shared memory), and the
// checked/unchecked mode is `CUBERT_CHECKED` (0 or 1) on both.
#pragma once

namespace cubert::portable {

/// Put before a portable source compiled for CUDA (NVRTC).
inline constexpr char const cuda_prelude[] = R"(#define CUBERT_BACKEND_CUDA 1
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long long ulong;
#define CUBERT_KERNEL extern "C" __global__ void
#define CUBERT_FN static __device__ inline
#define CUBERT_GLOBAL
#define CUBERT_RESTRICT __restrict__
#define CUBERT_SHARED __shared__
#define CUBERT_DYNAMIC_SHARED_PARAM(type, name)
#define CUBERT_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define CUBERT_UNIT_POS_X ((uint)threadIdx.x)
#define CUBERT_UNIT_POS_Y ((uint)threadIdx.y)
#define CUBERT_UNIT_POS_Z ((uint)threadIdx.z)
#define CUBERT_CUBE_POS_X ((uint)blockIdx.x)
#define CUBERT_CUBE_POS_Y ((uint)blockIdx.y)
#define CUBERT_CUBE_POS_Z ((uint)blockIdx.z)
#define CUBERT_CUBE_DIM_X ((uint)blockDim.x)
#define CUBERT_CUBE_DIM_Y ((uint)blockDim.y)
#define CUBERT_CUBE_DIM_Z ((uint)blockDim.z)
#define CUBERT_CUBE_COUNT_X ((uint)gridDim.x)
#define CUBERT_CUBE_COUNT_Y ((uint)gridDim.y)
#define CUBERT_CUBE_COUNT_Z ((uint)gridDim.z)
#define CUBERT_ABSOLUTE_POS_X ((uint)(blockIdx.x * blockDim.x + threadIdx.x))
#define CUBERT_ABSOLUTE_POS_Y ((uint)(blockIdx.y * blockDim.y + threadIdx.y))
#define CUBERT_ABSOLUTE_POS_Z ((uint)(blockIdx.z * blockDim.z + threadIdx.z))
#define CUBERT_SYNC_CUBE() __syncthreads()
#define CUBERT_ATOMIC_ADD(p, v) atomicAdd((p), (v))
#line 1
)";

/// Put before a portable source compiled for OpenCL (OpenCL C 1.2).
inline constexpr char const opencl_prelude[] = R"(#define CUBERT_BACKEND_OPENCL 1
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#define CUBERT_KERNEL __kernel void
#define CUBERT_FN static inline
#define CUBERT_GLOBAL __global
#define CUBERT_RESTRICT restrict
#define CUBERT_SHARED __local
#define CUBERT_DYNAMIC_SHARED_PARAM(type, name) , __local type* name
#define CUBERT_DYNAMIC_SHARED(type, name)
#define CUBERT_UNIT_POS_X ((uint)get_local_id(0))
#define CUBERT_UNIT_POS_Y ((uint)get_local_id(1))
#define CUBERT_UNIT_POS_Z ((uint)get_local_id(2))
#define CUBERT_CUBE_POS_X ((uint)get_group_id(0))
#define CUBERT_CUBE_POS_Y ((uint)get_group_id(1))
#define CUBERT_CUBE_POS_Z ((uint)get_group_id(2))
#define CUBERT_CUBE_DIM_X ((uint)get_local_size(0))
#define CUBERT_CUBE_DIM_Y ((uint)get_local_size(1))
#define CUBERT_CUBE_DIM_Z ((uint)get_local_size(2))
#define CUBERT_CUBE_COUNT_X ((uint)get_num_groups(0))
#define CUBERT_CUBE_COUNT_Y ((uint)get_num_groups(1))
#define CUBERT_CUBE_COUNT_Z ((uint)get_num_groups(2))
#define CUBERT_ABSOLUTE_POS_X ((uint)get_global_id(0))
#define CUBERT_ABSOLUTE_POS_Y ((uint)get_global_id(1))
#define CUBERT_ABSOLUTE_POS_Z ((uint)get_global_id(2))
#define CUBERT_SYNC_CUBE() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)
#define CUBERT_ATOMIC_ADD(p, v) atomic_add((p), (v))
#line 1 "source"
)";

}  // namespace cubert::portable
