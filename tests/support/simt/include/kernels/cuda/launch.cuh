// The SIMT emulator's kernels/cuda/launch.cuh (the product's spells nvcc's launch and dynamic
// shared memory; this one, found first on the emulator's include path, spells the emulator's):
//   TESSEL_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...) runs the grid on the emulator
//   TESSEL_DYNAMIC_SHARED(name); names the running block's dynamic shared memory
#pragma once

#define TESSEL_LAUNCH(kernel, ...) ::tessel::simt::Launch(#kernel, kernel, __VA_ARGS__)
#define TESSEL_DYNAMIC_SHARED(name) unsigned char* const name = ::tessel::simt::dynamic_shared()
