#include "placement/workload.h"

#include <gtest/gtest.h>

namespace tessel::placement {
namespace {

TEST(Workload, Gpt3XlHasAboutOnePointThreeBillionParameters) {
  const Workload w = workload_preset("gpt3-1.3b");
  EXPECT_EQ(w.layers, 24);
  EXPECT_EQ(w.hidden, 2048);
  EXPECT_EQ(w.heads, 16);
  EXPECT_EQ(w.seq_len, 2048);
  EXPECT_NEAR(double(w.total_parameters()), 1.316e9, 0.01e9);
  // 12 h^2 + 13 h per layer.
  EXPECT_EQ(w.parameters_per_layer(), 12LL * 2048 * 2048 + 13 * 2048);
}

TEST(Workload, DerivedQuantitiesFollowTheirFormulas) {
  Workload w = workload_preset("gpt3-1.3b");
  EXPECT_DOUBLE_EQ(w.activation_message_bytes(), 1.0 * 2048 * 2048 * 2);
  EXPECT_DOUBLE_EQ(w.forward_flops_per_layer(),
                   2.0 * 2048 * (12.0 * 2048 * 2048) + 4.0 * 2048 * 2048 * 2048);
  EXPECT_DOUBLE_EQ(w.gradient_bytes(3, false, false), 4.0 * 3 * w.parameters_per_layer());
  EXPECT_DOUBLE_EQ(w.state_bytes(3, false, false), 18.0 * 3 * w.parameters_per_layer());
  // The paper's inputs: c_dp close to the reference's 0.65 GB; c_pp for 128 sequences.
  EXPECT_NEAR(w.paper_c_dp_gb(8), 0.658, 0.001);
  EXPECT_NEAR(w.paper_c_pp_gb(8), 2048.0 * 2048 * 2 * 128 / 1e9, 1e-12);
  EXPECT_EQ(w.micro_batches_per_replica(8), 128);
  EXPECT_THROW(w.micro_batches_per_replica(7), WorkloadError);
  // The first stage holds the embeddings, the last the tied head copy.
  EXPECT_GT(w.stage_parameters(3, true, false), w.stage_parameters(3, false, false));
  EXPECT_GT(w.stage_parameters(3, false, true), w.stage_parameters(3, false, false));
  w.recompute_activations = false;
  EXPECT_GT(w.activation_bytes_in_flight(3), 3.0 * 2048 * 2048 * 2 * 34);
}

TEST(Workload, YamlRoundTripsAndAcceptsPresets) {
  const Workload w = workload_preset("gpt2-124m");
  const Workload back = parse_workload_yaml(workload_to_yaml(w), "w.yaml");
  EXPECT_EQ(back.layers, w.layers);
  EXPECT_EQ(back.hidden, w.hidden);
  EXPECT_EQ(back.ffn(), w.ffn());
  EXPECT_EQ(back.global_batch, w.global_batch);
  EXPECT_EQ(back.precision, w.precision);
  const Workload p =
      parse_workload_yaml("preset: gpt3-1.3b\ntraining: {global_batch: 2048}\n", "p");
  EXPECT_EQ(p.layers, 24);
  EXPECT_EQ(p.global_batch, 2048);
}

void expect_error(const std::string& yaml, const std::string& fragment) {
  try {
    parse_workload_yaml(yaml, "bad.yaml");
    FAIL() << "accepted: " << yaml;
  } catch (const WorkloadError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.yaml"), std::string::npos) << e.what();
  }
}

TEST(Workload, BadFilesNameTheField) {
  expect_error("model: {layers: 0, hidden: 64, heads: 4, seq_len: 8}\ntraining: {global_batch: 8}",
               "layers: must be >= 1");
  expect_error("model: {layers: 2, hidden: 65, heads: 4, seq_len: 8}\ntraining: {global_batch: 8}",
               "heads");
  expect_error("model: {layers: two}", "model.layers: expected an integer");
  expect_error("model: {layers: 2, hidden: 64, heads: 4, seq_len: 8, precision: fp8}",
               "model.precision");
  expect_error("model: {layerz: 2}", "model.layerz: unknown field");
  expect_error("preset: gpt5", "preset: unknown model preset 'gpt5'");
  expect_error("training: {global_batch: 8}", "model: missing");
  expect_error("model: [1, 2", "line 1");
  expect_error("format_version: 2\npreset: gpt2-124m", "format_version");
  EXPECT_THROW(load_workload_file("/nonexistent/model.yaml"), WorkloadError);
}

// Found by tests/fuzz (workload_yaml): a key that is a mapping ("? vocab: 1") threw YAML's
// BadConversion past the parser (regressions/workload_yaml/complex-key).
TEST(Workload, AKeyThatIsNotAStringIsRefusedNamingItsSection) {
  expect_error("model:\n  layers: 2\n  ? vocab: 8\n",
               "bad.yaml: model: a key must be a string (line 3)");
  expect_error("? [a, b]\n: 1\n", "bad.yaml: (document): a key must be a string (line 1)");
}

}  // namespace
}  // namespace tessel::placement
