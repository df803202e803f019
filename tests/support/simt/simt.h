// The SIMT emulator's interface to emulated device code: the built-in variables, barriers and
// warp-wide instructions that kernels/cuda uses, for the emulated thread that is running now.
// A grid runs one block at a time on the calling host thread; each GPU thread of the block is a
// fiber, and control passes between them only where a GPU thread waits for others.
#pragma once

#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessel::simt {

struct ThreadCoordinates {
  uint3 thread;
  uint3 block;
  dim3 block_dim;
  dim3 grid_dim;
};

// Of the emulated thread that is running now.
const ThreadCoordinates& coordinates();

// The block's dynamic shared memory (the launch's third argument), 128-byte aligned, filled with
// 0xFF bytes (NaN as fp32 and bf16) before each block starts.
unsigned char* dynamic_shared();

// __syncthreads: waits until every thread of the block has arrived.
void sync_threads();

// The warp-wide instructions. Each lane of a warp must reach the same instruction, in the same
// order, with every lane of the warp in `mask`; the emulator reports anything else as a kernel
// fault (what the hardware leaves undefined or hangs on).
enum class Collective : uint8_t { kShuffleXor, kLdmatrix, kLdmatrixTrans, kMma };

// Operands and results of one lane; each instruction reads and writes its own layout.
inline constexpr size_t kSlotBytes = 64;
struct Slot {
  alignas(16) unsigned char bytes[kSlotBytes];
};

// One warp-wide instruction of one warp: lane l's operands in in[l]; `compute` fills out[l].
struct WarpStep {
  Slot in[32];
  Slot out[32];
  int lanes;  // lanes in the warp (32, fewer in the last warp of a block of another size)
};

// Copies `operands` into this lane's input slot; the lane that arrives last runs compute() for
// the whole warp; returns this lane's output slot (valid until its next warp-wide instruction).
const Slot& warp_step(Collective kind, unsigned mask, const void* operands, size_t bytes,
                      void (*compute)(WarpStep&));

// Whether [p, p + bytes) lies in the block's dynamic shared memory.
bool in_dynamic_shared(const void* p, size_t bytes);

// The race check of dynamic shared memory, for the accesses the emulator sees (cp.async,
// ldmatrix, store_shared_b32): a thread's write and another thread's read or write of the same
// bytes (in words of 4) with no __syncthreads between them is a fault.
void note_shared_write(const void* p, size_t bytes);
void note_shared_read(const void* p, size_t bytes);

// Ends the running kernel with a fault naming the kernel, the block and the thread (it throws on
// the faulting thread's stack, which unwinds to the thread's start).
[[noreturn]] void fault(const std::string& what);

// __shfl_xor_sync for 4- and 8-byte values.
uint64_t shuffle_xor_bits(unsigned mask, uint64_t bits, int lane_mask, int width);

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 and mma.sync.aligned.m16n8k16.row.col with
// bf16 operands and fp32 accumulators (warp_matrix.cpp); cp.async of 16 bytes with its commit and
// wait, which land the copies (grid.cpp).
void ldmatrix_x4(uint32_t (&r)[4], const void* row_address, bool trans);
void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
void cp_async16(void* dst, const void* src, bool valid);
void cp_async_commit();
void cp_async_wait(int pending);

}  // namespace tessel::simt
