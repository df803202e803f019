// Pipeline schedules as instruction lists: every rank's list replayed together (DeepSpeed's
// test_pipe_schedule style), Megatron's warm-up counts and orders, the activation stash, and a
// replay checker that does catch broken lists.
#include "placement/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tessel::placement {
namespace {

using Lists = std::vector<std::vector<Instruction>>;

// Every spec the sweep covers: p 1..8, m 1..16, all kinds; interleaved with v 2..4 and every
// micro-batch group G in [p, m] that Megatron accepts (G = p is the default, written 0).
std::vector<ScheduleSpec> sweep() {
  std::vector<ScheduleSpec> specs;
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      specs.push_back({ScheduleKind::GPipe, p, m, 1});
      specs.push_back({ScheduleKind::OneFOneB, p, m, 1});
      for (int v = 2; v <= 4; ++v) {
        for (int group = p; group <= m; ++group) {
          ScheduleSpec interleaved{ScheduleKind::Interleaved, p, m, v};
          interleaved.microbatch_group = group == p ? 0 : group;
          try {
            validate_schedule_spec(interleaved);
            specs.push_back(interleaved);
          } catch (const std::invalid_argument&) {
          }
        }
      }
    }
  }
  return specs;
}

int group_of(const ScheduleSpec& spec) {
  return spec.microbatch_group > 0 ? spec.microbatch_group : spec.stages;
}

std::string describe(const ScheduleSpec& spec) {
  return std::string(to_string(spec.kind)) + " p=" + std::to_string(spec.stages) +
         " m=" + std::to_string(spec.micro_batches) + " v=" + std::to_string(spec.chunks) +
         " G=" + std::to_string(group_of(spec));
}

// (micro-batch, chunk) of the rank's Forward (or Backward) instructions, in list order.
std::vector<std::pair<int, int>> compute_order(const std::vector<Instruction>& list, Op op) {
  std::vector<std::pair<int, int>> order;
  for (const Instruction& instruction : list) {
    if (instruction.op == op) order.emplace_back(instruction.micro_batch, instruction.chunk);
  }
  return order;
}

int forwards_before_first_backward(const std::vector<Instruction>& list) {
  int count = 0;
  for (const Instruction& instruction : list) {
    if (instruction.op == Op::Backward) break;
    if (instruction.op == Op::Forward) ++count;
  }
  return count;
}

bool mentions(const ReplayReport& report, const std::string& text) {
  return std::any_of(report.errors.begin(), report.errors.end(), [&](const std::string& error) {
    return error.find(text) != std::string::npos;
  });
}

TEST(ScheduleReplay, EveryGeneratedScheduleRunsToCompletion) {
  int interleaved = 0;
  for (const ScheduleSpec& spec : sweep()) {
    const ReplayReport report = replay_schedule(spec, generate_schedule(spec));
    EXPECT_FALSE(report.deadlocked()) << describe(spec);
    EXPECT_TRUE(report.ok()) << describe(spec) << ": " << report.errors.front();
    if (spec.kind == ScheduleKind::Interleaved) ++interleaved;
  }
  EXPECT_GT(interleaved, 700);  // the sweep really covers interleaved (804 specs)
}

TEST(ScheduleReplay, EveryListEndsWithAllReduceThenOptimizerStep) {
  for (const ScheduleSpec& spec : sweep()) {
    for (const auto& list : generate_schedule(spec)) {
      ASSERT_GE(list.size(), 2u);
      EXPECT_EQ(list[list.size() - 2].op, Op::AllReduce) << describe(spec);
      EXPECT_EQ(list.back().op, Op::OptimizerStep) << describe(spec);
    }
  }
}

TEST(OneFOneBSchedule, WarmupCountsAreMegatrons) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      const ScheduleSpec spec{ScheduleKind::OneFOneB, p, m, 1};
      const Lists lists = generate_schedule(spec);
      for (int rank = 0; rank < p; ++rank) {
        const int warmup = std::min(p - rank - 1, m);
        EXPECT_EQ(warmup_forwards(spec, rank), warmup);
        // The steady state opens with one more forward before the first backward.
        EXPECT_EQ(forwards_before_first_backward(lists[rank]), warmup < m ? warmup + 1 : m)
            << describe(spec) << " rank " << rank;
      }
    }
  }
}

TEST(OneFOneBSchedule, LastStageAlternatesForwardAndBackward) {
  const Lists lists = generate_schedule({ScheduleKind::OneFOneB, 4, 3, 1});
  const std::vector<Instruction> expected = {
      {Op::RecvActivation, 0, 0, 2}, {Op::Forward, 0, 0, -1},       {Op::Backward, 0, 0, -1},
      {Op::SendGradient, 0, 0, 2},   {Op::RecvActivation, 1, 0, 2}, {Op::Forward, 1, 0, -1},
      {Op::Backward, 1, 0, -1},      {Op::SendGradient, 1, 0, 2}};
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), lists[3].begin()));
}

TEST(InterleavedSchedule, WarmupCountsAreMegatrons) {
  for (const ScheduleSpec& spec : sweep()) {
    if (spec.kind != ScheduleKind::Interleaved) continue;
    const int p = spec.stages, m = spec.micro_batches, v = spec.chunks;
    const Lists lists = generate_schedule(spec);
    for (int rank = 0; rank < p; ++rank) {
      const int warmup = std::min((p - rank - 1) * 2 + (v - 1) * group_of(spec), m * v);
      EXPECT_EQ(warmup_forwards(spec, rank), warmup);
      EXPECT_EQ(forwards_before_first_backward(lists[rank]), warmup < m * v ? warmup + 1 : m * v)
          << describe(spec) << " rank " << rank;
    }
  }
}

// The docstring of Megatron's get_schedule_table(): PP=2, N (group) = 3, M=5, VP=2.
TEST(InterleavedSchedule, ForwardOrderIsMegatronsDocstringTable) {
  ScheduleSpec spec{ScheduleKind::Interleaved, 2, 5, 2};
  spec.microbatch_group = 3;
  const std::vector<std::pair<int, int>> table = {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1},
                                                  {2, 1}, {3, 0}, {4, 0}, {3, 1}, {4, 1}};
  const Lists lists = generate_schedule(spec);
  EXPECT_TRUE(replay_schedule(spec, lists).ok());
  for (const auto& list : lists) {
    EXPECT_EQ(compute_order(list, Op::Forward), table);
    // Backward k runs table[k] with the chunk mirrored (v-1-c).
    std::vector<std::pair<int, int>> mirrored;
    for (const auto& [mb, chunk] : table) mirrored.emplace_back(mb, 1 - chunk);
    EXPECT_EQ(compute_order(list, Op::Backward), mirrored);
  }
}

TEST(InterleavedSchedule, DefaultGroupIsP) {
  const Lists lists = generate_schedule({ScheduleKind::Interleaved, 2, 4, 2});
  const std::vector<std::pair<int, int>> table = {{0, 0}, {1, 0}, {0, 1}, {1, 1},
                                                  {2, 0}, {3, 0}, {2, 1}, {3, 1}};
  EXPECT_EQ(compute_order(lists[0], Op::Forward), table);
  // Rank 0, warm-up (2-0-1)*2 + (2-1)*2 = 4: four forwards, then one forward per backward.
  const std::vector<Op> ops = {Op::Forward, Op::Forward,  Op::Forward, Op::Forward,
                               Op::Forward, Op::Backward, Op::Forward, Op::Backward};
  std::vector<Op> computed;
  for (const Instruction& instruction : lists[0]) {
    if (instruction.op == Op::Forward || instruction.op == Op::Backward) {
      computed.push_back(instruction.op);
    }
  }
  EXPECT_TRUE(std::equal(ops.begin(), ops.end(), computed.begin()));
}

TEST(InterleavedSchedule, WrapHopJoinsLastRankToFirstRankNextChunk) {
  const ScheduleSpec spec{ScheduleKind::Interleaved, 3, 3, 2};
  const Lists lists = generate_schedule(spec);
  const auto& last_rank = lists[2];
  EXPECT_NE(std::find(last_rank.begin(), last_rank.end(), Instruction{Op::SendActivation, 0, 0, 0}),
            last_rank.end());
  const auto& first_rank = lists[0];
  EXPECT_NE(
      std::find(first_rank.begin(), first_rank.end(), Instruction{Op::RecvActivation, 0, 1, 2}),
      first_rank.end());
  EXPECT_NE(std::find(first_rank.begin(), first_rank.end(), Instruction{Op::SendGradient, 0, 1, 2}),
            first_rank.end());
  EXPECT_EQ(activation_destination(spec, 2, 0).rank, 0);
  EXPECT_EQ(activation_destination(spec, 2, 0).chunk, 1);
  EXPECT_EQ(gradient_destination(spec, 0, 1).rank, 2);
  EXPECT_EQ(gradient_destination(spec, 0, 1).chunk, 0);
}

TEST(GPipeSchedule, AllForwardsThenAllBackwards) {
  const Lists lists = generate_schedule({ScheduleKind::GPipe, 3, 4, 1});
  for (const auto& list : lists) {
    EXPECT_EQ(forwards_before_first_backward(list), 4);
    const std::vector<std::pair<int, int>> in_order = {{0, 0}, {1, 0}, {2, 0}, {3, 0}};
    EXPECT_EQ(compute_order(list, Op::Backward), in_order);
  }
}

TEST(InFlightActivations, OneFOneBStashIsPMinusRankAndGPipeIsM) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      const Lists one_f_one_b = generate_schedule({ScheduleKind::OneFOneB, p, m, 1});
      const Lists gpipe = generate_schedule({ScheduleKind::GPipe, p, m, 1});
      for (int rank = 0; rank < p; ++rank) {
        EXPECT_EQ(max_in_flight_activations(one_f_one_b[rank]), std::min(p - rank, m));
        EXPECT_EQ(max_in_flight_activations(gpipe[rank]), m);
      }
    }
  }
}

TEST(InFlightActivations, InterleavedStashIsWarmupPlusOne) {
  for (const ScheduleSpec& spec : sweep()) {
    if (spec.kind != ScheduleKind::Interleaved) continue;
    const Lists lists = generate_schedule(spec);
    for (int rank = 0; rank < spec.stages; ++rank) {
      EXPECT_EQ(max_in_flight_activations(lists[rank]),
                std::min(warmup_forwards(spec, rank) + 1, spec.micro_batches * spec.chunks));
    }
  }
}

TEST(ReplayChecker, CatchesADeadlockFromSwappedInstructions) {
  const ScheduleSpec spec{ScheduleKind::OneFOneB, 2, 1, 1};
  Lists lists = generate_schedule(spec);
  // Rank 0: Forward, SendActivation, RecvGradient, ... -> wait for the gradient before sending.
  ASSERT_EQ(lists[0][1].op, Op::SendActivation);
  ASSERT_EQ(lists[0][2].op, Op::RecvGradient);
  std::swap(lists[0][1], lists[0][2]);
  const ReplayReport report = replay_schedule(spec, lists);
  ASSERT_TRUE(report.deadlocked());
  ASSERT_EQ(report.stuck.size(), 2u);
  EXPECT_EQ(report.stuck[0].rank, 0);
  EXPECT_EQ(report.stuck[0].instruction.op, Op::RecvGradient);
  EXPECT_EQ(report.stuck[1].rank, 1);
  EXPECT_EQ(report.stuck[1].instruction.op, Op::RecvActivation);
  EXPECT_TRUE(mentions(report, "deadlock: rank 0 waits at #1 RecvGradient mb0 c0 from 1"));
}

TEST(ReplayChecker, CatchesADroppedReceive) {
  const ScheduleSpec spec{ScheduleKind::OneFOneB, 2, 2, 1};
  Lists lists = generate_schedule(spec);
  auto& rank1 = lists[1];
  const auto recv = std::find(rank1.begin(), rank1.end(), Instruction{Op::RecvActivation, 1, 0, 0});
  ASSERT_NE(recv, rank1.end());
  rank1.erase(recv);
  const ReplayReport report = replay_schedule(spec, lists);
  EXPECT_FALSE(report.deadlocked());
  EXPECT_TRUE(mentions(report, "rank 1 #4 Forward mb1 c0: runs before its RecvActivation"));
  EXPECT_TRUE(mentions(report, "rank 0's SendActivation mb1 c0 to 1 is never received"));
}

TEST(ReplayChecker, CatchesSendsAndReceivesInDifferentOrders) {
  const ScheduleSpec spec{ScheduleKind::GPipe, 2, 2, 1};
  Lists lists = generate_schedule(spec);
  // Rank 0 computes and sends micro-batch 1 before 0; rank 1 still expects 0 first.
  std::swap(lists[0][0], lists[0][2]);
  std::swap(lists[0][1], lists[0][3]);
  const ReplayReport report = replay_schedule(spec, lists);
  EXPECT_FALSE(report.ok());
  EXPECT_TRUE(mentions(report, "pair up in a different order"));
}

TEST(ReplayChecker, CatchesASendToTheWrongRank) {
  const ScheduleSpec spec{ScheduleKind::GPipe, 3, 1, 1};
  Lists lists = generate_schedule(spec);
  ASSERT_EQ(lists[0][1].op, Op::SendActivation);
  lists[0][1].peer = 2;  // must go to rank 1, which now waits for it forever
  const ReplayReport report = replay_schedule(spec, lists);
  EXPECT_TRUE(mentions(report, "rank 0 #1 SendActivation mb0 c0 to 2: the peer must be rank 1"));
  EXPECT_TRUE(report.deadlocked());
}

TEST(ReplayChecker, CatchesAMissingBackward) {
  const ScheduleSpec spec{ScheduleKind::GPipe, 3, 1, 1};
  Lists lists = generate_schedule(spec);
  lists[2].erase(std::find(lists[2].begin(), lists[2].end(), Instruction{Op::Backward, 0, 0, -1}));
  const ReplayReport report = replay_schedule(spec, lists);
  EXPECT_FALSE(report.deadlocked());
  EXPECT_TRUE(mentions(report, "sends before the Backward that produces it"));
  EXPECT_TRUE(mentions(report, "rank 2 mb0 c0: no Backward"));
}

TEST(ScheduleSpecValidation, RejectsSpecsItCannotRun) {
  auto message = [](const ScheduleSpec& spec) {
    try {
      validate_schedule_spec(spec);
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_NE(message({ScheduleKind::Interleaved, 4, 6, 2}).find("m must be a multiple of p"),
            std::string::npos);
  EXPECT_NE(message({ScheduleKind::Interleaved, 4, 2, 2}).find("m must be at least p"),
            std::string::npos);
  EXPECT_NE(message({ScheduleKind::Interleaved, 4, 8, 1}).find("v) >= 2"), std::string::npos);
  EXPECT_NE(message({ScheduleKind::Interleaved, 1, 4, 2}).find("at least 2 stages"),
            std::string::npos);
  EXPECT_NE(message({ScheduleKind::OneFOneB, 4, 8, 2}).find("chunks (v) must be 1"),
            std::string::npos);
  EXPECT_NE(message({ScheduleKind::GPipe, 0, 8, 1}).find("at least 1 stage"), std::string::npos);
  EXPECT_NE(message({ScheduleKind::GPipe, 2, 0, 1}).find("at least 1 micro-batch"),
            std::string::npos);
  ScheduleSpec small_last_group{ScheduleKind::Interleaved, 4, 10, 2};
  small_last_group.microbatch_group = 4;  // 10 mod 4 = 2 < p
  EXPECT_NE(message(small_last_group).find("m mod G = 2 must be 0 or at least p"),
            std::string::npos);
  EXPECT_THROW(generate_schedule({ScheduleKind::Interleaved, 4, 6, 2}), std::invalid_argument);
}

TEST(ScheduleKindNames, RoundTripAndRejectUnknownNames) {
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved}) {
    EXPECT_EQ(parse_schedule_kind(to_string(kind)), kind);
  }
  try {
    parse_schedule_kind("pipedream");
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("'pipedream'"), std::string::npos);
  }
}

}  // namespace
}  // namespace tessel::placement
