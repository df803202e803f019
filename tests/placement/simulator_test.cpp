// The discrete-event simulator of one iteration, its Chrome trace, and the closed-form model
// checked against it: exact bubble formulas, overlap effects, and agreement over a random grid.
#include "placement/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "placement/chrome_trace.h"
#include "placement/iteration_model.h"
#include "placement/schedule.h"

namespace tessel::placement {
namespace {

int hops_for(ScheduleKind kind, int p) { return kind == ScheduleKind::Interleaved ? p : p - 1; }

PipelineTiming uniform_timing(ScheduleKind kind, int p, double forward_s, double backward_s) {
  PipelineTiming timing;
  timing.stages.assign(p, {forward_s, backward_s, 0});
  timing.hops.assign(hops_for(kind, p), {});
  return timing;
}

std::string describe(const ScheduleSpec& spec, const PipelineTiming& timing) {
  std::string text =
      std::string(to_string(spec.kind)) + " p=" + std::to_string(spec.stages) +
      " m=" + std::to_string(spec.micro_batches) + " v=" + std::to_string(spec.chunks) +
      (spec.microbatch_group > 0 ? " G=" + std::to_string(spec.microbatch_group) : "") +
      (timing.overlap ? " overlap" : " blocking") +
      " buckets=" + std::to_string(timing.allreduce_buckets) + "\n   stages (f b ar):";
  char buffer[96];
  for (const StageTiming& stage : timing.stages) {
    std::snprintf(buffer, sizeof buffer, " (%.3f %.3f %.3f)", stage.forward_s, stage.backward_s,
                  stage.allreduce_s);
    text += buffer;
  }
  text += "\n   hops (latency transfer):";
  for (const HopTiming& hop : timing.hops) {
    std::snprintf(buffer, sizeof buffer, " (%.3f %.3f)", hop.latency_s, hop.transfer_s);
    text += buffer;
  }
  return text;
}

// The grid the closed form must match: p in 1..8 (2..8 interleaved), m in {1,2,4,8,16,32}
// (interleaved: rounded up to a multiple of p, which it requires), v in 2..4, forward times of
// the stages within 2x of each other (0.05-0.4 s), backward within 2x of twice that, hop latency
// 0-200 ms, transfer 0-2x the mean stage time f+b, all-reduce 0-2x and optimizer 0-0.5x of it,
// 1-8 buckets, overlap on or off.
struct Config {
  ScheduleSpec spec;
  PipelineTiming timing;
};

Config random_config(std::mt19937_64& rng, ScheduleKind kind) {
  std::uniform_real_distribution<double> unit(0, 1);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  static constexpr int kMicroBatches[] = {1, 2, 4, 8, 16, 32};
  Config config;
  ScheduleSpec& spec = config.spec;
  spec.kind = kind;
  spec.stages = pick(kind == ScheduleKind::Interleaved ? 2 : 1, 8);
  spec.micro_batches = kMicroBatches[pick(0, 5)];
  if (kind == ScheduleKind::Interleaved) {
    spec.chunks = pick(2, 4);
    spec.micro_batches = (spec.micro_batches + spec.stages - 1) / spec.stages * spec.stages;
  }
  PipelineTiming& timing = config.timing;
  const double base_s = 0.05 + 0.15 * unit(rng);
  double mean_stage_s = 0;
  for (int j = 0; j < spec.stages; ++j) {
    StageTiming stage;
    stage.forward_s = base_s * (1 + unit(rng));
    stage.backward_s = 2 * base_s * (1 + unit(rng));
    mean_stage_s += (stage.forward_s + stage.backward_s) / spec.stages;
    timing.stages.push_back(stage);
  }
  for (StageTiming& stage : timing.stages) stage.allreduce_s = 2 * mean_stage_s * unit(rng);
  for (int h = 0; h < hops_for(kind, spec.stages); ++h) {
    const double latency_s = 0.2 * unit(rng);
    timing.hops.push_back({latency_s, 2 * mean_stage_s * unit(rng)});
  }
  timing.optimizer_s = 0.5 * mean_stage_s * unit(rng);
  timing.overlap = unit(rng) < 0.5;
  timing.allreduce_buckets = pick(1, 8);
  return config;
}

TEST(Simulator, UniformStagesWithoutCommunicationHaveTheTextbookBubble) {
  const double f = 0.3, b = 0.7;
  for (int p = 1; p <= 8; ++p) {
    for (int m : {1, 2, 3, 4, 8, 16}) {
      for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
        const ScheduleSpec spec{kind, p, m, 1};
        const SimulationResult result = simulate_iteration(spec, uniform_timing(kind, p, f, b));
        EXPECT_NEAR(result.iteration_s, (m + p - 1) * (f + b), 1e-9) << to_string(kind);
        EXPECT_NEAR(result.bubble_fraction, (p - 1.0) / (m + p - 1), 1e-12);
      }
    }
  }
}

// Megatron's bubble, (p-1)/(v*m) of the ideal time m(f+b). With equal chunks and free messages
// rank p-1 starts after p-1 chunk forwards ((p-1)f/v), is never idle until its last backward,
// and p-1 chunk backwards ((p-1)b/v) follow that, so the simulator must reproduce it exactly.
TEST(Simulator, InterleavedBubbleIsMegatronsFormula) {
  const double f = 0.2, b = 0.5;
  for (int p = 2; p <= 8; ++p) {
    for (int groups : {1, 2, 4}) {
      for (int v = 2; v <= 4; ++v) {
        const int m = groups * p;
        const ScheduleSpec spec{ScheduleKind::Interleaved, p, m, v};
        const SimulationResult result =
            simulate_iteration(spec, uniform_timing(spec.kind, p, f, b));
        const double ideal = m * (f + b);
        EXPECT_NEAR((result.iteration_s - ideal) / ideal, (p - 1.0) / (v * m), 1e-9)
            << "p=" << p << " m=" << m << " v=" << v;
        EXPECT_NEAR(result.bubble_fraction, 1 - ideal / result.iteration_s, 1e-12);
      }
    }
  }
}

TEST(Simulator, OverlapIsNeverSlowerThanBlocking) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 150; ++i) {
    const auto kind = static_cast<ScheduleKind>(i % 3);
    Config config = random_config(rng, kind);
    config.timing.overlap = true;
    const double overlapped = simulate_iteration(config.spec, config.timing).iteration_s;
    config.timing.overlap = false;
    const double blocking = simulate_iteration(config.spec, config.timing).iteration_s;
    EXPECT_LE(overlapped, blocking * (1 + 1e-12)) << describe(config.spec, config.timing);
  }
}

TEST(Simulator, OverlapIsStrictlyFasterWhenCommunicationIsHeavy) {
  const ScheduleSpec spec{ScheduleKind::OneFOneB, 4, 8, 1};
  PipelineTiming timing = uniform_timing(spec.kind, 4, 0.1, 0.2);
  timing.hops.assign(3, {0.02, 0.2});  // each message takes 2/3 of a stage's f+b
  timing.overlap = true;
  const double overlapped = simulate_iteration(spec, timing).iteration_s;
  timing.overlap = false;
  const double blocking = simulate_iteration(spec, timing).iteration_s;
  EXPECT_LT(overlapped, 0.95 * blocking);  // 6.82 s against 7.48 s
}

// One stage, one micro-batch: forward 1 s, backward 2 s (1..3), all-reduce 4 s in 4 buckets
// released at 1.5, 2, 2.5 and 3 s and queued 1 s each: done at 5.5 s instead of 3 + 4.
TEST(Simulator, BucketedAllReduceHidesPartOfItBehindTheLastBackward) {
  const ScheduleSpec spec{ScheduleKind::OneFOneB, 1, 1, 1};
  PipelineTiming timing;
  timing.stages = {{1.0, 2.0, 4.0}};
  timing.optimizer_s = 0.25;
  timing.allreduce_buckets = 4;
  timing.overlap = true;
  EXPECT_DOUBLE_EQ(simulate_iteration(spec, timing).iteration_s, 5.75);
  timing.allreduce_buckets = 1;  // one bucket is released only at the end of the backward
  EXPECT_DOUBLE_EQ(simulate_iteration(spec, timing).iteration_s, 7.25);
  timing.overlap = false;
  timing.allreduce_buckets = 4;
  EXPECT_DOUBLE_EQ(simulate_iteration(spec, timing).iteration_s, 7.25);
}

Stream stream_of(Op op) {
  switch (op) {
    case Op::Forward:
      return Stream::ForwardCompute;
    case Op::Backward:
      return Stream::BackwardCompute;
    case Op::SendActivation:
      return Stream::ForwardSend;
    case Op::RecvActivation:
      return Stream::ForwardRecv;
    case Op::SendGradient:
      return Stream::BackwardSend;
    case Op::RecvGradient:
      return Stream::BackwardRecv;
    case Op::AllReduce:
      return Stream::OptimizerComm;
    case Op::OptimizerStep:
      return Stream::OptimizerStep;
  }
  return Stream::OptimizerStep;
}

TEST(Simulator, RecordsOneEventPerInstructionAndOnePerBucket) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 30; ++i) {
    const Config config = random_config(rng, static_cast<ScheduleKind>(i % 3));
    const SimulationResult result = simulate_iteration(config.spec, config.timing);
    std::map<std::pair<int, Stream>, int> expected, recorded;
    const auto lists = generate_schedule(config.spec);
    for (int rank = 0; rank < config.spec.stages; ++rank) {
      for (const Instruction& instruction : lists[rank]) {
        const bool buckets = instruction.op == Op::AllReduce && config.timing.overlap;
        expected[{rank, stream_of(instruction.op)}] +=
            buckets ? config.timing.allreduce_buckets : 1;
      }
    }
    for (const TimedEvent& event : result.events) ++recorded[{event.rank, event.stream}];
    EXPECT_EQ(recorded, expected) << describe(config.spec, config.timing);
  }
}

TEST(Simulator, ComputeNeverOverlapsOnARankAndEverythingEndsByTheIteration) {
  std::mt19937_64 rng(6);
  for (int i = 0; i < 60; ++i) {
    const Config config = random_config(rng, static_cast<ScheduleKind>(i % 3));
    const SimulationResult result = simulate_iteration(config.spec, config.timing);
    for (int rank = 0; rank < config.spec.stages; ++rank) {
      std::vector<std::pair<double, double>> compute;
      double busy = 0;
      for (const TimedEvent& event : result.events) {
        EXPECT_LE(event.start_s + event.duration_s, result.iteration_s * (1 + 1e-12));
        if (event.rank != rank) continue;
        if (event.stream == Stream::ForwardCompute || event.stream == Stream::BackwardCompute) {
          compute.emplace_back(event.start_s, event.start_s + event.duration_s);
          busy += event.duration_s;
        }
      }
      for (size_t k = 1; k < compute.size(); ++k) {
        EXPECT_GE(compute[k].first, compute[k - 1].second - 1e-12) << "rank " << rank;
      }
      EXPECT_NEAR(result.compute_busy_s[rank], busy, 1e-9);
    }
  }
}

TEST(Simulator, NetworkWaitIsZeroWithoutCommunication) {
  const ScheduleSpec spec{ScheduleKind::OneFOneB, 4, 8, 1};
  PipelineTiming timing = uniform_timing(spec.kind, 4, 0.1, 0.2);
  for (double wait : simulate_iteration(spec, timing).network_wait_s) EXPECT_EQ(wait, 0);
  timing.hops.assign(3, {0.1, 0.05});
  const SimulationResult slow = simulate_iteration(spec, timing);
  EXPECT_GT(*std::max_element(slow.network_wait_s.begin(), slow.network_wait_s.end()), 0.1);
}

TEST(Simulator, RejectsTimingThatDoesNotFitTheSpec) {
  const ScheduleSpec spec{ScheduleKind::Interleaved, 2, 2, 2};
  PipelineTiming timing = uniform_timing(spec.kind, 2, 0.1, 0.2);
  EXPECT_NO_THROW(simulate_iteration(spec, timing));
  PipelineTiming no_wrap = timing;
  no_wrap.hops.pop_back();  // interleaved needs the wrap hop from rank p-1 to rank 0
  EXPECT_THROW(simulate_iteration(spec, no_wrap), std::invalid_argument);
  PipelineTiming three_stages = timing;
  three_stages.stages.push_back({});
  EXPECT_THROW(simulate_iteration(spec, three_stages), std::invalid_argument);
  PipelineTiming negative = timing;
  negative.hops[0].latency_s = -1;
  EXPECT_THROW(simulate_iteration(spec, negative), std::invalid_argument);
  PipelineTiming no_buckets = timing;
  no_buckets.allreduce_buckets = 0;
  EXPECT_THROW(simulate_iteration(spec, no_buckets), std::invalid_argument);
  EXPECT_THROW(predict_iteration_s(spec, no_wrap), std::invalid_argument);
}

TEST(IterationModel, UniformStagesWithoutCommunicationAreExact) {
  const double f = 0.3, b = 0.6;
  for (int p = 1; p <= 8; ++p) {
    for (int m : {1, 2, 4, 8, 16}) {
      for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
        const ScheduleSpec spec{kind, p, m, 1};
        EXPECT_NEAR(predict_iteration_s(spec, uniform_timing(kind, p, f, b)), (m + p - 1) * (f + b),
                    1e-9);
      }
      for (int v = 2; v <= 4 && p > 1; ++v) {
        const ScheduleSpec spec{ScheduleKind::Interleaved, p, m * p, v};
        EXPECT_NEAR(predict_iteration_s(spec, uniform_timing(spec.kind, p, f, b)),
                    (m * p + (p - 1.0) / v) * (f + b), 1e-9);
      }
    }
  }
}

// |closed form / simulator - 1| over `cases` random configurations of one schedule kind, sorted;
// prints the percentiles and the worst configurations.
std::vector<double> relative_errors(ScheduleKind kind, int cases, uint64_t seed,
                                    Config (*draw)(std::mt19937_64&,
                                                   ScheduleKind) = random_config) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<double, std::string>> errors;
  for (int i = 0; i < cases; ++i) {
    const Config config = draw(rng, kind);
    const double simulated = simulate_iteration(config.spec, config.timing).iteration_s;
    const double predicted = predict_iteration_s(config.spec, config.timing);
    char header[96];
    std::snprintf(header, sizeof header, "%+.2f%% (model %.3f s, simulator %.3f s) ",
                  100 * (predicted / simulated - 1), predicted, simulated);
    errors.emplace_back(std::abs(predicted / simulated - 1),
                        header + describe(config.spec, config.timing));
  }
  std::sort(errors.begin(), errors.end());
  auto at = [&](double q) { return 100 * errors[static_cast<size_t>(q * (cases - 1))].first; };
  std::printf("%s over %d cases: median %.2f%%, 95th %.2f%%, 99th %.2f%%, worst %.2f%%\n",
              to_string(kind), cases, at(0.5), at(0.95), at(0.99), at(1.0));
  for (size_t k = errors.size() - std::min<size_t>(3, errors.size()); k < errors.size(); ++k) {
    std::printf("  %s\n", errors[k].second.c_str());
  }
  std::vector<double> sorted;
  for (const auto& [error, text] : errors) sorted.push_back(error);
  return sorted;
}

double fraction_within(const std::vector<double>& errors, double bound) {
  return static_cast<double>(std::count_if(errors.begin(), errors.end(),
                                           [&](double error) { return error <= bound; })) /
         static_cast<double>(errors.size());
}

TEST(IterationModel, GPipeIsExactOnTheRandomGrid) {
  const std::vector<double> errors = relative_errors(ScheduleKind::GPipe, 1000, 21);
  EXPECT_LT(errors.back(), 1e-9);
}

// The pipeline part is the longest of exact path lengths, so it can only underestimate; the
// per-rank all-reduce tails move it a little either way. Measured here: median 0, 99th
// percentile 0.9%, worst 2.0% (5 other seeds of 1000-3000 cases: the same).
TEST(IterationModel, OneFOneBIsWithinTwoPercentOfTheSimulator) {
  const std::vector<double> errors = relative_errors(ScheduleKind::OneFOneB, 1000, 22);
  EXPECT_GE(fraction_within(errors, 0.015), 0.99);
  EXPECT_LT(errors.back(), 0.05);
}

// Measured here: median 0, 95th percentile 4.9%, 99th 7.4%, worst 13%; over 5 other seeds of
// 1000 cases the 95th percentile stays under 6%, the 99th under 9% and the worst under 18%. The
// misses are mostly m = p, where warm-up chains and partial round trips of the interleaved
// order are only approximately accounted for.
TEST(IterationModel, InterleavedIsWithinSevenPercentOfTheSimulator) {
  const std::vector<double> errors = relative_errors(ScheduleKind::Interleaved, 1000, 23);
  EXPECT_GE(fraction_within(errors, 0.07), 0.95);
  EXPECT_GE(fraction_within(errors, 0.12), 0.99);
  EXPECT_LT(errors.back(), 0.20);
}

// The grid with the micro-batch counts of real runs (64 or 128 per replica; interleaved
// rounded up to a multiple of p), where the steady state dominates.
Config random_long_config(std::mt19937_64& rng, ScheduleKind kind) {
  Config config = random_config(rng, kind);
  ScheduleSpec& spec = config.spec;
  spec.micro_batches = std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? 64 : 128;
  if (kind == ScheduleKind::Interleaved) {
    spec.micro_batches = (spec.micro_batches + spec.stages - 1) / spec.stages * spec.stages;
  }
  return config;
}

// Measured here: 1F1B worst 0.6%; interleaved 95th percentile 3.6%, worst 10%.
TEST(IterationModel, StaysCloseForLongSteadyStates) {
  const std::vector<double> one_f_one_b =
      relative_errors(ScheduleKind::OneFOneB, 150, 25, random_long_config);
  EXPECT_LT(one_f_one_b.back(), 0.02);
  const std::vector<double> interleaved =
      relative_errors(ScheduleKind::Interleaved, 150, 26, random_long_config);
  EXPECT_GE(fraction_within(interleaved, 0.07), 0.95);
  EXPECT_LT(interleaved.back(), 0.15);
}

// The grid's interleaved configuration with m redrawn in [p, 4p) and a micro-batch group G in
// [p, m] that Megatron accepts (m mod G = 0 or >= p), so that groups need not be p or divide m.
Config random_grouped_config(std::mt19937_64& rng, ScheduleKind kind) {
  Config config = random_config(rng, kind);
  ScheduleSpec& spec = config.spec;
  while (true) {
    spec.micro_batches = std::uniform_int_distribution<int>(spec.stages, 4 * spec.stages - 1)(rng);
    const int group = std::uniform_int_distribution<int>(spec.stages, spec.micro_batches)(rng);
    spec.microbatch_group = group == spec.stages ? 0 : group;
    const int last_group = spec.micro_batches % group;
    if (last_group == 0 || last_group >= spec.stages) return config;
  }
}

// Groups other than p (Megatron's microbatch_group_size_per_vp_stage) are modelled with the
// same index bookkeeping, which assumes full groups of p; measured here: 95th percentile 8%,
// worst 17% (other seeds: worst up to 35%). The placement search uses the default G = p.
TEST(IterationModel, InterleavedWithOtherMicroBatchGroupsIsLessAccurate) {
  const std::vector<double> errors =
      relative_errors(ScheduleKind::Interleaved, 500, 24, random_grouped_config);
  EXPECT_GE(fraction_within(errors, 0.10), 0.90);
  EXPECT_LT(errors.back(), 0.40);
}

TEST(ChromeTrace, HasAnEventPerSimulatedEventAndDtFmNames) {
  const ScheduleSpec spec{ScheduleKind::Interleaved, 2, 2, 2};
  PipelineTiming timing = uniform_timing(spec.kind, 2, 0.1, 0.2);
  timing.hops.assign(2, {0.01, 0.02});
  timing.stages[0].allreduce_s = 0.4;
  const SimulationResult result = simulate_iteration(spec, timing);
  const nlohmann::json trace = nlohmann::json::parse(chrome_trace_json(result).dump());
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  int complete = 0;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    const std::string ph = event.at("ph");
    if (ph == "M" && event.at("name") == "process_name") {
      processes[event.at("pid")] = event.at("args").at("name");
    } else if (ph == "M" && event.at("name") == "thread_name") {
      threads[{event.at("pid"), event.at("tid")}] = event.at("args").at("name");
    } else if (ph == "X") {
      ++complete;
      EXPECT_TRUE(threads.count({event.at("pid"), event.at("tid")}));
    }
  }
  EXPECT_EQ(complete, static_cast<int>(result.events.size()));
  EXPECT_EQ(processes, (std::map<int, std::string>{{0, "stage 0"}, {1, "stage 1"}}));
  for (const char* name :
       {"1. forward-recv", "2. forward-compute", "3. forward-send", "4. backward-recv",
        "5. backward-compute", "6. backward-send", "7. optimizer-comm", "8. optimizer-step"}) {
    EXPECT_EQ(threads.at({0, name[0] - '0'}), name);
  }
  const TimedEvent& first = result.events.front();
  const nlohmann::json& x =
      *std::find_if(trace.at("traceEvents").begin(), trace.at("traceEvents").end(),
                    [](const nlohmann::json& event) { return event.at("ph") == "X"; });
  EXPECT_EQ(x.at("name"), first.name);
  EXPECT_DOUBLE_EQ(x.at("ts").get<double>(), first.start_s * 1e6);
  EXPECT_DOUBLE_EQ(x.at("dur").get<double>(), first.duration_s * 1e6);
}

TEST(ChromeTrace, ComputeEventsAreMonotoneAndDisjointPerThread) {
  std::mt19937_64 rng(8);
  for (int i = 0; i < 12; ++i) {
    const Config config = random_config(rng, static_cast<ScheduleKind>(i % 3));
    const nlohmann::json trace = chrome_trace_json(simulate_iteration(config.spec, config.timing));
    std::map<std::pair<int, int>, double> end_us;  // (pid, tid) -> end of the previous event
    for (const nlohmann::json& event : trace.at("traceEvents")) {
      const int tid = event.at("tid");
      if (event.at("ph") != "X" || (tid != 2 && tid != 5 && tid != 8)) continue;
      const auto key = std::make_pair(event.at("pid").get<int>(), tid);
      const double ts = event.at("ts"), dur = event.at("dur");
      if (end_us.count(key)) {
        EXPECT_GE(ts, end_us[key] - 1e-6) << describe(config.spec, config.timing);
      }
      end_us[key] = ts + dur;
    }
  }
}

TEST(ChromeTrace, WritesAFileAndNamesAPathItCannotWrite) {
  const ScheduleSpec spec{ScheduleKind::OneFOneB, 2, 2, 1};
  const SimulationResult result = simulate_iteration(spec, uniform_timing(spec.kind, 2, 0.1, 0.2));
  const std::string path =
      (std::filesystem::temp_directory_path() / "tessel_chrome_trace_test.json").string();
  write_chrome_trace(result, path);
  std::ifstream in(path);
  EXPECT_EQ(nlohmann::json::parse(in), chrome_trace_json(result));
  std::filesystem::remove(path);
  const std::string bad = "/nonexistent-dir/trace.json";
  try {
    write_chrome_trace(result, bad);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find(bad), std::string::npos);
  }
}

}  // namespace
}  // namespace tessel::placement

namespace tessel::placement {
namespace {

TEST(Simulator, TheWorldSumMakesEveryRankStepTogetherOneRoundLater) {
  const ScheduleSpec spec{ScheduleKind::OneFOneB, 4, 8, 1};
  PipelineTiming timing = uniform_timing(spec.kind, 4, 0.1, 0.2);
  timing.optimizer_s = 0.01;
  const SimulationResult alone = simulate_iteration(spec, timing);
  timing.world_sync_s = 0.05;
  const SimulationResult synced = simulate_iteration(spec, timing);
  EXPECT_NEAR(synced.iteration_s, alone.iteration_s + 0.05, 1e-12);
  EXPECT_NEAR(predict_iteration_s(spec, timing), synced.iteration_s, 1e-9);
  std::vector<double> steps;
  for (const TimedEvent& e : synced.events) {
    if (e.stream == Stream::OptimizerStep) steps.push_back(e.start_s);
  }
  ASSERT_EQ(steps.size(), 4u);
  for (double start : steps) EXPECT_DOUBLE_EQ(start, steps.front());
  // The last stage finished first and waited for the others: the network held it.
  EXPECT_GT(synced.network_wait_s[3], alone.network_wait_s[3] + 0.05);
}

TEST(Simulator, TheTiedTableIsSummedAfterTheFirstStagesLastBackwardThenAllReduced) {
  const ScheduleSpec spec{ScheduleKind::OneFOneB, 4, 8, 1};
  PipelineTiming timing = uniform_timing(spec.kind, 4, 0.1, 0.2);
  const double plain = simulate_iteration(spec, timing).iteration_s;
  timing.embedding_allreduce_s = 0.3;
  timing.stages[0].table_allreduce_s = 0.1;
  timing.stages[3].table_allreduce_s = 0.1;
  const SimulationResult sim = simulate_iteration(spec, timing);
  // Rank 0's last backward ends the pipeline; the tie and the table's all-reduce follow it.
  EXPECT_NEAR(sim.iteration_s, plain + 0.3 + 0.1, 1e-9);
  EXPECT_NEAR(predict_iteration_s(spec, timing), sim.iteration_s, 1e-9);
  int ties = 0;
  for (const TimedEvent& e : sim.events) ties += e.name == "tie embedding";
  EXPECT_EQ(ties, 2);  // on the first and the last rank
}

}  // namespace
}  // namespace tessel::placement
