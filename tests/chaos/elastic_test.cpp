// Elastic width end to end: a job of 2 data-parallel replicas that may run with 1
// (spec.elastic.minReplicas) loses a node while another job holds the spare GPUs: it continues
// narrower from its checkpoint; once the other job is gone it grows back to 2. The step count
// never goes back more than a checkpoint interval, and the loss continues where it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/chaos/chaos_fixture.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::steady_clock;

// The loss of a job that restarted from scratch would be back near ln 256 = 5.5 nats; one that
// continues differs from its last value by what a few steps change.
constexpr double kLossJump = 0.5;

TEST_F(ChaosE2e, AnElasticJobShrinksWhenItsGpusAreGoneAndGrowsBackWhenTheyReturn) {
  // The blocker: 2 of the fleet's 6 GPUs, for as long as it runs.
  apply_chaos_job("blocker", 100000, 3,
                  [](json& job) { job["spec"]["parallelism"]["replicas"] = 1; });
  wait_for_step("blocker", 1);
  apply_chaos_job("elastic", 400, 3, [](json& job) { job["spec"]["elastic"]["minReplicas"] = 1; });
  watch("elastic");
  const JobSample full = wait_for_step("elastic", 2 * kCheckpointInterval + 3);
  EXPECT_EQ(full.replicas, 2) << full.status.dump();

  // A node of the job is lost: 5 GPUs are left, the blocker holds 2, 3 are free: too few for 2
  // replicas of 2 stages.
  const StagePod pod = running_stage_pod("elastic", 0);
  const auto lost = steady_clock::now();
  fleet_->kubelet(pod.member).fail_node(pod.node);
  Recovery shrink;
  ASSERT_TRUE(wait_for(
      [&] {
        shrink = recovery_after(job_watch_->samples(), lost, full.attempt());
        return shrink.recovered || !shrink.failure.empty();
      },
      kChaosTimeout))
      << "the job neither ran narrower nor failed after node " << pod.node << " was lost";
  ASSERT_TRUE(shrink.recovered) << shrink.failure;
  const JobSample narrow = wait_for_step("elastic", shrink.resumed_from + 5);
  EXPECT_EQ(narrow.replicas, 1) << narrow.status.dump();
  EXPECT_EQ(condition_field(narrow.status, "FullWidth", "reason"), "Shrunk")
      << narrow.status.dump();

  // The GPUs return: the blocker ends. The operator looks again within its pending recheck
  // (15 s) and stops the stages to grow: that moment, the first status of the next attempt, is
  // the "fault" the regrowth is measured from.
  EXPECT_EQ(delete_and_count_leftovers("blocker"), 0);
  SteadyTime regrowth{};
  Recovery grow;
  ASSERT_TRUE(wait_for(
      [&] {
        const std::vector<JobSample> samples = job_watch_->samples();
        for (const JobSample& s : samples)
          if (s.attempt() > narrow.attempt()) {
            regrowth = s.at;
            break;
          }
        if (regrowth == SteadyTime{}) return false;
        grow = recovery_after(samples, regrowth, narrow.attempt());
        return grow.recovered || !grow.failure.empty();
      },
      kChaosTimeout))
      << "the job did not grow back once the blocker's GPUs were free";
  ASSERT_TRUE(grow.recovered) << grow.failure;
  const JobSample wide = wait_for_step("elastic", grow.resumed_from + 5);
  EXPECT_EQ(wide.replicas, 2) << wide.status.dump();
  EXPECT_GE(wide.resizes, 1) << wide.status.dump();

  // Continuity: steps lost per transition, and the loss on either side of each.
  const auto loss_around = [&](SteadyTime at, int64_t attempt) {
    double before = -1, after = -1;
    for (const JobSample& s : job_watch_->samples()) {
      if (s.loss < 0) continue;
      if (s.at < at && s.attempt() == attempt) before = s.loss;
      if (s.at >= at && s.attempt() > attempt && s.phase == "Running" && after < 0 &&
          s.step > (s.attempt() == narrow.attempt() ? shrink.resumed_from : grow.resumed_from))
        after = s.loss;
    }
    return std::pair{before, after};
  };
  const auto [shrink_before, shrink_after] = loss_around(lost, full.attempt());
  const auto [grow_before, grow_after] = loss_around(regrowth, narrow.attempt());
  EXPECT_LE(shrink.last_step - shrink.resumed_from, kCheckpointInterval);
  EXPECT_LE(grow.last_step - grow.resumed_from, kCheckpointInterval);
  EXPECT_LT(std::abs(shrink_after - shrink_before), kLossJump)
      << "loss " << shrink_before << " before the shrink, " << shrink_after << " after";
  EXPECT_LT(std::abs(grow_after - grow_before), kLossJump)
      << "loss " << grow_before << " before the regrowth, " << grow_after << " after";

  const json done = wait_for_phase("elastic", "Succeeded", kChaosTimeout);
  EXPECT_EQ(done.value("/status/progress/step"_json_pointer, int64_t{-1}), 400);

  ChaosResult row;
  row.case_name = "elastic";
  row.fault = "node " + pod.node + " lost while another job held the spare GPUs (2 -> 1 " +
              "replicas), then that job deleted (1 -> 2)";
  row.outcome = done.value("/status/phase"_json_pointer, std::string()) == "Succeeded"
                    ? "shrunk, regrew, succeeded"
                    : "failed";
  row.last_step = shrink.last_step;
  row.resumed_from = shrink.resumed_from;
  row.steps_lost = std::max<int64_t>(0, shrink.last_step - shrink.resumed_from);
  row.bound = kCheckpointInterval;
  row.recover_s = shrink.recover_s;
  char losses[160];
  std::snprintf(losses, sizeof losses,
                "loss %.3f -> %.3f at the shrink, %.3f -> %.3f at the regrowth", shrink_before,
                shrink_after, grow_before, grow_after);
  row.note = "regrowth: step " + std::to_string(grow.last_step) + " resumed from " +
             std::to_string(grow.resumed_from) + " in " +
             std::to_string(static_cast<int>(grow.recover_s)) + " s; " + losses;
  row.leaked = delete_and_count_leftovers("elastic");
  row.duplicates = duplicates_seen();
  EXPECT_EQ(row.leaked, 0);
  EXPECT_EQ(row.duplicates, 0);
  record_result(row);
}

}  // namespace
}  // namespace tessel::testing
