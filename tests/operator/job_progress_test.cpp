// One job's progress folded from its stage processes' events: the step every rank has passed,
// its loss, the counts, the failures, restarted processes and their predecessors' late events.
#include "operator/server/job_progress.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tessel::server {
namespace {

namespace pb = tessel::v1alpha1;

// Events of one process of `rank` in a 2-stage x 2-replica job (rank = replica * 2 + stage).
struct Process {
  int rank;
  uint64_t incarnation = 1;

  pb::StageEvent base() const {
    pb::StageEvent e;
    pb::Tasklet& t = *e.mutable_tasklet();
    t.set_job_id(9);
    t.set_rank(rank);
    t.set_stage(rank % 2);
    t.set_replica(rank / 2);
    t.set_incarnation(incarnation);
    return e;
  }
  pb::StageEvent started(int64_t steps, std::optional<int64_t> resumed = std::nullopt) const {
    pb::StageEvent e = base();
    e.mutable_started()->set_world_size(4);
    e.mutable_started()->set_steps(steps);
    if (resumed) e.mutable_started()->set_resumed_from(*resumed);
    return e;
  }
  pb::StageEvent step(int64_t n, double loss, double tokens_per_s = 1000) const {
    pb::StageEvent e = base();
    e.mutable_step()->set_step(n);
    e.mutable_step()->set_loss(loss);
    e.mutable_step()->set_tokens_per_s(tokens_per_s);
    return e;
  }
  pb::StageEvent checkpoint(int64_t n) const {
    pb::StageEvent e = base();
    e.mutable_checkpoint()->set_step(n);
    return e;
  }
  pb::StageEvent done(int64_t n) const {
    pb::StageEvent e = base();
    e.mutable_done()->set_step(n);
    return e;
  }
  pb::StageEvent stopped(int64_t n) const {
    pb::StageEvent e = base();
    e.mutable_stopped()->set_step(n);
    e.mutable_stopped()->set_signal("SIGTERM");
    return e;
  }
  pb::StageEvent failed(const std::string& message) const {
    pb::StageEvent e = base();
    e.mutable_error()->set_message(message);
    return e;
  }
};

TEST(JobProgressFold, NothingReportedIsNoStepNoLossNoCheckpoint) {
  const JobProgressFold fold(4);
  const JobProgress& p = fold.progress();
  EXPECT_EQ(p.world_size, 4);
  EXPECT_EQ(p.step, -1);
  EXPECT_TRUE(std::isnan(p.loss));
  EXPECT_EQ(p.last_checkpoint_step, -1);
  EXPECT_EQ(p.started, 0);
  EXPECT_TRUE(p.failures.empty());
}

TEST(JobProgressFold, TheStepIsTheOneEveryRankHasPassedWithItsLoss) {
  JobProgressFold fold(4);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(fold.add(Process{r}.started(10)));
  EXPECT_EQ(fold.progress().started, 4);
  EXPECT_EQ(fold.progress().total_steps, 10);
  // Three ranks through step 1: the job has not done step 1 yet.
  for (int r = 0; r < 3; ++r) fold.add(Process{r}.step(1, 5.5, 1000 + r));
  EXPECT_EQ(fold.progress().step, -1);
  EXPECT_TRUE(std::isnan(fold.progress().loss));
  fold.add(Process{3}.step(1, 5.5, 900));
  EXPECT_EQ(fold.progress().step, 1);
  EXPECT_DOUBLE_EQ(fold.progress().loss, 5.5);
  EXPECT_DOUBLE_EQ(fold.progress().tokens_per_s, 900);  // the slowest rank's
  // Rank 0 runs ahead to step 2: the job's step and loss stay those of step 1.
  fold.add(Process{0}.step(2, 5.1));
  EXPECT_EQ(fold.progress().step, 1);
  EXPECT_DOUBLE_EQ(fold.progress().loss, 5.5);
  for (int r = 1; r < 4; ++r) fold.add(Process{r}.step(2, 5.1));
  EXPECT_EQ(fold.progress().step, 2);
  EXPECT_DOUBLE_EQ(fold.progress().loss, 5.1);
  EXPECT_GT(fold.progress().updated.time_since_epoch().count(), 0);
}

TEST(JobProgressFold, ACheckpointCountsOnceEveryRankHasWrittenIt) {
  JobProgressFold fold(4);
  for (int r = 0; r < 4; ++r) fold.add(Process{r}.started(10));
  for (int r = 0; r < 3; ++r) fold.add(Process{r}.checkpoint(5));
  EXPECT_EQ(fold.progress().last_checkpoint_step, -1);
  fold.add(Process{3}.checkpoint(5));
  EXPECT_EQ(fold.progress().last_checkpoint_step, 5);
}

TEST(JobProgressFold, DoneStoppedAndFailedAreCountedAndTheFailuresNamed) {
  JobProgressFold fold(4);
  for (int r = 0; r < 4; ++r) fold.add(Process{r}.started(3));
  fold.add(Process{0}.done(3));
  fold.add(Process{1}.done(3));
  fold.add(Process{2}.stopped(2));
  fold.add(Process{3}.failed("rendezvous: gave up"));
  const JobProgress& p = fold.progress();
  EXPECT_EQ(p.done, 2);
  EXPECT_EQ(p.stopped, 1);
  ASSERT_EQ(p.failures.size(), 1u);
  EXPECT_EQ(p.failures[0], "rank 3 (stage 1 replica 1): rendezvous: gave up");
}

TEST(JobProgressFold, ALongFailureMessageIsCut) {
  JobProgressFold fold(4);
  fold.add(Process{2}.failed(std::string(100000, 'x')));
  ASSERT_EQ(fold.progress().failures.size(), 1u);
  EXPECT_LT(fold.progress().failures[0].size(), kMaxFailureMessageBytes + 64);
  EXPECT_NE(fold.progress().failures[0].find("..."), std::string::npos);
}

TEST(JobProgressFold, ARestartedProcessReplacesItsRankAndTheOldOnesLateEventsAreIgnored) {
  JobProgressFold fold(4);
  for (int r = 0; r < 4; ++r) {
    fold.add(Process{r}.started(10));
    fold.add(Process{r}.step(1, 5.0));
    fold.add(Process{r}.checkpoint(1));
  }
  fold.add(Process{1}.failed("killed"));
  ASSERT_EQ(fold.progress().failures.size(), 1u);
  // The gang restarts: new processes, resuming from the checkpoint of step 1.
  for (int r = 0; r < 4; ++r) fold.add(Process{r, 2}.started(10, 1));
  EXPECT_TRUE(fold.progress().failures.empty());
  EXPECT_EQ(fold.progress().started, 4);
  EXPECT_EQ(fold.progress().step, 1);  // resumed there, no step of this run yet
  EXPECT_EQ(fold.progress().last_checkpoint_step, 1);
  // A late event of rank 1's first process changes nothing.
  EXPECT_FALSE(fold.add(Process{1, 1}.failed("late")));
  EXPECT_TRUE(fold.progress().failures.empty());
  for (int r = 0; r < 4; ++r) fold.add(Process{r, 2}.step(2, 4.5));
  EXPECT_EQ(fold.progress().step, 2);
  EXPECT_DOUBLE_EQ(fold.progress().loss, 4.5);
}

TEST(JobProgressFold, AnEventWithoutABodyChangesNothing) {
  JobProgressFold fold(4);
  EXPECT_FALSE(fold.add(Process{0}.base()));
}

}  // namespace
}  // namespace tessel::server
