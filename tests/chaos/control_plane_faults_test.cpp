// Faults of the API servers: a member's API server away (every connection refused and cut) and
// then back without its watch cache, and storms of 429/5xx answers with dropped watches on the hub
// and the members while a job starts. The stages never talk to an API server, so training goes
// on; the operator must neither duplicate nor leak anything. These inject faults into the API
// test servers: on real clusters they skip, saying so.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/chaos/chaos_fixture.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

// Longer than the operator's 20 s after which a member whose informers keep failing is
// unreachable (operator/controller/member_registry.h), so that the job shows it.
constexpr seconds kMemberAway{30};

TEST_F(ChaosE2e, AMemberApiServerAwayThenRestartedLeavesItsPodsTrainingWithoutDuplicates) {
  for (int m = 0; m < federation_->member_count(); ++m)
    TESSEL_REQUIRE_TEST_SERVER(federation_->member(m), "partition, restart_watch_cache");
  // Long enough to train through the whole time the member is away.
  apply_chaos_job("member-away", 2000);
  watch("member-away");
  const JobSample before = wait_for_step("member-away", kCheckpointInterval);
  // The member of the job's rank 0: it has pods of the job.
  const StagePod pod = running_stage_pod("member-away", 0);
  ASSERT_GE(pod.member, 0);
  ApiTestServer& server = *federation_->member(pod.member).server();

  const auto away = steady_clock::now();
  server.partition(kMemberAway);
  std::this_thread::sleep_for(kMemberAway);
  // Back, as a restarted API server: every watch from before answers 410 Gone.
  server.restart_watch_cache();
  const auto back = steady_clock::now();

  // Reachable again in the job's conditions, and still training.
  json job;
  const bool reachable = wait_for(
      [&] {
        job = trainingjob("member-away");
        return condition_field(job.value("status", json::object()), "MembersReachable", "status") ==
               "True";
      },
      kChaosTimeout);
  const double recover_s = std::chrono::duration<double>(steady_clock::now() - back).count();
  EXPECT_TRUE(reachable) << "MembersReachable is not True again after the member came back: "
                         << job.value("status", json::object()).dump();
  const JobSample after = wait_for_step("member-away", job_watch_->latest()->step + 5);

  // What the job showed while the member was away: Running all along, the step advancing, the
  // member unreachable, no restart.
  int64_t step_at_away = -1, step_at_back = -1;
  bool shown_away = false;
  for (const JobSample& s : job_watch_->samples()) {
    if (s.at < away) continue;
    if (s.at > back) break;
    if (step_at_away < 0) step_at_away = s.step;
    step_at_back = std::max(step_at_back, s.step);
    EXPECT_EQ(s.phase, "Running") << s.status.dump();
    shown_away =
        shown_away || (condition_field(s.status, "MembersReachable", "status") == "False" &&
                       condition_field(s.status, "MembersReachable", "message")
                               .find(federation_->member_name(pod.member)) != std::string::npos);
  }
  EXPECT_TRUE(shown_away) << "the job never showed member " << federation_->member_name(pod.member)
                          << " unreachable while its API server was away";
  EXPECT_GT(step_at_back, step_at_away) << "the stages did not train while the member was away";
  EXPECT_EQ(after.restarts, before.restarts)
      << "the stages were restarted: " << after.status.dump();

  ChaosResult row;
  row.case_name = "member-away";
  row.fault = "member " + federation_->member_name(pod.member) +
              "'s API server refusing and cutting every connection for " +
              std::to_string(kMemberAway.count()) +
              " s, then back without its watch cache (410 Gone on every watch)";
  row.outcome = after.restarts == before.restarts ? "kept training" : "restarted";
  row.last_step = step_at_away;
  row.steps_lost = after.restarts == before.restarts ? 0 : -1;
  row.bound = 0;
  row.recover_s = recover_s;
  row.note = "steps " + std::to_string(step_at_away) + " -> " + std::to_string(step_at_back) +
             " while away; recovered = MembersReachable True again after the return";
  row.leaked = delete_and_count_leftovers("member-away");
  row.duplicates = duplicates_seen();
  EXPECT_EQ(row.leaked, 0);
  EXPECT_EQ(row.duplicates, 0);
  record_result(row);
}

TEST_F(ChaosE2e, ApiErrorStormsAndDroppedWatchesDuringStartUpLeaveOneGangAndNothingBehind) {
  TESSEL_REQUIRE_TEST_SERVER(federation_->hub(), "fail_next, drop_watches");
  for (int m = 0; m < federation_->member_count(); ++m)
    TESSEL_REQUIRE_TEST_SERVER(federation_->member(m), "fail_next, drop_watches");
  std::vector<ApiTestServer*> servers = {federation_->hub().server()};
  for (int m = 0; m < federation_->member_count(); ++m)
    servers.push_back(federation_->member(m).server());

  constexpr int kSteps = 60;
  apply_chaos_job("stormy", kSteps);
  watch("stormy");
  // The storm, until the job runs (at most kStorm): every 250 ms the next 2 requests of every
  // server fail (429 with Retry-After 1 s, 500, 503 in turn, watches included), every 2.5 s every
  // open watch is cut, and once the hub loses its watch cache (410 Gone on every watch).
  constexpr seconds kStorm{20};
  std::atomic<bool> calm = false;
  int rounds = 0;
  const auto storm_start = steady_clock::now();
  std::jthread storm([&] {
    const int statuses[] = {429, 500, 503};
    while (!calm) {
      for (ApiTestServer* server : servers) {
        const int status = statuses[rounds % 3];
        server->fail_next(2, status, status == 429 ? 1 : -1, /*include_watches=*/true);
        if (rounds % 10 == 0) server->drop_watches();
      }
      if (rounds == 12) servers.front()->restart_watch_cache();
      ++rounds;
      std::this_thread::sleep_for(milliseconds(250));
    }
  });
  bool started = false;
  wait_for(
      [&] {
        const auto latest = job_watch_->latest();
        started = latest && latest->phase == "Running" && latest->step > 0;
        return started || steady_clock::now() - storm_start >= kStorm;
      },
      kChaosTimeout);
  calm = true;
  storm.join();
  const double storm_s = std::chrono::duration<double>(steady_clock::now() - storm_start).count();

  const json done = wait_for_phase("stormy", "Succeeded", kChaosTimeout);
  const int64_t step = done.value("/status/progress/step"_json_pointer, int64_t{-1});
  EXPECT_EQ(step, kSteps) << done.value("status", json::object()).dump();
  EXPECT_EQ(condition_field(done.value("status", json::object()), "Succeeded", "status"), "True");
  const int64_t restarts = done.value("/status/restarts"_json_pointer, int64_t{0});

  ChaosResult row;
  row.case_name = "api-storm";
  row.fault =
      "hub and both members: 2 failing requests (429 Retry-After 1 s / 500 / 503) every 250 ms, "
      "every watch cut every 2.5 s, the hub's watch cache lost once, from apply until the job ran "
      "(20 s at most)";
  row.outcome = "succeeded";
  for (const JobSample& sample : job_watch_->samples())
    if (sample.phase == "Running" && sample.step > 0) {
      row.recover_s = std::chrono::duration<double>(sample.at - storm_start).count();
      break;
    }
  row.note = std::to_string(rounds) + " storm rounds over " +
             std::to_string(static_cast<int>(storm_s)) + " s, " +
             (started ? "Running before it ended" : "Running only after it") + "; " +
             std::to_string(restarts) + " restart(s), " + std::to_string(operator_exits()) +
             " operator exit(s) (a lost Lease) restarted; recovered = apply -> Running";
  row.leaked = delete_and_count_leftovers("stormy");
  row.duplicates = duplicates_seen();
  EXPECT_EQ(row.leaked, 0);
  EXPECT_EQ(row.duplicates, 0);
  record_result(row);
}

}  // namespace
}  // namespace tessel::testing
