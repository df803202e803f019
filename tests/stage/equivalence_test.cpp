// The pipeline runtime against the single-process reference: P stages x D replicas, every
// schedule, with and without overlap, over real sockets (one thread per rank) give the same
// per-step losses and final weights as one process running the same global batch, within
// 1e-5 relative (fp32; only the order of the sums differs): losses step by step, weights
// tensor by tensor (||pipeline - reference|| / ||reference||).
//
// One slice is compared differently: the key biases (the middle third of attn.qkv.bias). Their
// exact gradient is zero (a softmax row is unchanged when the same q . b_k is added to every
// score), so what reaches them is rounding noise, which AdamW normalises into steps of up to the
// learning rate whose sign depends on the order of the sums. They are checked to have moved no
// more than AdamW allows.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "stage_test_support.h"

namespace tessel::stage {
namespace {

using placement::ScheduleKind;
using testing::relative_error;
using testing::RunResult;

constexpr int kSteps = 3;
constexpr int kMicroBatches = 4;
constexpr double kRelative = 1e-5;

struct Case {
  const char* name;
  ScheduleKind kind;
  int stages, replicas, chunks;
  bool overlap;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

const RunResult& reference(int replicas) {
  static std::map<int, RunResult> cache;
  auto it = cache.find(replicas);
  if (it == cache.end()) {
    const auto options = testing::tiny_options(ScheduleKind::OneFOneB, kMicroBatches);
    it = cache
             .emplace(replicas,
                      testing::run_reference(testing::tiny_config(), replicas, options, kSteps))
             .first;
  }
  return it->second;
}

class Equivalence : public ::testing::TestWithParam<Case> {};

TEST_P(Equivalence, LossesAndWeightsMatchTheSingleProcessRun) {
  const Case& c = GetParam();
  const GptConfig config = testing::tiny_config();
  TrainingOptions options = testing::tiny_options(c.kind, kMicroBatches);
  options.overlap = c.overlap;
  const PipelineLayout layout =
      PipelineLayout::standard(c.stages, c.replicas, c.chunks, config.layers);
  const RunResult run = testing::run_pipeline(config, layout, options, kSteps);
  const RunResult& ref = reference(c.replicas);
  ASSERT_EQ(ref.losses[0].size(), size_t{kSteps});

  // Every rank reports the same loss, equal to the reference's.
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    ASSERT_EQ(run.losses[rank].size(), size_t{kSteps}) << "rank " << rank;
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_EQ(run.losses[rank][s], run.losses[0][s]) << "rank " << rank << " step " << s;
      EXPECT_NEAR(run.losses[rank][s], ref.losses[0][s], kRelative * ref.losses[0][s])
          << "rank " << rank << " step " << s;
    }
  }
  // The loss moved: the steps trained something.
  EXPECT_LT(ref.losses[0][kSteps - 1], ref.losses[0][0]);

  // Every tensor of the model, on every replica, matches the reference; replicas agree bit
  // for bit, and the last stage's lm_head copy equals the first stage's wte bit for bit.
  const testing::Weights& expected = ref.weights[0];
  const size_t C = config.channels;
  const double key_bias_bound = kSteps * options.adamw.learning_rate * 1.01;
  testing::expect_replicas_match(run.weights, expected, C, kRelative, key_bias_bound,
                                 testing::KeyBiasBound::kFromZero, c.stages > 1);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, Equivalence,
    ::testing::Values(Case{"gpipe_2x2", ScheduleKind::GPipe, 2, 2, 1, true},
                      Case{"gpipe_4x1", ScheduleKind::GPipe, 4, 1, 1, true},
                      Case{"one_f_one_b_2x2", ScheduleKind::OneFOneB, 2, 2, 1, true},
                      Case{"one_f_one_b_4x1", ScheduleKind::OneFOneB, 4, 1, 1, true},
                      Case{"one_f_one_b_1x4", ScheduleKind::OneFOneB, 1, 4, 1, true},
                      Case{"interleaved_2x2_v2", ScheduleKind::Interleaved, 2, 2, 2, true},
                      Case{"interleaved_4x1_v2", ScheduleKind::Interleaved, 4, 1, 2, true},
                      Case{"one_f_one_b_2x2_no_overlap", ScheduleKind::OneFOneB, 2, 2, 1, false},
                      Case{"interleaved_2x2_v2_no_overlap", ScheduleKind::Interleaved, 2, 2, 2,
                           false}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessel::stage
