// The low-communication data-parallel mode (outer_sync.h), over real sockets, one thread per rank:
// - equivalence: H = 1, fp32 deltas, plain SGD inside, an outer plain SGD step of learning rate 1
//   and no clipping is synchronous data parallelism with SGD, within 1e-5 relative (fp32: the
//   mean of the replicas' parameters, theta - mean(theta - theta_r), rounds differently from
//   theta - lr mean(g_r), by an ulp of theta per step; the equivalence tests' tolerance);
// - every replica ends each sync with bit-identical parameters (8 and 4 bits, delayed or not,
//   staggered), and theta_start is bit-identical everywhere;
// - islands: replicas inside an island stay bit-identical every step (their gradients summed),
//   the cross-island level syncs every H;
// - a stop vote takes effect at the next vote step, the replicas synced;
// - job.json's data_parallel section and training.optimizer, with errors naming the field.
#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>

#include "noderuntime/stage/job_spec.h"
#include "stage_test_support.h"
#include "tests/stage/job_spec_error.h"

namespace tessel::stage {
namespace {

using placement::ScheduleKind;
using testing::relative_error;
using testing::RunResult;
using testing::Weights;

constexpr double kRelative = 1e-5;

TrainingOptions sgd_options() {
  TrainingOptions o = testing::tiny_options(ScheduleKind::OneFOneB, 2);
  o.optimizer = InnerOptimizer::kSgd;
  o.adamw.learning_rate = 0.05f;
  o.adamw.weight_decay = 0.0f;
  o.grad_clip = 0.0f;
  return o;
}

LowCommunication plain_averaging(int steps) {
  LowCommunication l;
  l.enabled = true;
  l.sync_every = 1;
  l.delta_bits = 32;
  l.outer_learning_rate = 1.0f;
  l.outer_momentum = 0.0f;
  l.nesterov = false;
  l.delayed = false;
  l.final_step = steps;
  return l;
}

struct EquivalenceCase {
  const char* name;
  int stages, replicas;
};

class LowCommunicationEquivalence : public ::testing::TestWithParam<EquivalenceCase> {};

TEST_P(LowCommunicationEquivalence, HOneWithSgdIsSynchronousDataParallelism) {
  const EquivalenceCase& c = GetParam();
  constexpr int kSteps = 4;
  const GptConfig config = testing::tiny_config(4);
  const PipelineLayout layout = PipelineLayout::standard(c.stages, c.replicas, 1, config.layers);
  const TrainingOptions sync = sgd_options();
  TrainingOptions low = sync;
  low.low_communication = plain_averaging(kSteps);
  const RunResult expected = testing::run_pipeline(config, layout, sync, kSteps);
  const RunResult got = testing::run_pipeline(config, layout, low, kSteps);

  // Each replica reports the loss of its own batch; their mean is the global batch's loss.
  for (int s = 0; s < kSteps; ++s) {
    double mean = 0;
    for (int r = 0; r < c.replicas; ++r) mean += got.losses[layout.rank(0, r)][s] / c.replicas;
    const double want = expected.losses[0][s];
    EXPECT_NEAR(mean, want, kRelative * want) << "step " << s;
  }
  EXPECT_LT(expected.losses[0][kSteps - 1], expected.losses[0][0]);
  for (int r = 0; r < c.replicas; ++r) {
    for (const auto& [name, values] : expected.weights[0]) {
      const std::vector<float>& mine = got.weights[r].at(name);
      EXPECT_LE(relative_error(mine, values), kRelative) << name << " replica " << r;
      EXPECT_EQ(mine, got.weights[0].at(name)) << name << " replica " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, LowCommunicationEquivalence,
                         ::testing::Values(EquivalenceCase{"two_stages_two_replicas", 2, 2},
                                           EquivalenceCase{"one_stage_three_replicas", 1, 3}),
                         [](const auto& info) { return std::string(info.param.name); });

// Weights of every replica after every step, gathered from the ranks' threads.
struct StepWeights {
  std::mutex mu;
  std::vector<std::vector<Weights>> at;     // [step][replica]
  std::vector<std::vector<Weights>> start;  // theta_start, [step][replica]

  testing::RunHooks hooks(const PipelineLayout& layout, int steps) {
    at.assign(steps, std::vector<Weights>(layout.replicas));
    start.assign(steps, std::vector<Weights>(layout.replicas));
    testing::RunHooks h;
    h.after_step = [this](StageRuntime& runtime, transport::Communicator&, int step) {
      Weights mine;
      testing::collect_weights(runtime, mine);
      Weights outer;
      const auto& state = runtime.outer_sync()->state();
      for (size_t c = 0; c < state.size(); ++c) {
        for (const ParameterTensor& t : runtime.chunks()[c]->model.layout().tensors()) {
          outer[t.name] = std::vector<float>(state[c].start.begin() + t.offset,
                                             state[c].start.begin() + t.offset + t.size);
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      for (auto& [name, values] : mine) at[step][runtime.replica()][name] = values;
      for (auto& [name, values] : outer) start[step][runtime.replica()][name] = values;
    };
    return h;
  }
};

bool same(const Weights& a, const Weights& b) { return a == b; }

struct SyncCase {
  const char* name;
  int bits;
  bool delayed, stagger;
};

class LowCommunicationSync : public ::testing::TestWithParam<SyncCase> {};

TEST_P(LowCommunicationSync, ReplicasEndEverySyncBitIdentical) {
  const SyncCase& c = GetParam();
  constexpr int kSteps = 7, kH = 3;
  const GptConfig config = testing::tiny_config(4);
  const PipelineLayout layout = PipelineLayout::standard(2, 2, 1, config.layers);
  TrainingOptions o = testing::tiny_options(ScheduleKind::OneFOneB, 2);
  o.low_communication.enabled = true;
  o.low_communication.sync_every = kH;
  o.low_communication.delta_bits = c.bits;
  o.low_communication.delayed = c.delayed;
  o.low_communication.stagger = c.stagger;
  o.low_communication.final_step = kSteps;
  StepWeights seen;
  const RunResult run =
      testing::run_pipeline(config, layout, o, kSteps, seen.hooks(layout, kSteps));
  for (int step = 1; step <= kSteps; ++step) {
    const auto& w = seen.at[step - 1];
    // theta_start is the same everywhere, always.
    EXPECT_TRUE(same(seen.start[step - 1][0], seen.start[step - 1][1])) << "step " << step;
    const bool stage0_synced = step % kH == 0 && !c.delayed;
    if (step == kSteps || (stage0_synced && !c.stagger)) {
      EXPECT_TRUE(same(w[0], w[1])) << "step " << step;
    } else if (step == 1) {
      EXPECT_FALSE(same(w[0], w[1])) << "the replicas trained on the same batches at step 1";
    }
  }
  // The inner steps trained: the loss of the last step is below the first's.
  EXPECT_LT(run.losses[0][kSteps - 1], run.losses[0][0]);
}

INSTANTIATE_TEST_SUITE_P(Modes, LowCommunicationSync,
                         ::testing::Values(SyncCase{"fp32", 32, false, false},
                                           SyncCase{"int8", 8, false, false},
                                           SyncCase{"int4", 4, false, false},
                                           SyncCase{"int8_delayed", 8, true, false},
                                           SyncCase{"int4_delayed_staggered", 4, true, true},
                                           SyncCase{"fp32_staggered", 32, false, true}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(LowCommunicationIslands, InsideAnIslandEveryStepAcrossEveryH) {
  constexpr int kSteps = 4, kH = 2;
  const GptConfig config = testing::tiny_config(4);
  const PipelineLayout layout = PipelineLayout::standard(1, 4, 1, config.layers);
  TrainingOptions o = testing::tiny_options(ScheduleKind::OneFOneB, 2);
  o.low_communication.enabled = true;
  o.low_communication.sync_every = kH;
  o.low_communication.delta_bits = 8;
  o.low_communication.delayed = false;
  o.low_communication.final_step = kSteps;
  StepWeights seen;
  testing::RunHooks hooks = seen.hooks(layout, kSteps);
  hooks.islands.island_of_rank = {"site-a", "site-a", "site-b", "site-b"};
  testing::run_pipeline(config, layout, o, kSteps, hooks);
  for (int step = 1; step <= kSteps; ++step) {
    const auto& w = seen.at[step - 1];
    EXPECT_TRUE(same(w[0], w[1])) << "island a, step " << step;
    EXPECT_TRUE(same(w[2], w[3])) << "island b, step " << step;
    if (step % kH == 0) {
      EXPECT_TRUE(same(w[0], w[2])) << "step " << step;
    } else {
      EXPECT_FALSE(same(w[0], w[2])) << "the islands synced between syncs at step " << step;
    }
  }
}

TEST(LowCommunicationIslands, StagesSplitDifferentlyAreRefused) {
  const GptConfig config = testing::tiny_config(4);
  const PipelineLayout layout = PipelineLayout::standard(2, 2, 1, config.layers);
  TrainingOptions o = testing::tiny_options(ScheduleKind::OneFOneB, 2);
  o.low_communication.enabled = true;
  testing::Comms comms = testing::connect_ranks(testing::tasklet_labels(layout));
  DataParallelIslands islands;
  islands.island_of_rank.assign(4, "");
  islands.island_of_rank[layout.rank(0, 0)] = "a";
  islands.island_of_rank[layout.rank(0, 1)] = "a";
  try {
    StageRuntime runtime(config, layout, o, testing::tiny_corpus(), *comms[0], nullptr,
                         cpu_chunk_factory(), islands);
    FAIL() << "accepted islands that split the stages differently";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("stage 1's differ from stage 0's"), std::string::npos)
        << e.what();
  }
}

TEST(LowCommunicationStop, AVoteStopsAtTheNextVoteStepSynced) {
  constexpr int kH = 3;
  const GptConfig config = testing::tiny_config(4);
  const PipelineLayout layout = PipelineLayout::standard(2, 2, 1, config.layers);
  TrainingOptions o = testing::tiny_options(ScheduleKind::OneFOneB, 2);
  o.low_communication.enabled = true;
  o.low_communication.sync_every = kH;
  o.low_communication.delayed = false;
  testing::Comms comms = testing::connect_ranks(testing::tasklet_labels(layout));
  std::vector<int64_t> stopped(4, 0);
  std::vector<Weights> weights(4);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back([&, rank] {
      StageRuntime runtime(config, layout, o, testing::tiny_corpus(), *comms[rank]);
      for (int step = 1; step <= 10; ++step) {
        // Rank 3 asks to stop from step 4 on: the vote of step 6 stops everyone there.
        if (runtime.train_step(rank == 3 && step >= 4).stop) {
          stopped[rank] = step;
          break;
        }
      }
      testing::collect_weights(runtime, weights[rank]);
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(stopped[rank], 6) << "rank " << rank;
  EXPECT_EQ(weights[layout.rank(0, 0)], weights[layout.rank(0, 1)]);
  EXPECT_EQ(weights[layout.rank(1, 0)], weights[layout.rank(1, 1)]);
}

nlohmann::json job_with(const nlohmann::json& data_parallel) {
  nlohmann::json job = nlohmann::json::parse(R"({
    "format_version": 1,
    "workload": {"model": {"layers": 4, "hidden": 32, "heads": 4, "seq_len": 16, "vocab": 256,
                           "precision": "fp32"},
                 "training": {"micro_batch": 2, "global_batch": 8}},
    "training": {"steps": 30, "optimizer": "sgd"},
    "data": {"kind": "synthetic"},
    "schedule": {"kind": "1f1b"},
    "pipeline": {"stages": 1, "replicas": 2},
    "ranks": [{"stage": 0, "replica": 0, "host": "127.0.0.1", "port": 4000},
              {"stage": 0, "replica": 1, "host": "127.0.0.1", "port": 4001}]
  })");
  if (!data_parallel.is_null()) job["data_parallel"] = data_parallel;
  return job;
}

TEST(LowCommunicationJobFile, ParsesTheModeAndWritesItBack) {
  const nlohmann::json dp = {{"mode", "low-communication"},
                             {"sync_every", 10},
                             {"delta_bits", 4},
                             {"outer_learning_rate", 0.5},
                             {"outer_momentum", 0.8},
                             {"nesterov", false},
                             {"delayed", false},
                             {"stagger", true}};
  const JobSpec job = parse_job_spec(job_with(dp).dump(), "job.json");
  const LowCommunication& l = job.training.low_communication;
  EXPECT_TRUE(l.enabled);
  EXPECT_EQ(l.sync_every, 10);
  EXPECT_EQ(l.delta_bits, 4);
  EXPECT_FLOAT_EQ(l.outer_learning_rate, 0.5f);
  EXPECT_FLOAT_EQ(l.outer_momentum, 0.8f);
  EXPECT_FALSE(l.nesterov);
  EXPECT_FALSE(l.delayed);
  EXPECT_TRUE(l.stagger);
  EXPECT_EQ(l.final_step, 30);
  EXPECT_EQ(job.training.optimizer, InnerOptimizer::kSgd);

  const JobSpec plain = parse_job_spec(job_with(nullptr).dump(), "job.json");
  EXPECT_FALSE(plain.training.low_communication.enabled);
  EXPECT_FALSE(parse_job_spec(job_with({{"mode", "synchronous"}}).dump(), "job.json")
                   .training.low_communication.enabled);
}

TEST(LowCommunicationJobFile, ErrorsNameTheField) {
  const auto low = [](nlohmann::json extra) {
    extra["mode"] = "low-communication";
    return extra;
  };
  EXPECT_EQ(error_of(job_with({{"mode", "fast"}})),
            "job.json: data_parallel.mode: must be \"synchronous\" or \"low-communication\", got "
            "\"fast\"");
  EXPECT_EQ(error_of(job_with(low({{"sync_every", 0}}))),
            "job.json: data_parallel.sync_every: must be in [1, 10000], got 0");
  EXPECT_EQ(error_of(job_with(low({{"delta_bits", 16}}))),
            "job.json: data_parallel.delta_bits: must be 32, 8 or 4, got 16.000000");
  EXPECT_EQ(error_of(job_with(low({{"outer_momentum", 1.0}}))),
            "job.json: data_parallel.outer_momentum: must be in [0, 1), got 1.000000");
  EXPECT_EQ(error_of(job_with(low({{"outer_learning_rate", 0}}))),
            "job.json: data_parallel.outer_learning_rate: must be finite and > 0, got 0.000000");
  EXPECT_EQ(error_of(job_with(low({{"window", 3}}))),
            "job.json: data_parallel.window: unknown field");
  EXPECT_EQ(error_of(job_with({{"mode", "synchronous"}, {"sync_every", 3}})),
            "job.json: data_parallel.sync_every: unknown field");
  nlohmann::json bad_optimizer = job_with(nullptr);
  bad_optimizer["training"]["optimizer"] = "lion";
  EXPECT_EQ(error_of(bad_optimizer),
            "job.json: training.optimizer: must be \"adamw\" or \"sgd\", got \"lion\"");
  // Checkpoints hold the outer state (checkpoint_outer_state.h): the mode takes a checkpoint dir.
  nlohmann::json with_checkpoint = job_with(low({}));
  with_checkpoint["checkpoint"] = {{"dir", "ckpt"}, {"interval", 3}};
  EXPECT_EQ(error_of(with_checkpoint), "");
}

}  // namespace
}  // namespace tessel::stage
