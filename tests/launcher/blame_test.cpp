// Which tasklet a failed job is blamed on (blame.h): the one its peers timed out on, the one
// whose error is its own, not the first neighbour that noticed a closed connection; and the
// progress tracker's count of a resumed run.
#include "noderuntime/launcher/blame.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "noderuntime/launcher/progress_tracker.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

// How the transport names rank r of a 2 x 2 job (rank = replica x 2 + stage).
std::string peer(int r) {
  return "rank " + std::to_string(r) + " (127.0.0.1:" + std::to_string(40000 + r) + ", stage " +
         std::to_string(r % 2) + " replica " + std::to_string(r / 2) + ")";
}

// Four ranks that ran and were stopped by the launcher (SIGTERM: exit 143).
std::vector<RankEnd> four_ranks() {
  std::vector<RankEnd> ranks(4);
  for (int r = 0; r < 4; ++r) {
    ranks[r].rank = r;
    ranks[r].label = "stage " + std::to_string(r % 2) + " replica " + std::to_string(r / 2);
    ranks[r].pid = 100 + r;
    ranks[r].log_path = "/logs/rank-" + std::to_string(r) + ".log";
    ranks[r].exit = StageExit{false, 128 + SIGTERM};
  }
  return ranks;
}

void ended_badly(RankEnd& rank, int order, StageExit exit, std::optional<std::string> error) {
  rank.ended_badly = true;
  rank.order = order;
  rank.exit = exit;
  rank.error = std::move(error);
}

TEST(PeerComplaint, NamesTheOtherRanksOfATimeoutOrAClosedConnection) {
  const auto timeout = peer_complaint("step 3: irecv from " + peer(1) + ": no data for 5 s", 0, 4);
  ASSERT_TRUE(timeout);
  EXPECT_EQ(timeout->kind, PeerComplaint::Kind::kTimeout);
  EXPECT_EQ(timeout->ranks, std::vector<int>{1});

  const auto closed = peer_complaint(peer(3) + ": connection closed", 1, 4);
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->kind, PeerComplaint::Kind::kClosed);
  EXPECT_EQ(closed->ranks, std::vector<int>{3});

  // The mesh names itself first, then the ranks that never connected.
  const auto mesh = peer_complaint(
      peer(0) + ": timed out after 5000 ms waiting for " + peer(2) + ", " + peer(3) + " to connect",
      0, 4);
  ASSERT_TRUE(mesh);
  EXPECT_EQ(mesh->ranks, (std::vector<int>{2, 3}));
}

TEST(PeerComplaint, AnErrorOfItsOwnIsNoComplaint) {
  // Another rank named without a timeout or a lost connection.
  EXPECT_FALSE(peer_complaint("checkpoint: rank 1 (its file) is short", 0, 4));
  // A timeout that names no other rank, or only itself, or a rank outside the job.
  EXPECT_FALSE(peer_complaint("progress: timed out", 0, 4));
  EXPECT_FALSE(peer_complaint(peer(2) + ": no data for 5 s", 2, 4));
  EXPECT_FALSE(peer_complaint("rank 9 (x): connection closed", 0, 4));
  EXPECT_FALSE(peer_complaint("rank 99999999999999 (x): connection closed", 0, 4));
  // "rank" inside a word, or without the peer's parenthesis, is not a peer.
  EXPECT_FALSE(peer_complaint("frank 1 (x): connection closed", 0, 4));
  EXPECT_FALSE(peer_complaint("rank 1: connection closed", 0, 4));
}

TEST(Blame, TheRankTheOthersTimedOutOnStoppedAnswering) {
  // Rank 1 was stopped (SIGSTOP): ranks 0 and 3 timed out on it, rank 2 then lost rank 0, and
  // the launcher killed rank 1. Rank 0 ended first.
  std::vector<RankEnd> ranks = four_ranks();
  ended_badly(ranks[0], 0, {false, 1}, "irecv from " + peer(1) + ": no data for 5 s");
  ended_badly(ranks[2], 1, {false, 1}, peer(0) + ": connection closed");
  ended_badly(ranks[3], 2, {false, 1}, "all-reduce: " + peer(1) + ": no data for 5 s");
  ranks[1].exit = StageExit{true, SIGKILL};
  ranks[1].stopped_by = SIGSTOP;
  const Blame blame = assign_blame(ranks);
  EXPECT_EQ(blame.rank, 1);
  EXPECT_EQ(blame.message.rfind("stage 1 replica 0 (rank 1) (pid 101) stopped answering: ranks 0 "
                                "and 3 timed out waiting for it (rank 0: irecv from " +
                                    peer(1) +
                                    ": no data for 5 s); it was stopped by SIGSTOP; "
                                    "it was killed by SIGKILL; the other 3 stopped "
                                    "(log: /logs/rank-1.log)",
                                0),
            0u)
      << blame.message;
}

TEST(Blame, ARankWithAnErrorOfItsOwnIsBlamedNotTheNeighbourThatSawItGo) {
  // Rank 1's checkpoint is bad; rank 0 noticed the closed connection first.
  std::vector<RankEnd> ranks = four_ranks();
  ended_badly(ranks[0], 0, {false, 1}, peer(1) + ": connection closed");
  ended_badly(ranks[1], 1, {false, 1},
              "ckpt/step-00000002/rank-00001.safetensors: header: truncated");
  ended_badly(ranks[3], 2, {false, 1}, peer(1) + ": connection closed (reset by the peer)");
  const Blame blame = assign_blame(ranks);
  EXPECT_EQ(blame.rank, 1);
  EXPECT_EQ(blame.message,
            "stage 1 replica 0 (rank 1) (pid 101) exited with status 1: "
            "ckpt/step-00000002/rank-00001.safetensors: header: truncated; the other 3 stopped "
            "(log: /logs/rank-1.log)");
}

TEST(Blame, TheRankTheOthersErrorsNameIsBlamedNotTheFirstToEnd) {
  // Every rank agreed not to start: rank 1 could not load its checkpoint, and the others say so.
  std::vector<RankEnd> ranks = four_ranks();
  const std::string refer =
      "resume from step 2: not starting: stage 1 replica 0 (rank 1) could not load its "
      "checkpoint (its error says why)";
  ended_badly(ranks[3], 0, {false, 1}, refer);
  ended_badly(ranks[0], 1, {false, 1}, refer);
  ended_badly(ranks[1], 2, {false, 1}, "ckpt/step-00000002/rank-00001.safetensors: truncated");
  ended_badly(ranks[2], 3, {false, 1}, refer);
  const Blame blame = assign_blame(ranks);
  EXPECT_EQ(blame.rank, 1);
  EXPECT_EQ(blame.message.rfind("stage 1 replica 0 (rank 1) (pid 101) exited with status 1: "
                                "ckpt/step-00000002/rank-00001.safetensors: truncated;",
                                0),
            0u)
      << blame.message;
  // Without its own error (it was killed), the others' word still points at it.
  ranks[1].ended_badly = false;
  ranks[1].error.reset();
  ranks[1].exit = StageExit{true, SIGKILL};
  EXPECT_EQ(assign_blame(ranks).rank, 1);
  EXPECT_NE(assign_blame(ranks).message.find("(ranks 0, 2 and 3 name it)"), std::string::npos)
      << assign_blame(ranks).message;
}

TEST(RanksNamed, BothFormsOnceEachNeverItselfOrOutsideTheJob) {
  EXPECT_EQ(ranks_named("stage 1 replica 0 (rank 1), stage 0 replica 1 (rank 2) and " + peer(1) +
                            " and (rank 0) and (rank 7)",
                        0, 4),
            (std::vector<int>{1, 2}));
  EXPECT_TRUE(ranks_named("rank 1: x, the rank 2 file, (rank 3 ", 0, 4).empty());
}

TEST(Blame, ARankKilledByASignalOfItsOwnComesFirst) {
  std::vector<RankEnd> ranks = four_ranks();
  ended_badly(ranks[0], 0, {false, 1}, "checkpoint: cannot write");
  ended_badly(ranks[2], 1, {true, SIGSEGV}, std::nullopt);
  const Blame blame = assign_blame(ranks);
  EXPECT_EQ(blame.rank, 2);
  EXPECT_EQ(blame.message.rfind("stage 0 replica 1 (rank 2) (pid 102) was killed by SIGSEGV;", 0),
            0u)
      << blame.message;
}

TEST(Blame, AStoppedRankNobodyTimedOutOnDirectlyIsStillTheOne) {
  // A ring: rank 0 timed out on rank 2, which was itself waiting for the stopped rank 1 and
  // then saw rank 0 go. Rank 2 answered (it complained), rank 1 did not.
  std::vector<RankEnd> ranks = four_ranks();
  ended_badly(ranks[0], 0, {false, 1}, peer(2) + ": no data for 5 s");
  ended_badly(ranks[2], 1, {false, 1}, peer(0) + ": connection closed");
  ranks[1].exit = StageExit{true, SIGKILL};
  ranks[1].stopped_by = SIGSTOP;
  const Blame blame = assign_blame(ranks);
  EXPECT_EQ(blame.rank, 1);
  EXPECT_NE(blame.message.find("(rank 1) (pid 101) stopped answering: it was stopped by SIGSTOP"),
            std::string::npos)
      << blame.message;
}

TEST(Blame, ARankThatOutlivedTheGracePeriodStoppedAnswering) {
  std::vector<RankEnd> ranks = four_ranks();
  ended_badly(ranks[3], 0, {false, 1}, "all-reduce: " + peer(2) + ": no data for 5 s");
  ended_badly(ranks[0], 1, {false, 1}, "isend to " + peer(2) + ": no progress sending for 5 s");
  ranks[2].exit = StageExit{true, SIGKILL};
  ranks[2].unresponsive = true;
  const Blame blame = assign_blame(ranks);
  EXPECT_EQ(blame.rank, 2);
  EXPECT_NE(blame.message.find("(rank 2) (pid 102) stopped answering: ranks 0 and 3 timed out "
                               "waiting for it"),
            std::string::npos)
      << blame.message;
  EXPECT_NE(blame.message.find("it did not stop within the grace period"), std::string::npos);
}

TEST(Blame, WhenEveryoneOnlyComplainsTheMostNamedIsBlamed) {
  std::vector<RankEnd> ranks = four_ranks();
  ended_badly(ranks[0], 0, {false, 1}, peer(3) + ": connection closed");
  ended_badly(ranks[1], 1, {false, 1}, peer(3) + ": connection closed");
  ended_badly(ranks[3], 2, {false, 1}, peer(0) + ": connection closed");
  EXPECT_EQ(assign_blame(ranks).rank, 3);
}

TEST(Blame, ASilentFailureIsBlamedBeforeOneThatExplainsItself) {
  std::vector<RankEnd> ranks = four_ranks();
  ended_badly(ranks[0], 0, {false, 1}, "step 4: training diverged (loss nan)");
  ended_badly(ranks[1], 1, {false, 3}, std::nullopt);
  const Blame blame = assign_blame(ranks);
  EXPECT_EQ(blame.rank, 1);
  EXPECT_EQ(blame.message.rfind("stage 1 replica 0 (rank 1) (pid 101) exited with status 3;", 0),
            0u)
      << blame.message;
}

TEST(Blame, OwnErrorsAlikeGoToTheFirstThatEnded) {
  std::vector<RankEnd> ranks = four_ranks();
  ended_badly(ranks[2], 0, {false, 1}, "step 4: training diverged (loss nan)");
  ended_badly(ranks[0], 1, {false, 1}, "step 4: training diverged (loss nan)");
  EXPECT_EQ(assign_blame(ranks).rank, 2);
}

class LogLine : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() / ("tessel-blame-log-" + std::to_string(::getpid()));
  }
  void TearDown() override { fs::remove(path_); }
  void write(const std::string& text) { std::ofstream(path_, std::ios::binary) << text; }
  fs::path path_;
};

TEST_F(LogLine, TheLastLineThatSaysErrorElseTheLastLine) {
  write("starting\ntessel-stage rank 1: error: the first\nmore\nrank 1: error: the cause\n\n");
  EXPECT_EQ(error_line_of_log(path_.string()), "rank 1: error: the cause");
  write("starting\nsomething went wrong  \n\n");
  EXPECT_EQ(error_line_of_log(path_.string()), "something went wrong");
}

TEST_F(LogLine, NothingToSayIsNullopt) {
  write("");
  EXPECT_FALSE(error_line_of_log(path_.string()));
  write("\n\n  \n");
  EXPECT_FALSE(error_line_of_log(path_.string()));
  EXPECT_FALSE(error_line_of_log((path_.string() + "-missing")));
}

TEST_F(LogLine, AHugeLogIsReadFromItsTailAndTheLineIsCut) {
  std::string text(200000, 'x');
  text += "\nerror: " + std::string(5000, 'y') + "\n";
  write(text);
  const auto line = error_line_of_log(path_.string());
  ASSERT_TRUE(line);
  EXPECT_EQ(line->size(), 1003u);
  EXPECT_EQ(line->rfind("error: yyy", 0), 0u);
}

progress::StepMetrics step(int n) {
  progress::StepMetrics s;
  s.step = n;
  s.loss = 3.0;
  s.tokens = 100;
  s.step_s = 1.0;
  return s;
}

TEST(ProgressTrackerResume, CountsTheStepsRunAfterTheCheckpoint) {
  ProgressTracker tracker(2, 60);
  tracker.add_start(1, 28);
  tracker.add_start(0, 28);
  EXPECT_EQ(tracker.resumed_from(), 28);
  EXPECT_EQ(tracker.steps_to_run(), 32);
  EXPECT_EQ(tracker.steps_run(), 0);
  for (int n = 29; n <= 31; ++n) {
    tracker.add_step(0, step(n));
    ASSERT_TRUE(tracker.add_step(1, step(n)));
  }
  EXPECT_EQ(tracker.steps_run(), 3);
  EXPECT_EQ(tracker.steps().front().step, 29);
  ASSERT_TRUE(tracker.eta_s());
  EXPECT_DOUBLE_EQ(*tracker.eta_s(), 29.0);  // 1 s a step, steps 32 to 60 left
  EXPECT_EQ(tracker.progress_line(tracker.steps().back()).rfind("step 31/60  ", 0), 0u);
}

TEST(ProgressTrackerResume, AFreshRunCountsFromOne) {
  ProgressTracker tracker(1, 5);
  tracker.add_start(0, std::nullopt);
  EXPECT_FALSE(tracker.resumed_from());
  EXPECT_EQ(tracker.steps_to_run(), 5);
  tracker.add_step(0, step(1));
  EXPECT_EQ(tracker.steps_run(), 1);
}

TEST(ProgressTrackerResume, RefusesStepsTheCheckpointHeldAndRanksThatDisagree) {
  ProgressTracker tracker(2, 60);
  tracker.add_start(0, 28);
  try {
    tracker.add_step(1, step(28));
    ADD_FAILURE() << "step 28 was taken after resuming from it";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 1 reported step 28, but the run resumed from step 28");
  }
  try {
    tracker.add_start(1, std::nullopt);
    ADD_FAILURE() << "rank 1 started afresh while rank 0 resumed";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 1 started afresh, rank 0 resumed from step 28");
  }
  ProgressTracker past(1, 20);
  try {
    past.add_start(0, 21);
    ADD_FAILURE() << "resumed past the end";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "rank 0 resumed from step 21 of a 20-step job");
  }
}

}  // namespace
}  // namespace tessel::launcher
