// The SIMT emulator's scheduler: barriers, shuffles and shared memory behave as on a GPU, and
// what a GPU leaves undefined is reported as a fault that names the kernel, block and thread.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cuda/launch.cuh"

namespace {

using ::testing::HasSubstr;

// The message of the launch's error, or "" when it succeeded.
std::string launch_error() {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess
             ? ""
             : std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

// Each block sums its slice of `in` through a static shared array, two barriers and shuffles.
__global__ void block_sums(float* out, const float* in) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x / 32) ? partial[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) out[blockIdx.x] = v;
  }
}

TEST(SimtGrid, BarriersAndShufflesGiveEachBlockItsSum) {
  constexpr int kBlocks = 5, kThreads = 256;
  std::vector<float> in(kBlocks * kThreads);
  std::iota(in.begin(), in.end(), 0.0f);
  std::vector<float> out(kBlocks, -1.0f);
  TESSEL_LAUNCH(block_sums, kBlocks, kThreads, 0, nullptr)(out.data(), in.data());
  ASSERT_EQ(launch_error(), "");
  for (int b = 0; b < kBlocks; ++b) {
    const float first = float(b * kThreads), last = first + kThreads - 1;
    EXPECT_EQ(out[b], (first + last) * kThreads / 2) << "block " << b;
  }
}

__global__ void coordinates(uint3* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  out[block * blockDim.x * blockDim.y * blockDim.z + thread] =
      uint3{blockIdx.x * 100 + threadIdx.x, blockIdx.y * 100 + threadIdx.y,
            blockIdx.z * 100 + threadIdx.z};
}

TEST(SimtGrid, EveryThreadOfAThreeDimensionalGridRunsOnceWithItsCoordinates) {
  const dim3 grid(3, 2, 2), block(4, 2, 8);
  std::vector<uint3> out(3 * 2 * 2 * 4 * 2 * 8, uint3{0, 0, 0});
  TESSEL_LAUNCH(coordinates, grid, block, 0, nullptr)(out.data());
  ASSERT_EQ(launch_error(), "");
  size_t i = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 8; ++tz)
          for (unsigned ty = 0; ty < 2; ++ty)
            for (unsigned tx = 0; tx < 4; ++tx, ++i) {
              EXPECT_EQ(out[i].x, bx * 100 + tx);
              EXPECT_EQ(out[i].y, by * 100 + ty);
              EXPECT_EQ(out[i].z, bz * 100 + tz);
            }
}

// Lane 0 leaves before the shuffle that the other 31 lanes reach.
__global__ void diverging_shuffle(float* out) {
  if (threadIdx.x == 0) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, float(threadIdx.x), 1);
}

TEST(SimtGrid, AShuffleThatALaneNeverReachesIsAFaultNamingKernelBlockAndThread) {
  std::vector<float> out(32);
  TESSEL_LAUNCH(diverging_shuffle, 1, 32, 0, nullptr)(out.data());
  const std::string error = launch_error();
  EXPECT_THAT(error, HasSubstr("cudaErrorLaunchFailure"));
  EXPECT_THAT(error, HasSubstr("diverging_shuffle: block (0,0,0) thread ("));
  EXPECT_THAT(error, HasSubstr("__shfl_xor_sync"));
}

__global__ void barrier_after_return(float* out) {
  if (threadIdx.x >= 32) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

TEST(SimtGrid, SyncthreadsAfterSomeThreadsReturnedIsAFault) {
  std::vector<float> out(64);
  TESSEL_LAUNCH(barrier_after_return, 1, 64, 0, nullptr)(out.data());
  EXPECT_THAT(launch_error(), HasSubstr("returned"));
}

// Warp 0 waits at a barrier that warp 1 never reaches, because warp 1 waits at a shuffle that
// only half its lanes reach.
__global__ void stuck(float* out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else if (threadIdx.x < 48) {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
  } else {
    __syncthreads();
  }
}

TEST(SimtGrid, ABlockWhoseThreadsAllWaitIsReportedWithWhereTheyWait) {
  std::vector<float> out(64);
  TESSEL_LAUNCH(stuck, 1, 64, 0, nullptr)(out.data());
  const std::string error = launch_error();
  EXPECT_THAT(error, HasSubstr("deadlock: every thread of block (0,0,0) waits"));
  EXPECT_THAT(error, HasSubstr("16 at __shfl_xor_sync"));
}

__global__ void nothing() {}

TEST(SimtGrid, ConfigurationsTheRuntimeRefusesAreRefused) {
  TESSEL_LAUNCH(nothing, 1, 1025, 0, nullptr)();
  EXPECT_THAT(launch_error(), HasSubstr("cudaErrorInvalidConfiguration"));
  TESSEL_LAUNCH(nothing, dim3(1, 65536), 32, 0, nullptr)();
  EXPECT_THAT(launch_error(), HasSubstr("cudaErrorInvalidConfiguration"));
  TESSEL_LAUNCH(nothing, 0, 32, 0, nullptr)();
  EXPECT_THAT(launch_error(), HasSubstr("cudaErrorInvalidConfiguration"));
}

__global__ void touch_dynamic_shared(float* out) {
  TESSEL_DYNAMIC_SHARED(bytes);
  auto* values = reinterpret_cast<float*>(bytes);
  // Fresh shared memory reads as NaN: nothing carries over from a previous block.
  out[blockIdx.x] = values[threadIdx.x];
  values[threadIdx.x] = 1.0f;
}

TEST(SimtGrid, DynamicSharedMemoryAboveFortyEightKibNeedsTheAttribute) {
  constexpr size_t kBytes = 100 * 1024;
  std::vector<float> out(2, 0.0f);
  TESSEL_LAUNCH(touch_dynamic_shared, 2, 1, kBytes, nullptr)(out.data());
  EXPECT_THAT(launch_error(), HasSubstr("cudaFuncAttributeMaxDynamicSharedMemorySize"));

  ASSERT_EQ(cudaFuncSetAttribute(touch_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(kBytes)),
            cudaSuccess);
  TESSEL_LAUNCH(touch_dynamic_shared, 2, 1, kBytes, nullptr)(out.data());
  ASSERT_EQ(launch_error(), "");
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));

  EXPECT_EQ(cudaFuncSetAttribute(touch_dynamic_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 300 * 1024),
            cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST(SimtRuntime, FreeingWhatWasNotAllocatedIsAnError) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1000), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  EXPECT_EQ(cudaFree(static_cast<char*>(p) + 16), cudaErrorInvalidDevicePointer);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidDevicePointer);
  cudaGetLastError();
}

}  // namespace

namespace {

// Thread i reads element i + 1: the last one reads past the end of the allocation.
__global__ void read_one_past(float* out, const float* in) {
  out[threadIdx.x] = in[threadIdx.x + 1];
}

TEST(SimtMemcheck, AReadPastTheEndOfDeviceMemoryIsReportedWithItsLine) {
  float* in = nullptr;
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&in), 32 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), 32 * sizeof(float)), cudaSuccess);
  EXPECT_DEATH(TESSEL_LAUNCH(read_one_past, 1, 32, 0, nullptr)(out, in),
               "heap-buffer-overflow(.|\n)*read_one_past");
  cudaFree(in);
  cudaFree(out);
}

}  // namespace

namespace {

// A 16-byte vector load from an address 4 bytes off a 16-byte boundary: a GPU's misaligned
// address.
__global__ void misaligned_vector_load(float4* out, const float* in) {
  out[threadIdx.x] = *reinterpret_cast<const float4*>(in + 1);
}

TEST(SimtMemcheck, AMisalignedVectorLoadIsReportedWithItsLine) {
  float* in = nullptr;
  float4* out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&in), 64 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), sizeof(float4)), cudaSuccess);
  EXPECT_DEATH(TESSEL_LAUNCH(misaligned_vector_load, 1, 1, 0, nullptr)(out, in),
               "misaligned address(.|\n)*requires 16 byte alignment");
  cudaFree(in);
  cudaFree(out);
}

}  // namespace
