// The two spellings of CUDA C++ that only nvcc reads, written once so that the SIMT emulator
// (tests/support/simt), which compiles kernels/cuda with the host compiler to run the CUDA tests
// on a CPU, can stand in for them:
//   TESSEL_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...)  is  kernel<<<...>>>(args...)
//   TESSEL_DYNAMIC_SHARED(name);  declares the block's dynamic shared memory as unsigned char
//   name[]
#pragma once

#if defined(TESSEL_SIMT)
#define TESSEL_LAUNCH(kernel, ...) ::tessel::simt::Launch(#kernel, kernel, __VA_ARGS__)
#define TESSEL_DYNAMIC_SHARED(name) unsigned char* const name = ::tessel::simt::dynamic_shared()
#else
#define TESSEL_LAUNCH(kernel, ...) kernel<<<__VA_ARGS__>>>
#define TESSEL_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif
