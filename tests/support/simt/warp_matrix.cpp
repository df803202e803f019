// The tensor-core instructions of kernels/cuda/warp_instructions.cuh, emulated from the fragment
// layouts that the PTX ISA states for them ("Warp-level matrix load instruction: ldmatrix" and
// "Matrix fragments for mma.m16n8k16 with floating point type"), element by element:
//   ldmatrix .x4: lane 8i + r gives the address of row r of matrix i; lane l receives, in its
//     register i, the elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix i, the
//     first in the low half; with .trans, elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4).
//   mma.m16n8k16 .row.col, groupID = l / 4, threadID_in_group = l % 4:
//     A element a_i (i = 0..7, two per register): row groupID + 8 * ((i / 2) % 2),
//       column 2 threadID_in_group + (i % 2) + 8 * (i / 4);
//     B element b_i (i = 0..3): row 2 threadID_in_group + (i % 2) + 8 * (i / 2), column groupID;
//     C/D element c_i (i = 0..3): row groupID + 8 * (i / 2), column 2 threadID_in_group + (i % 2).
#include <cstdint>
#include <cstring>

#include "tests/support/simt/simt.h"

namespace tessel::simt {
namespace {

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

uint16_t half_of(uint32_t reg, int which) { return uint16_t(which == 0 ? reg : reg >> 16); }

struct LdmatrixOperands {
  const unsigned char* row_address;
};

template <bool kTrans>
void compute_ldmatrix(WarpStep& step) {
  const unsigned char* rows[32];
  for (int l = 0; l < 32; ++l) {
    LdmatrixOperands o;
    std::memcpy(&o, step.in[l].bytes, sizeof o);
    rows[l] = o.row_address;
  }
  auto element = [&](int matrix, int row, int col) {
    uint16_t e;
    std::memcpy(&e, rows[8 * matrix + row] + 2 * col, sizeof e);
    return e;
  };
  for (int l = 0; l < 32; ++l) {
    uint32_t r[4];
    for (int i = 0; i < 4; ++i) {
      const int major = l / 4, minor = 2 * (l % 4);
      const uint16_t lo = kTrans ? element(i, minor, major) : element(i, major, minor);
      const uint16_t hi = kTrans ? element(i, minor + 1, major) : element(i, major, minor + 1);
      r[i] = uint32_t(lo) | uint32_t(hi) << 16;
    }
    std::memcpy(step.out[l].bytes, r, sizeof r);
  }
}

struct MmaOperands {
  uint32_t a[4];
  uint32_t b[2];
  float c[4];
};

void compute_mma(WarpStep& step) {
  float A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; ++l) {
    MmaOperands o;
    std::memcpy(&o, step.in[l].bytes, sizeof o);
    const int group = l / 4, in_group = l % 4;
    for (int i = 0; i < 8; ++i) {
      const int row = group + 8 * ((i / 2) % 2);
      const int col = 2 * in_group + (i % 2) + 8 * (i / 4);
      A[row][col] = bf16_to_float(half_of(o.a[i / 2], i % 2));
    }
    for (int i = 0; i < 4; ++i) {
      const int row = 2 * in_group + (i % 2) + 8 * (i / 2);
      B[row][group] = bf16_to_float(half_of(o.b[i / 2], i % 2));
    }
    for (int i = 0; i < 4; ++i) C[group + 8 * (i / 2)][2 * in_group + (i % 2)] = o.c[i];
  }
  for (int l = 0; l < 32; ++l) {
    const int group = l / 4, in_group = l % 4;
    float d[4];
    for (int i = 0; i < 4; ++i) {
      const int row = group + 8 * (i / 2), col = 2 * in_group + (i % 2);
      // The products of bf16 values are exact in fp32; the sum is fp32, as the tensor cores keep.
      float sum = C[row][col];
      for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
      d[i] = sum;
    }
    std::memcpy(step.out[l].bytes, d, sizeof d);
  }
}

}  // namespace

void ldmatrix_x4(uint32_t (&r)[4], const void* row_address, bool trans) {
  if (reinterpret_cast<uintptr_t>(row_address) % 16 != 0) {
    fault("ldmatrix row address off a 16-byte boundary");
  }
  if (!in_dynamic_shared(row_address, 16)) {
    fault("ldmatrix row address outside the block's shared memory");
  }
  note_shared_read(row_address, 16);
  const LdmatrixOperands operands{static_cast<const unsigned char*>(row_address)};
  const Slot& out =
      warp_step(trans ? Collective::kLdmatrixTrans : Collective::kLdmatrix, 0xffffffffu, &operands,
                sizeof operands, trans ? &compute_ldmatrix<true> : &compute_ldmatrix<false>);
  std::memcpy(r, out.bytes, sizeof r);
}

void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  MmaOperands operands{{a[0], a[1], a[2], a[3]}, {b0, b1}, {d[0], d[1], d[2], d[3]}};
  const Slot& out =
      warp_step(Collective::kMma, 0xffffffffu, &operands, sizeof operands, &compute_mma);
  std::memcpy(d, out.bytes, sizeof d);
}

}  // namespace tessel::simt
