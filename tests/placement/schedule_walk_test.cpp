// The rank loop that the replay checker and the simulator share: which instruction runs when,
// how receives pair with sends, what blocks, what is reported as left over.
#include "placement/schedule_walk.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tessel::placement {
namespace {

using Lists = std::vector<std::vector<Instruction>>;

// Records every call as "rank#index op", receives with the send they were paired with.
class Recorder : public InstructionHandler {
 public:
  bool well_formed(const InstructionRef& at, const Instruction&) override {
    ++asked;
    return at.rank != malformed.rank || at.index != malformed.index;
  }
  void forward(const InstructionRef& at, const Instruction&) override { note(at, "Forward"); }
  void backward(const InstructionRef& at, const Instruction&) override { note(at, "Backward"); }
  void send(const InstructionRef& at, const Instruction&) override { note(at, "Send"); }
  void receive(const InstructionRef& at, const Instruction&,
               const InstructionRef& matched_send) override {
    note(at,
         "Recv<-" + std::to_string(matched_send.rank) + "#" + std::to_string(matched_send.index));
  }
  void all_reduce(const InstructionRef& at, const Instruction&) override { note(at, "AllReduce"); }
  // Waits until every rank has reached its optimizer step (a barrier), when asked to.
  bool optimizer_step(const InstructionRef& at, const Instruction&) override {
    if (barrier) {
      if (reached.size() <= static_cast<size_t>(at.rank)) reached.resize(at.rank + 1, false);
      reached[at.rank] = true;
      for (int rank = 0; rank < ranks; ++rank) {
        if (rank >= static_cast<int>(reached.size()) || !reached[rank]) return false;
      }
    }
    note(at, "OptimizerStep");
    return true;
  }

  std::vector<std::string> calls;
  InstructionRef malformed{-1, 0};
  bool barrier = false;
  int ranks = 0;
  int asked = 0;

 private:
  void note(const InstructionRef& at, const std::string& what) {
    calls.push_back(std::to_string(at.rank) + "#" + std::to_string(at.index) + " " + what);
  }
  std::vector<bool> reached;
};

const Instruction kForward{Op::Forward, 0, 0, -1};
const Instruction kAllReduce{Op::AllReduce, -1, -1, -1};
const Instruction kStep{Op::OptimizerStep, -1, -1, -1};

Instruction send_activation(int mb, int to) { return {Op::SendActivation, mb, 0, to}; }
Instruction recv_activation(int mb, int from) { return {Op::RecvActivation, mb, 0, from}; }

TEST(ScheduleWalk, RunsEachRankUntilItBlocksThenComesBack) {
  // Rank 0 receives first: it blocks until rank 1 has sent; the walk then goes back to it.
  const Lists lists = {{recv_activation(0, 1), kForward},
                       {kForward, send_activation(0, 0), kAllReduce}};
  Recorder recorder;
  const WalkOutcome outcome = walk_schedule(lists, recorder);
  EXPECT_TRUE(outcome.stuck.empty());
  EXPECT_TRUE(outcome.unreceived.empty());
  const std::vector<std::string> expected = {"1#0 Forward", "1#1 Send", "1#2 AllReduce",
                                             "0#0 Recv<-1#1", "0#1 Forward"};
  EXPECT_EQ(recorder.calls, expected);
}

TEST(ScheduleWalk, PairsReceivesWithSendsInFifoOrderPerChannel) {
  // Two channels into rank 1 (activations and gradients from rank 0) and two sends on one.
  const Lists lists = {{send_activation(0, 1), {Op::SendGradient, 0, 0, 1}, send_activation(1, 1)},
                       {{Op::RecvGradient, 0, 0, 0}, recv_activation(1, 0), recv_activation(0, 0)}};
  Recorder recorder;
  const WalkOutcome outcome = walk_schedule(lists, recorder);
  EXPECT_TRUE(outcome.stuck.empty());
  // The first activation receive gets the first activation send whatever micro-batch either
  // names: checking that they agree is the checker's business.
  const std::vector<std::string> expected = {"0#0 Send",      "0#1 Send",      "0#2 Send",
                                             "1#0 Recv<-0#1", "1#1 Recv<-0#0", "1#2 Recv<-0#2"};
  EXPECT_EQ(recorder.calls, expected);
}

TEST(ScheduleWalk, ReportsTheInstructionEachDeadlockedRankWaitsAt) {
  const Lists lists = {{recv_activation(0, 1), send_activation(0, 1)},
                       {kForward, recv_activation(0, 0), send_activation(0, 0)}};
  Recorder recorder;
  const WalkOutcome outcome = walk_schedule(lists, recorder);
  ASSERT_EQ(outcome.stuck.size(), 2u);
  EXPECT_EQ(outcome.stuck[0].rank, 0);
  EXPECT_EQ(outcome.stuck[0].index, 0);
  EXPECT_EQ(outcome.stuck[0].instruction, recv_activation(0, 1));
  EXPECT_EQ(outcome.stuck[1].rank, 1);
  EXPECT_EQ(outcome.stuck[1].index, 1);
  EXPECT_EQ(recorder.calls, std::vector<std::string>{"1#0 Forward"});
}

TEST(ScheduleWalk, ListsSendsNobodyReceivedByChannelThenInOrder) {
  const Lists lists = {{send_activation(0, 1), send_activation(1, 1)},
                       {send_activation(0, 0), recv_activation(0, 0)},
                       {}};
  Recorder recorder;
  const WalkOutcome outcome = walk_schedule(lists, recorder);
  EXPECT_TRUE(outcome.stuck.empty());
  // Rank 1 received rank 0's first send; left: channel 0 -> 1, then channel 1 -> 0.
  ASSERT_EQ(outcome.unreceived.size(), 2u);
  EXPECT_EQ(outcome.unreceived[0].rank, 0);
  EXPECT_EQ(outcome.unreceived[0].index, 1u);
  EXPECT_EQ(outcome.unreceived[1].rank, 1);
  EXPECT_EQ(outcome.unreceived[1].index, 0u);
}

TEST(ScheduleWalk, PassesOverWhatTheHandlerFindsMalformed) {
  // Rank 0's receive names a peer that never sends; the handler refuses it, so it neither
  // blocks nor reaches receive().
  const Lists lists = {{recv_activation(0, 1), kForward}, {kForward}};
  Recorder recorder;
  recorder.malformed = {0, 0};
  const WalkOutcome outcome = walk_schedule(lists, recorder);
  EXPECT_TRUE(outcome.stuck.empty());
  const std::vector<std::string> expected = {"0#1 Forward", "1#0 Forward"};
  EXPECT_EQ(recorder.calls, expected);
}

TEST(ScheduleWalk, AnOptimizerStepThatWaitsIsRetriedAfterTheOtherRanksMove) {
  const Lists lists = {{kAllReduce, kStep}, {kForward, kAllReduce, kStep}};
  Recorder recorder;
  recorder.barrier = true;
  recorder.ranks = 2;
  const WalkOutcome outcome = walk_schedule(lists, recorder);
  EXPECT_TRUE(outcome.stuck.empty());
  const std::vector<std::string> expected = {"0#0 AllReduce", "1#0 Forward", "1#1 AllReduce",
                                             "1#2 OptimizerStep", "0#1 OptimizerStep"};
  EXPECT_EQ(recorder.calls, expected);
}

TEST(ScheduleWalk, AWaitThatNothingEndsIsADeadlock) {
  const Lists lists = {{kAllReduce, kStep}, {recv_activation(0, 0), kAllReduce, kStep}};
  Recorder recorder;
  recorder.barrier = true;
  recorder.ranks = 2;
  const WalkOutcome outcome = walk_schedule(lists, recorder);
  ASSERT_EQ(outcome.stuck.size(), 2u);
  EXPECT_EQ(outcome.stuck[0].instruction, kStep);
  EXPECT_EQ(outcome.stuck[1].instruction, recv_activation(0, 0));
}

TEST(ScheduleWalk, AGeneratedScheduleRunsToTheEndWithEveryInstructionOnce) {
  const ScheduleSpec spec{ScheduleKind::Interleaved, 3, 6, 2};
  const Lists lists = generate_schedule(spec);
  Recorder recorder;
  const WalkOutcome outcome = walk_schedule(lists, recorder);
  EXPECT_TRUE(outcome.stuck.empty());
  EXPECT_TRUE(outcome.unreceived.empty());
  size_t instructions = 0;
  for (const auto& list : lists) instructions += list.size();
  EXPECT_EQ(recorder.calls.size(), instructions);
  EXPECT_GE(recorder.asked, static_cast<int>(instructions));
}

}  // namespace
}  // namespace tessel::placement
