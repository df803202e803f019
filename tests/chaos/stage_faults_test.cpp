// Faults of the stages themselves: a stage process killed, a stage gone silent on every link
// (a partition of one link between two stages is partition_test.cpp). The job restarts from its
// last checkpoint and loses at most one checkpoint interval.
// These inject nothing into an API server: they run against real clusters too.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "tests/chaos/chaos_fixture.h"

namespace tessel::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Far enough that two checkpoints were written, short enough for a small suite.
constexpr int kSteps = 120;
constexpr int64_t kFaultStep = 2 * kCheckpointInterval + 3;

TEST_F(ChaosE2e, AStageProcessKilledTheJobResumesFromItsLastCheckpoint) {
  apply_chaos_job("kill-stage", kSteps);
  watch("kill-stage");
  const JobSample before = wait_for_step("kill-stage", kFaultStep);
  const StagePod pod = running_stage_pod("kill-stage");
  const int pid = stage_pid(pod);
  ASSERT_GT(pid, 0) << "no tessel-stage process runs in pod " << pod.name;

  const auto fault = steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  finish_restart_case("kill-stage",
                      "SIGKILL of the tessel-stage process of rank " + std::to_string(pod.rank) +
                          " (pod " + pod.name + ")",
                      "kill-stage", fault, before.attempt(), kCheckpointInterval);
}

TEST_F(ChaosE2e, AStageGoneSilentLongerThanTheIoTimeoutFailsItsPeersAndTheJobResumes) {
  // A stopped process (SIGSTOP) sends nothing and reads nothing: every peer of it sees its link
  // go silent at once, as behind a black-holing route (one link alone: partition_test.cpp).
  // Its peers' transports give up after ioTimeoutSeconds.
  apply_chaos_job("silent-stage", kSteps);
  watch("silent-stage");
  const JobSample before = wait_for_step("silent-stage", kFaultStep);
  const StagePod pod = running_stage_pod("silent-stage");
  const int pid = stage_pid(pod);
  ASSERT_GT(pid, 0) << "no tessel-stage process runs in pod " << pod.name;

  const auto silence = milliseconds(static_cast<int>(kChaosIoTimeoutSeconds * 1000) + 2000);
  const auto fault = steady_clock::now();
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  std::this_thread::sleep_for(silence);
  ::kill(pid, SIGCONT);  // the link heals; the process may be gone already
  finish_restart_case("silent-stage",
                      "rank " + std::to_string(pod.rank) + " (pod " + pod.name +
                          ") silent on every link for " + std::to_string(silence.count()) +
                          " ms (SIGSTOP, then SIGCONT); ioTimeoutSeconds " +
                          std::to_string(static_cast<int>(kChaosIoTimeoutSeconds)),
                      "silent-stage", fault, before.attempt(), kCheckpointInterval);
}

}  // namespace
}  // namespace tessel::testing
