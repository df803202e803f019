// The two spellings of CUDA C++ that only nvcc reads, written once:
//   TESSEL_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...)  is  kernel<<<...>>>(args...)
//   TESSEL_DYNAMIC_SHARED(name);  declares the block's dynamic shared memory as unsigned char
//   name[]
// The SIMT emulator, which compiles kernels/cuda with the host compiler to run the CUDA tests on a
// CPU, has a header of this name of its own, found first on its include path
// (tests/support/simt/include/kernels/cuda/launch.cuh).
#pragma once

#define TESSEL_LAUNCH(kernel, ...) kernel<<<__VA_ARGS__>>>
#define TESSEL_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
