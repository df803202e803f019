// The executor's behaviour beyond the maths: communication overlapping computation (seen in
// the measured trace), the model learning the synthetic corpus, the stop vote, a peer that
// dies, and configurations it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "noderuntime/transport/transport_error.h"
#include "stage_test_support.h"

namespace tessel::stage {
namespace {

using placement::ScheduleKind;

const TraceEvent& find_event(const StepTrace& trace, const std::string& name) {
  for (const TraceEvent& e : trace.events()) {
    if (e.name == name) return e;
  }
  throw std::runtime_error("no trace event '" + name + "' on rank " + std::to_string(trace.rank()));
}

// Start of the earliest all-reduce bucket and end of the last backward of one rank's step.
struct StepShape {
  double first_all_reduce_start = std::numeric_limits<double>::max();
  double last_backward_end = 0;
  int all_reduces = 0;
};

StepShape shape_of(const StepTrace& trace) {
  StepShape shape;
  for (const TraceEvent& e : trace.events()) {
    if (e.stream == placement::Stream::OptimizerComm) {
      shape.first_all_reduce_start = std::min(shape.first_all_reduce_start, e.start_s);
      ++shape.all_reduces;
    }
    if (e.stream == placement::Stream::BackwardCompute) {
      shape.last_backward_end = std::max(shape.last_backward_end, e.end_s);
    }
  }
  return shape;
}

std::vector<StepTrace> traced_step(const PipelineLayout& layout, bool overlap) {
  const GptConfig config = testing::tiny_config(4);
  TrainingOptions options = testing::tiny_options(ScheduleKind::OneFOneB, 4);
  options.overlap = overlap;
  std::vector<StepTrace> traces;
  for (int rank = 0; rank < layout.world_size(); ++rank) traces.emplace_back(rank, "rank");
  testing::RunHooks hooks;
  hooks.traces = &traces;
  testing::run_pipeline(config, layout, options, 1, hooks);
  return traces;
}

TEST(Runtime, OverlapStartsBucketsDuringTheLastBackwardAndPostsReceivesEarly) {
  const PipelineLayout layout = PipelineLayout::standard(2, 2, 1, 4);
  const std::vector<StepTrace> traces = traced_step(layout, true);
  for (const StepTrace& trace : traces) {
    const StepShape shape = shape_of(trace);
    // Stage 0: wpe, 2 blocks, the tie of wte with stage 1, then wte's all-reduce; stage 1:
    // 2 blocks, ln_f, the tie of lm_head with stage 0, then lm_head's all-reduce.
    EXPECT_EQ(shape.all_reduces, 5) << "rank " << trace.rank();
    EXPECT_LT(shape.first_all_reduce_start, shape.last_backward_end) << "rank " << trace.rank();
    const bool first = layout.tasklet_of(trace.rank()).stage == 0;
    const std::string table = first ? "c0 wte" : "c0 lm_head";
    EXPECT_LE(find_event(trace, "tie " + table).end_s,
              find_event(trace, "all-reduce " + table).start_s)
        << "rank " << trace.rank();
  }
  // Stage 1 posts the receive of micro-batch 1 before it starts the backward of micro-batch 0.
  const StepTrace& last = traces[layout.rank(1, 0)];
  EXPECT_LT(find_event(last, "recv F mb1 c0").start_s, find_event(last, "B mb0 c0").start_s);
  // Every event was seen to complete and nests in the step.
  for (const TraceEvent& e : last.events()) EXPECT_GE(e.end_s, e.start_s) << e.name;
  const auto json = StepTrace::chrome_json({&traces[0], &traces[1]});
  EXPECT_EQ(json["traceEvents"][0]["args"]["name"], "rank (rank 0)");
}

TEST(Runtime, WithoutOverlapEveryCommunicationWaitsItsTurn) {
  const PipelineLayout layout = PipelineLayout::standard(2, 2, 1, 4);
  const std::vector<StepTrace> traces = traced_step(layout, false);
  for (const StepTrace& trace : traces) {
    const StepShape shape = shape_of(trace);
    EXPECT_EQ(shape.all_reduces, 5);  // as above
    EXPECT_GE(shape.first_all_reduce_start, shape.last_backward_end) << "rank " << trace.rank();
  }
  const StepTrace& last = traces[layout.rank(1, 0)];
  EXPECT_GT(find_event(last, "recv F mb1 c0").start_s, find_event(last, "B mb0 c0").end_s);
}

TEST(Runtime, ShapedLinksSlowTheStepButLeaveTheMathsBitIdentical) {
  const GptConfig config = testing::tiny_config(4);
  const PipelineLayout layout = PipelineLayout::standard(2, 1, 1, 4);
  const TrainingOptions options = testing::tiny_options(ScheduleKind::OneFOneB, 2);
  const testing::RunResult fast = testing::run_pipeline(config, layout, options, 2);
  testing::RunHooks hooks;
  hooks.links = transport::LinkEmulator::uniform(2, {0, 0.025});  // 25 ms each way
  const testing::RunResult slow = testing::run_pipeline(config, layout, options, 2, hooks);
  EXPECT_EQ(slow.losses, fast.losses);
  for (const auto& [name, values] : fast.weights[0]) EXPECT_EQ(slow.weights[0].at(name), values);
  // A step crosses the link at least 2 m = 4 times one after the other (activation, then the
  // gradient that answers it), and stage 0 spends that time waiting.
  const StepReport& first = slow.reports[0][1];
  EXPECT_GT(first.step_s, 4 * 0.025);
  EXPECT_GT(first.network_wait_s, 2 * 0.025);
  EXPECT_GT(first.bubble_fraction, 0.5);
}

TEST(Runtime, LearnsTheSyntheticCorpus) {
  const GptConfig config{2, 32, 4, 128, 32, 256};
  TrainingOptions options = testing::tiny_options(ScheduleKind::OneFOneB, 2);
  options.micro_batch = 4;
  options.adamw.learning_rate = 3e-3f;
  options.adamw.weight_decay = 0.0f;
  const testing::RunResult run =
      testing::run_pipeline(config, PipelineLayout::standard(2, 1, 1, 2), options, 120);
  const double entropy = testing::tiny_corpus().unigram_entropy();
  EXPECT_GT(run.losses[0].front(), 5.0);  // about ln 256 at the start
  double last = 0;
  for (int s = 110; s < 120; ++s) last += run.losses[0][s] / 10;
  EXPECT_LT(last, entropy - 0.5) << "unigram entropy " << entropy;
}

TEST(Runtime, ARanksStopVoteStopsEveryRankAfterTheSameStep) {
  const PipelineLayout layout = PipelineLayout::standard(2, 2, 1, 4);
  testing::Comms comms = testing::connect_ranks(testing::tasklet_labels(layout));
  std::vector<std::vector<bool>> stops(layout.world_size());
  testing::RunHooks hooks;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    threads.emplace_back([&, rank] {
      StageRuntime runtime(testing::tiny_config(4), layout,
                           testing::tiny_options(ScheduleKind::GPipe, 2), testing::tiny_corpus(),
                           *comms[rank]);
      for (int s = 0; s < 3; ++s)
        stops[rank].push_back(runtime.train_step(rank == 3 && s == 1).stop);
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    EXPECT_EQ(stops[rank], (std::vector<bool>{false, true, false})) << "rank " << rank;
  }
}

TEST(Runtime, APeerThatDiesFailsTheStepNamingItsStageAndReplica) {
  const PipelineLayout layout = PipelineLayout::standard(2, 1, 1, 4);
  testing::Comms comms = testing::connect_ranks(testing::tasklet_labels(layout));
  std::string error;
  std::thread survivor([&] {
    StageRuntime runtime(testing::tiny_config(4), layout,
                         testing::tiny_options(ScheduleKind::OneFOneB, 2), testing::tiny_corpus(),
                         *comms[0]);
    try {
      for (int s = 0; s < 3; ++s) runtime.train_step();
    } catch (const transport::TransportError& e) {
      error = e.what();
    }
  });
  {
    StageRuntime runtime(testing::tiny_config(4), layout,
                         testing::tiny_options(ScheduleKind::OneFOneB, 2), testing::tiny_corpus(),
                         *comms[1]);
    runtime.train_step();
    comms[1]->close();  // the process of stage 1 is gone
  }
  survivor.join();
  EXPECT_NE(error.find("stage 1 replica 0"), std::string::npos) << error;
}

TEST(Runtime, RefusesConfigurationsItCannotRun) {
  const GptConfig config = testing::tiny_config(4);
  const PipelineLayout layout = PipelineLayout::standard(2, 1, 1, 4);
  testing::Comms comms = testing::connect_ranks({"a"});
  auto error_of = [&](const PipelineLayout& l, const TrainingOptions& o) -> std::string {
    try {
      StageRuntime runtime(config, l, o, testing::tiny_corpus(), *comms[0]);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of(layout, testing::tiny_options(ScheduleKind::OneFOneB, 2)),
            "ranks: the communicator has 1 ranks, stages x replicas is 2");
  PipelineLayout one = PipelineLayout::standard(1, 1, 1, 4);
  EXPECT_EQ(error_of(one, testing::tiny_options(ScheduleKind::Interleaved, 2)),
            "schedule: interleaved schedule (p=1, m=2, v=1): the interleaved schedule needs at "
            "least 2 stages");
  TrainingOptions bad = testing::tiny_options(ScheduleKind::OneFOneB, 2);
  bad.grad_clip = -1;
  EXPECT_NE(error_of(one, bad).find("training.grad_clip"), std::string::npos);
  one.layer_split = {3};
  EXPECT_EQ(error_of(one, testing::tiny_options(ScheduleKind::OneFOneB, 2)),
            "layer_split: sums to 3 layers, the model has 4");
}

}  // namespace
}  // namespace tessel::stage
