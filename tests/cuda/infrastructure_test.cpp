// The CUDA support code: error checks (these run without a GPU), the arena's bookkeeping (no GPU
// either), and the device arena, streams and events (GPU).
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/arena.h"
#include "kernels/cuda/arena_layout.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/vector_ops.h"
#include "tests/cuda/cuda_test_support.h"

namespace tessel::kernels::cuda {
namespace {

#define SKIP_WITHOUT_GPU()                                                    \
  do {                                                                        \
    if (const std::optional<std::string> reason = gpu_unavailable_reason()) { \
      GTEST_SKIP() << "no GPU: " << *reason;                                  \
    }                                                                         \
  } while (false)

TEST(CudaCheck, ErrorNamesFileLineCallAndError) {
  const int line = __LINE__ + 2;
  try {
    TESSEL_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("infrastructure_test.cpp:" + std::to_string(line)), std::string::npos)
        << message;
    EXPECT_NE(message.find("cudaErrorInvalidValue"), std::string::npos) << message;
    EXPECT_NE(message.find("failed"), std::string::npos) << message;
  }
}

TEST(CudaCheck, CublasErrorNamesTheStatus) {
  try {
    TESSEL_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos)
        << e.what();
  }
}

TEST(CudaCheck, SuccessDoesNotThrow) {
  EXPECT_NO_THROW(TESSEL_CUDA_CHECK(cudaSuccess));
  EXPECT_NO_THROW(TESSEL_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
}

// Says on every run whether the GPU tests ran, and why not.
TEST(Device, ReportsWhetherAGpuIsUsable) {
  if (const std::optional<std::string> reason = gpu_unavailable_reason()) {
    EXPECT_FALSE(reason->empty());
    GTEST_SKIP() << "no GPU: " << *reason;
  }
  int count = 0;
  TESSEL_CUDA_CHECK(cudaGetDeviceCount(&count));
  EXPECT_GE(count, 1);
}

TEST(ArenaLayout, AlignsEveryReservation) {
  ArenaLayout layout(4096);
  EXPECT_EQ(layout.reserve(10, "a"), 0u);
  EXPECT_EQ(layout.reserve(1, "b"), 256u);
  EXPECT_EQ(layout.reserve(256, "c"), 512u);
  EXPECT_EQ(layout.used(), 768u);
  EXPECT_EQ(layout.reserve(0, "empty"), 768u);
}

TEST(ArenaLayout, ReleaseToMarkIsLastInFirstOut) {
  ArenaLayout layout(4096);
  layout.reserve(1000, "params");
  const size_t mark = layout.mark();
  layout.reserve(2000, "activations");
  EXPECT_EQ(layout.high_water(), 1024u + 2000u);
  layout.release_to(mark);
  EXPECT_EQ(layout.used(), 1000u);
  EXPECT_EQ(layout.reserve(16, "again"), 1024u);
  EXPECT_EQ(layout.high_water(), 3024u);
  EXPECT_THROW(layout.release_to(4000), std::invalid_argument);
}

TEST(ArenaLayout, FullArenaNamesWhatDidNotFit) {
  ArenaLayout layout(1024);
  layout.reserve(700, "params");
  try {
    layout.reserve(300, "logits");
    FAIL() << "no exception";
  } catch (const std::length_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'logits'"), std::string::npos) << message;
    EXPECT_NE(message.find("300"), std::string::npos) << message;
    EXPECT_NE(message.find("1024"), std::string::npos) << message;
  }
  EXPECT_EQ(layout.used(), 700u);  // a failed reservation changes nothing
  // The aligned offset itself past the end.
  ArenaLayout tiny(300);
  tiny.reserve(290, "a");
  EXPECT_THROW(tiny.reserve(1, "b"), std::length_error);
}

TEST(DeviceArena, SlicesHoldTheirData) {
  SKIP_WITHOUT_GPU();
  DeviceArena arena(1 << 20);
  float* a = arena.allocate<float>(1000, "a");
  int* b = arena.allocate<int>(3, "b");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % ArenaLayout::kAlignment, 0u);
  std::vector<float> values(1000);
  for (int i = 0; i < 1000; ++i) values[i] = float(i) * 0.5f;
  TESSEL_CUDA_CHECK(cudaMemcpy(a, values.data(), 4000, cudaMemcpyHostToDevice));
  const int ints[3] = {7, 8, 9};
  TESSEL_CUDA_CHECK(cudaMemcpy(b, ints, sizeof ints, cudaMemcpyHostToDevice));
  std::vector<float> back(1000);
  TESSEL_CUDA_CHECK(cudaMemcpy(back.data(), a, 4000, cudaMemcpyDeviceToHost));
  EXPECT_EQ(back, values);
  EXPECT_THROW(arena.allocate<float>(1 << 20, "too much"), std::length_error);
}

TEST(StreamsAndEvents, AStreamWaitsForAnEventOfAnother) {
  SKIP_WITHOUT_GPU();
  Stream producer;
  Stream consumer(greatest_stream_priority());
  Event produced;
  Event start(Event::Timing::kOn), stop(Event::Timing::kOn);
  const int64_t n = 1 << 22;
  testing::DeviceBuffer<float> x(n), y(n);
  Context producer_ctx(producer.get()), consumer_ctx(consumer.get());
  start.record(producer.get());
  TESSEL_CUDA_CHECK(cudaMemsetAsync(x.get(), 0, n * sizeof(float), producer.get()));
  scaled_add(x.get(), x.get(), 1.0f, n, producer_ctx);  // still zeros, but later in the stream
  produced.record(producer.get());
  stop.record(producer.get());
  consumer.wait(produced);
  TESSEL_CUDA_CHECK(cudaMemcpyAsync(y.get(), x.get(), n * sizeof(float), cudaMemcpyDeviceToDevice,
                                    consumer.get()));
  consumer.synchronize();
  EXPECT_TRUE(produced.done());
  stop.synchronize();
  EXPECT_GE(stop.elapsed_ms_since(start), 0.0f);
  const std::vector<float> copied = y.download();
  EXPECT_EQ(copied, std::vector<float>(size_t(n), 0.0f));
}

}  // namespace
}  // namespace tessel::kernels::cuda
