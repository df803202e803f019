// The partition of the model into chunks and the flat parameter layout, and the seeded
// initialisation that any partition reproduces bit for bit.
#include "noderuntime/stage/parameter_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "noderuntime/stage/parameter_init.h"

namespace tessel::stage {
namespace {

const GptConfig kConfig{6, 16, 4, 64, 8, 300};

std::map<std::string, std::vector<float>> build(const std::vector<int>& split, uint64_t seed) {
  std::map<std::string, std::vector<float>> out;
  for (int s = 0; s < static_cast<int>(split.size()); ++s) {
    const ParameterLayout layout(kConfig, chunk_spec(kConfig, split, s));
    std::vector<float> params(layout.total());
    initialize_parameters(layout, seed, params.data());
    for (const ParameterTensor& t : layout.tensors()) {
      out[t.name].assign(params.begin() + t.offset, params.begin() + t.offset + t.size);
    }
  }
  return out;
}

TEST(ChunkSpec, SplitsLayersIntoVirtualStages) {
  EXPECT_EQ(even_layer_split(7, 3), (std::vector<int>{3, 2, 2}));
  const std::vector<int> split = {1, 3, 2};
  const ChunkSpec middle = chunk_spec(kConfig, split, 1);
  EXPECT_EQ(middle.first_layer, 1);
  EXPECT_EQ(middle.num_layers, 3);
  EXPECT_FALSE(middle.embedding);
  EXPECT_FALSE(middle.head);
  EXPECT_TRUE(chunk_spec(kConfig, split, 0).embedding);
  EXPECT_TRUE(chunk_spec(kConfig, split, 2).head_copy());
  EXPECT_FALSE(chunk_spec(kConfig, {6}, 0).head_copy());  // one chunk holds wte once
}

TEST(ChunkSpec, RejectsSplitsThatDoNotCoverTheModel) {
  EXPECT_THROW(chunk_spec(kConfig, {3, 2}, 0), ConfigError);
  EXPECT_THROW(chunk_spec(kConfig, {6, 0}, 0), ConfigError);
  EXPECT_THROW(chunk_spec(kConfig, {3, 3}, 2), ConfigError);
  EXPECT_THROW(even_layer_split(2, 3), ConfigError);
  try {
    chunk_spec(kConfig, {3, 2}, 0);
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "layer_split: sums to 5 layers, the model has 6");
  }
}

TEST(ParameterLayout, TensorsAreContiguousAndBucketsTileTheBuffer) {
  const ParameterLayout first(kConfig, chunk_spec(kConfig, {2, 4}, 0));
  const ParameterLayout last(kConfig, chunk_spec(kConfig, {2, 4}, 1));
  for (const ParameterLayout* layout : {&first, &last}) {
    int64_t at = 0;
    for (const ParameterTensor& t : layout->tensors()) {
      EXPECT_EQ(t.offset, at) << t.name;
      at += t.size;
    }
    EXPECT_EQ(at, layout->total());
    at = 0;
    for (const GradientBucket& b : layout->buckets()) {
      EXPECT_EQ(b.offset, at) << b.name;
      at += b.size;
    }
    EXPECT_EQ(at, layout->total());
  }
  EXPECT_EQ(first.total(), kConfig.embedding_parameters() + 2 * kConfig.parameters_per_layer());
  EXPECT_EQ(last.total(), 4 * kConfig.parameters_per_layer() + 2 * kConfig.channels +
                              int64_t{kConfig.vocab} * kConfig.channels);
  EXPECT_EQ(first.buckets()[first.bucket_index("wte")].group, BucketGroup::kEmbedding);
  EXPECT_EQ(last.buckets()[last.bucket_index("lm_head")].group, BucketGroup::kEmbedding);
  EXPECT_EQ(last.buckets()[last.layer_bucket(1)].name, "h.3");
  EXPECT_FALSE(last.tensor("lm_head.weight").in_norm);
  EXPECT_FALSE(last.tensor("h.2.ln_1.weight").decay);
  EXPECT_TRUE(last.tensor("h.2.mlp.fc.weight").decay);
  EXPECT_EQ(last.tensor("h.5.attn.qkv.weight").shape, (std::vector<int64_t>{48, 16}));
  EXPECT_THROW(first.tensor("ln_f.weight"), std::out_of_range);
}

TEST(ParameterInit, EveryPartitionBuildsTheSameWeights) {
  const auto whole = build({6}, 11);
  for (const std::vector<int>& split :
       {std::vector<int>{3, 3}, std::vector<int>{1, 2, 3}, std::vector<int>{1, 1, 1, 1, 1, 1}}) {
    const auto parts = build(split, 11);
    for (const auto& [name, values] : whole) EXPECT_EQ(parts.at(name), values) << name;
    EXPECT_EQ(parts.at("lm_head.weight"), whole.at("wte.weight"));
  }
  EXPECT_NE(build({6}, 12).at("h.0.mlp.fc.weight"), whole.at("h.0.mlp.fc.weight"));
}

TEST(ParameterInit, FollowsGpt2) {
  const auto w = build({6}, 5);
  auto stddev = [](const std::vector<float>& v) {
    double sum = 0, sq = 0;
    for (float x : v) sum += x, sq += double(x) * x;
    const double mean = sum / v.size();
    return std::sqrt(sq / v.size() - mean * mean);
  };
  EXPECT_NEAR(stddev(w.at("wte.weight")), 0.02, 0.001);
  EXPECT_NEAR(stddev(w.at("h.1.mlp.fc.weight")), 0.02, 0.001);
  EXPECT_NEAR(stddev(w.at("h.1.mlp.proj.weight")), 0.02 / std::sqrt(12.0), 0.0005);
  EXPECT_EQ(w.at("h.1.ln_1.weight"), std::vector<float>(16, 1.0f));
  EXPECT_EQ(w.at("h.1.attn.qkv.bias"), std::vector<float>(48, 0.0f));
  // Different tensors draw from different streams.
  EXPECT_NE(w.at("h.1.mlp.fc.weight")[0], w.at("h.2.mlp.fc.weight")[0]);
}

TEST(ParameterInit, StandardNormalHasUnitMomentsAndIsCounterBased) {
  const uint64_t stream = parameter_stream(1, "x");
  double sum = 0, sq = 0;
  constexpr int kN = 200000;
  for (int i = 0; i < kN; ++i) {
    const double z = standard_normal_at(stream, i);
    sum += z;
    sq += z * z;
  }
  EXPECT_NEAR(sum / kN, 0.0, 0.01);
  EXPECT_NEAR(sq / kN, 1.0, 0.01);
  EXPECT_EQ(standard_normal_at(stream, 12345), standard_normal_at(stream, 12345));
  EXPECT_NE(parameter_stream(1, "x"), parameter_stream(2, "x"));
  EXPECT_NE(parameter_stream(1, "x"), parameter_stream(1, "y"));
}

}  // namespace
}  // namespace tessel::stage
