// Faults of the operator itself: killed (SIGKILL, as a crashed container) at random moments of
// jobs' start-up and teardown and restarted each time, and two replicas racing when the leader
// freezes mid-creation. After convergence: no tasklet ever had two live pods, nothing of a
// deleted job is left in any cluster, and every job's status says what happened. These inject
// nothing into an API server: they run against real clusters too.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <random>
#include <thread>

#include "tests/chaos/chaos_fixture.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr int kOperatorKills = 50;

// $TESSEL_CHAOS_SEED, else a fresh one; printed either way, so that a failure can be replayed.
unsigned chaos_seed() {
  if (const char* text = std::getenv("TESSEL_CHAOS_SEED"); text && *text)
    return static_cast<unsigned>(std::stoul(text));
  return std::random_device()();
}

TEST_F(ChaosE2e, TheOperatorKilledAtFiftyRandomMomentsOfStartUpAndTeardownConverges) {
  const unsigned seed = chaos_seed();
  std::cout << "operator kills: seed " << seed << " (TESSEL_CHAOS_SEED=" << seed
            << " replays the same moments)\n";
  std::mt19937 random(seed);
  // A kill every 0 to 1.2 s after the operator answers /healthz: it dies inside whatever it was
  // doing (placing, creating a gang, writing status, sweeping a deleted job's objects).
  std::uniform_int_distribution<int> delay_ms(0, 1200);
  watch_pods();
  const auto start = steady_clock::now();
  int kills = 0, startup_kills = 0, teardown_kills = 0, jobs = 0;
  int64_t restarts = 0;
  const auto kill_after_a_random_moment = [&] {
    std::this_thread::sleep_for(milliseconds(delay_ms(random)));
    kill_and_restart_operator(0);
    ++kills;
  };
  // Two jobs of 2 GPUs at once (the fleet has 6): each kill lands in the lifecycle of both.
  for (int round = 0; kills < kOperatorKills; ++round) {
    const std::vector<std::string> names = {"churn-" + std::to_string(round) + "a",
                                            "churn-" + std::to_string(round) + "b"};
    for (const std::string& name : names)
      apply_chaos_job(name, 20, 3, [](json& job) { job["spec"]["parallelism"]["replicas"] = 1; });
    jobs += 2;
    // Start-up: placement, the gang's Secrets, ConfigMaps and pods, the first status.
    for (int k = 0; k < 5 && kills < kOperatorKills; ++k, ++startup_kills)
      kill_after_a_random_moment();
    for (const std::string& name : names) {
      const json done = wait_for_phase(name, "Succeeded", kChaosTimeout);
      EXPECT_EQ(done.value("/status/progress/step"_json_pointer, int64_t{-1}), 20)
          << name << ": " << done.value("status", json::object()).dump();
      EXPECT_EQ(condition_field(done.value("status", json::object()), "Succeeded", "status"),
                "True")
          << name << ": " << done.value("status", json::object()).dump();
      restarts += done.value("/status/restarts"_json_pointer, int64_t{0});
    }
    // Teardown: the finalizer's sweep of every member.
    std::vector<std::string> uids;
    for (const std::string& name : names) {
      uids.push_back(trainingjob(name)["metadata"]["uid"]);
      kubectl_ok({"delete", "trainingjob", name, "--wait=false"});
    }
    for (int k = 0; k < 3 && kills < kOperatorKills; ++k, ++teardown_kills)
      kill_after_a_random_moment();
    for (size_t j = 0; j < names.size(); ++j) {
      std::vector<std::string> left;
      EXPECT_TRUE(wait_for(
          [&] {
            left = leftovers(uids[j]);
            return left.empty() && trainingjob(names[j]).is_null();
          },
          kChaosTimeout))
          << names[j] << " left: " << ::testing::PrintToString(left);
    }
  }
  const double total_s = std::chrono::duration<double>(steady_clock::now() - start).count();

  ChaosResult row;
  row.case_name = "operator-kills";
  row.fault = std::to_string(kills) + " SIGKILLs of the operator (restarted each time) 0-1.2 s " +
              "after it answered: " + std::to_string(startup_kills) + " in start-ups, " +
              std::to_string(teardown_kills) + " in teardowns of " + std::to_string(jobs) + " jobs";
  row.outcome = HasFailure() ? "failed" : "converged";
  row.recover_s = total_s;
  row.duplicates = duplicates_seen();
  row.note = "seed " + std::to_string(seed) + "; " + std::to_string(restarts) +
             " stage restart(s), " + std::to_string(operator_exits()) +
             " exit(s) of the operator on its own restarted; recovered = the whole case's time";
  EXPECT_EQ(row.duplicates, 0);
  record_result(row);
}

TEST_F(ChaosE2e, TwoOperatorsRacingWhenTheLeaderFreezesMidCreationLeaveOneGang) {
  start_follower("replica-1");
  int first = -1;
  ASSERT_TRUE(wait_for(
      [&] {
        first = leader();
        return first >= 0;
      },
      seconds(60)))
      << "neither replica took the Lease";
  watch("raced");
  apply_chaos_job("raced", 60);
  // Mid-creation: the leader has made some of the job's pods.
  ASSERT_TRUE(wait_for(
      [&] {
        for (int m = 0; m < federation_->member_count(); ++m)
          if (!pods_in(m, std::string(kJobLabel) + "=raced").empty()) return true;
        return false;
      },
      kChaosTimeout))
      << "no pod of the job was created";
  const auto frozen = steady_clock::now();
  signal_operator(first, SIGSTOP);
  int heir = -1;
  const bool taken = wait_for(
      [&] {
        heir = leader();
        return heir >= 0 && heir != first;
      },
      seconds(3 * kLeaseDurationSeconds + 30));
  const double takeover_s = std::chrono::duration<double>(steady_clock::now() - frozen).count();
  // The old leader wakes up holding a Lease that is not its own any more: it must stop acting
  // (it exits, and the kubelet's part of the fixture starts it again, as a follower).
  signal_operator(first, SIGCONT);
  ASSERT_TRUE(taken) << "the other replica did not take the Lease over from the frozen leader";

  const json done = wait_for_phase("raced", "Succeeded", kChaosTimeout);
  EXPECT_EQ(done.value("/status/progress/step"_json_pointer, int64_t{-1}), 60)
      << done.value("status", json::object()).dump();
  const double converged_s = std::chrono::duration<double>(steady_clock::now() - frozen).count();

  ChaosResult row;
  row.case_name = "operators-race";
  row.fault =
      "two replicas; the leader SIGSTOPped once the job's first pod existed, SIGCONT "
      "after the other took the Lease (" +
      std::to_string(static_cast<int>(takeover_s)) + " s later)";
  row.outcome = done.value("/status/phase"_json_pointer, std::string()) == "Succeeded" ? "succeeded"
                                                                                       : "failed";
  row.recover_s = converged_s;
  row.note = std::to_string(done.value("/status/restarts"_json_pointer, int64_t{0})) +
             " restart(s), " + std::to_string(operator_exits()) +
             " operator exit(s) restarted; recovered = freeze -> job Succeeded";
  row.leaked = delete_and_count_leftovers("raced");
  row.duplicates = duplicates_seen();
  EXPECT_EQ(row.leaked, 0);
  EXPECT_EQ(row.duplicates, 0);
  record_result(row);
}

}  // namespace
}  // namespace tessel::testing
