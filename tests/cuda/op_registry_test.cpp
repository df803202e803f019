// Every registered op case as a test against its CPU twin (skipped, with the reason, where no GPU
// is usable), and CPU-side checks of the registry itself: that it covers every op of
// kernels/cuda, the shapes the issue asks for, and that its error measure fails what it must.
#include "tests/cuda/op_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device.h"
#include "tests/cuda/host_bf16.h"

namespace tessel::kernels::cuda::testing {
namespace {

class CudaOpTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOpTest, MatchesCpuTwin) {
  if (const std::optional<std::string> reason = gpu_unavailable_reason()) {
    GTEST_SKIP() << "no GPU: " << *reason;
  }
  const OpCase& op_case = GetParam();
  // A fixed seed per case name: a failure reproduces, and every case draws its own inputs.
  Rng rng(std::hash<std::string>{}(op_case.name()));
  Context ctx(nullptr);
  const std::vector<Comparison> comparisons = op_case.run(rng, ctx);
  TESSEL_CUDA_CHECK(cudaDeviceSynchronize());
  ASSERT_FALSE(comparisons.empty());
  for (const Comparison& c : comparisons) {
    EXPECT_LE(c.error, c.tolerance)
        << op_case.name() << " (" << op_case.dtypes << "): output '" << c.output
        << "' relative L2 error " << c.error << " over the tolerance " << c.tolerance;
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, CudaOpTest, ::testing::ValuesIn(op_registry()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name();
                         });

TEST(OpRegistry, CoversEveryCudaOp) {
  const std::set<std::string> ops = {"encoder_forward",
                                     "encoder_backward",
                                     "layernorm_forward",
                                     "residual_layernorm_forward",
                                     "layernorm_backward",
                                     "matmul_forward",
                                     "matmul_gelu_forward",
                                     "matmul_backward",
                                     "gelu_forward",
                                     "gelu_backward",
                                     "residual_forward",
                                     "residual_backward",
                                     "attention_forward",
                                     "attention_backward",
                                     "softmax_cross_entropy",
                                     "adamw_update",
                                     "sum_of_squares",
                                     "global_norm",
                                     "zero",
                                     "scaled_add",
                                     "copy_to_bf16"};
  std::set<std::string> registered;
  for (const OpCase& c : op_registry()) registered.insert(c.op);
  for (const std::string& op : ops) EXPECT_TRUE(registered.count(op)) << op << " has no case";
  for (const std::string& op : registered) EXPECT_TRUE(ops.count(op)) << op << " is not an op";
}

TEST(OpRegistry, NamesAreUniqueAndEveryCaseIsDescribed) {
  std::set<std::string> names;
  for (const OpCase& c : op_registry()) {
    EXPECT_TRUE(names.insert(c.name()).second) << c.name() << " is registered twice";
    EXPECT_FALSE(c.dtypes.empty()) << c.name();
    EXPECT_FALSE(c.shape.empty()) << c.name();
    EXPECT_TRUE(bool(c.run)) << c.name();
    for (const char ch : c.name()) {
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') << c.name();
    }
  }
}

// The odd shapes: heads of 64 and 128, sequences that are not a multiple of the 64-row
// tiles, forward and backward.
TEST(OpRegistry, AttentionCasesCoverBothHeadSizesAndPartialTiles) {
  for (const std::string op : {"attention_forward", "attention_backward"}) {
    bool head64 = false, head128 = false, partial_tile = false;
    for (const OpCase& c : op_registry()) {
      if (c.op != op) continue;
      const int64_t head_size = c.shape.at("C") / c.shape.at("NH");
      head64 |= head_size == 64;
      head128 |= head_size == 128;
      partial_tile |= c.shape.at("T") % 64 != 0;
    }
    EXPECT_TRUE(head64) << op;
    EXPECT_TRUE(head128) << op;
    EXPECT_TRUE(partial_tile) << op;
  }
}

// Sizes that are not multiples of the 8-element vectors, for the ops whose kernels vectorise.
TEST(OpRegistry, EveryOpHasAnOddShape) {
  std::set<std::string> odd;
  for (const OpCase& c : op_registry()) {
    for (const auto& [dim, value] : c.shape) {
      if (dim != "B" && dim != "NH" && value % 8 != 0) odd.insert(c.op);
    }
  }
  for (const OpCase& c : op_registry()) EXPECT_TRUE(odd.count(c.op)) << c.op;
}

TEST(RelativeError, IsZeroForEqualOutputsAndScalesWithTheReference) {
  EXPECT_EQ(relative_error(std::vector<float>{1, -2, 3}, std::vector<float>{1, -2, 3}), 0.0);
  EXPECT_NEAR(relative_error(std::vector<float>{3, 4.5}, std::vector<float>{3, 4}), 0.1, 1e-12);
  EXPECT_EQ(relative_error(std::vector<float>{0, 0}, std::vector<float>{0, 0}), 0.0);
}

TEST(RelativeError, FailsNanInfinityAndSizeMismatch) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(relative_error(std::vector<float>{1, nan}, std::vector<float>{1, 2})));
  EXPECT_TRUE(std::isinf(relative_error(std::vector<float>{1, inf}, std::vector<float>{1, 2})));
  EXPECT_TRUE(std::isinf(relative_error(std::vector<float>{1}, std::vector<float>{1, 2})));
  EXPECT_TRUE(std::isinf(relative_error(std::vector<float>{1}, std::vector<float>{0})));
  // A NaN never passes, whatever the tolerance.
  EXPECT_FALSE(relative_error(std::vector<float>{nan}, std::vector<float>{1}) <= 1e30);
}

TEST(HostBf16, RoundsToNearestEven) {
  EXPECT_EQ(to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(from_bf16_bits(0x3f80), 1.0f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even significand (1).
  EXPECT_EQ(round_to_bf16(1.0f + 0x1.0p-8f), 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6.
  EXPECT_EQ(round_to_bf16(1.0f + 3 * 0x1.0p-8f), 1.0f + 0x1.0p-6f);
  EXPECT_EQ(round_to_bf16(1.0f + 0x1.0p-8f + 0x1.0p-20f), 1.0f + 0x1.0p-7f);
  EXPECT_EQ(round_to_bf16(-2.5f), -2.5f);
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isinf(round_to_bf16(std::numeric_limits<float>::infinity())));
  // All-ones bits, the tests' poison, read back as NaN.
  EXPECT_TRUE(std::isnan(from_bf16_bits(0xffff)));
}

}  // namespace
}  // namespace tessel::kernels::cuda::testing
