// The delta codec (delta_codec.h): fp32 exact; 8 and 4 bits within half a step of their block's
// scale; error feedback keeps the sum of what was sent within one step of the sum of the deltas.
#include "noderuntime/stage/delta_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tessel::stage {
namespace {

std::vector<float> random_delta(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<float> decoded(const std::vector<uint32_t>& words, size_t n, int bits) {
  std::vector<float> out(n, 0.0f);
  add_decoded_delta(words, bits, 1.0f, out);
  return out;
}

TEST(DeltaCodec, SizesPerBitWidth) {
  EXPECT_EQ(encoded_words(1000, 32), 1000u);
  EXPECT_EQ(encoded_words(1000, 8), (8 * 4 + 1000 + 3) / 4u);  // 8 scales, 1000 codes
  EXPECT_EQ(encoded_words(1000, 4), (8 * 4 + 500 + 3) / 4u);
  EXPECT_EQ(encoded_words(1, 4), 2u);
  EXPECT_DOUBLE_EQ(payload_bytes_per_element(4), 0.5);
}

TEST(DeltaCodec, Fp32IsExact) {
  const std::vector<float> d = random_delta(333, 1, 1e-3f);
  std::vector<uint32_t> words(encoded_words(d.size(), 32));
  encode_delta(d, {}, 32, words);
  EXPECT_EQ(decoded(words, d.size(), 32), d);
}

TEST(DeltaCodec, QuantisedWithinHalfAStepAndTheResidualHoldsTheRest) {
  for (int bits : {8, 4}) {
    const std::vector<float> d = random_delta(1000, 2, 1e-2f);
    std::vector<float> residual(d.size(), 0.0f);
    std::vector<uint32_t> words(encoded_words(d.size(), bits));
    encode_delta(d, residual, bits, words);
    const std::vector<float> got = decoded(words, d.size(), bits);
    const float qmax = bits == 8 ? 127.0f : 7.0f;
    for (size_t b = 0; b * kDeltaBlock < d.size(); ++b) {
      float largest = 0;
      const size_t end = std::min(d.size(), (b + 1) * kDeltaBlock);
      for (size_t i = b * kDeltaBlock; i < end; ++i) largest = std::max(largest, std::abs(d[i]));
      const float step = largest / qmax;
      for (size_t i = b * kDeltaBlock; i < end; ++i) {
        EXPECT_LE(std::abs(got[i] - d[i]), 0.5f * step * 1.001f) << bits << " bits, " << i;
        EXPECT_NEAR(residual[i], d[i] - got[i], 1e-7f) << bits << " bits, " << i;
      }
    }
  }
}

TEST(DeltaCodec, ErrorFeedbackLosesNothingForGood) {
  const size_t n = 512;
  std::vector<float> residual(n, 0.0f), sent(n, 0.0f), total(n, 0.0f);
  std::vector<uint32_t> words(encoded_words(n, 4));
  for (uint32_t round = 0; round < 50; ++round) {
    const std::vector<float> d = random_delta(n, 100 + round, 1e-3f);
    for (size_t i = 0; i < n; ++i) total[i] += d[i];
    encode_delta(d, residual, 4, words);
    add_decoded_delta(words, 4, 1.0f, sent);
  }
  // What was sent plus what is still held is what there was to send.
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(sent[i] + residual[i], total[i], 1e-5f) << i;
}

TEST(DeltaCodec, AZeroBlockEncodesToZeros) {
  const std::vector<float> d(200, 0.0f);
  std::vector<float> residual(d.size(), 0.0f);
  std::vector<uint32_t> words(encoded_words(d.size(), 8));
  encode_delta(d, residual, 8, words);
  EXPECT_EQ(decoded(words, d.size(), 8), d);
}

}  // namespace
}  // namespace tessel::stage
