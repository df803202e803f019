// Faults under the stages: a node lost (its kubelet dies; the node lifecycle controller marks it
// Unknown and taints it), and the newest checkpoint damaged on disk. The job restarts from the
// last good checkpoint, on nodes it still has.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>

#include "placement/atomic_file.h"
#include "tests/chaos/chaos_fixture.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::steady_clock;

constexpr int kSteps = 120;
constexpr int64_t kFaultStep = 2 * kCheckpointInterval + 3;

TEST_F(ChaosE2e, ANodeLostUnderAStageTheJobIsPlacedWithoutItAndResumes) {
  apply_chaos_job("lost-node", kSteps);
  watch("lost-node");
  const JobSample before = wait_for_step("lost-node", kFaultStep);
  const StagePod pod = running_stage_pod("lost-node", 0);
  ASSERT_FALSE(pod.node.empty());

  const auto fault = steady_clock::now();
  fleet_->kubelet(pod.member).fail_node(pod.node);
  const ChaosResult row =
      finish_restart_case("lost-node",
                          "node " + pod.node +
                              " of rank 0 failed (processes killed, Lease stopped, conditions "
                              "Unknown, unreachable taints, its pods Ready=False)",
                          "lost-node", fault, before.attempt(), kCheckpointInterval);

  // The job said why: the node NotReady, also when the stages' transport errors were reported
  // first (the reason is amended once the node shows NotReady, before the next attempt is
  // placed: its pod, which no kubelet deletes, holds that attempt back until then), and the next
  // placement left the node out (a node that is not Ready is no candidate; one named in
  // status.excludedNodes is left out while the job fits).
  std::set<std::string> reasons, exclusions;
  bool placed_elsewhere = false;
  for (const JobSample& s : job_watch_->samples()) {
    if (s.at < fault) continue;
    if (condition_field(s.status, "Degraded", "status") == "True")
      reasons.insert(condition_field(s.status, "Degraded", "reason"));
    for (const json& e : s.status.value("excludedNodes", json::array()))
      exclusions.insert(e.value("node", "") + " (" + e.value("reason", "") + ")");
    const std::string nodes = s.status.value("/placement"_json_pointer, json::object()).dump();
    placed_elsewhere =
        placed_elsewhere || (s.attempt() > before.attempt() && s.phase == "Running" &&
                             nodes.find(pod.node) == std::string::npos);
  }
  EXPECT_FALSE(reasons.empty()) << "the job was never Degraded after node " << pod.node
                                << " was lost";
  EXPECT_TRUE(reasons.contains("NodeNotReady"))
      << "Degraded never named the lost node: " << ::testing::PrintToString(reasons);
  EXPECT_TRUE(exclusions.contains(pod.node + " (NodeNotReady)"))
      << ::testing::PrintToString(exclusions);
  EXPECT_TRUE(placed_elsewhere) << "no placement after the loss ran without " << pod.node;
  std::cout << "lost-node: Degraded reasons " << ::testing::PrintToString(reasons)
            << ", excludedNodes " << ::testing::PrintToString(exclusions) << "\n";
  EXPECT_EQ(row.outcome, "recovered");
}

// The step the newest checkpoint of a per-rank folder is at, and its files (manifest.json).
json current_manifest(const std::string& folder) {
  std::ifstream file(folder + "/manifest.json");
  if (!file) return nullptr;
  return json::parse(std::string(std::istreambuf_iterator<char>(file), {}));
}

TEST_F(ChaosE2e, TheNewestCheckpointCorruptedTheJobResumesFromThePreviousGoodOne) {
  const std::string folder = apply_chaos_job("corrupt", kSteps);
  watch("corrupt");
  const JobSample before = wait_for_step("corrupt", kFaultStep);

  // Freeze every stage (no checkpoint is written meanwhile), damage the newest step, then kill
  // them all: the restart reads the damaged folder.
  std::vector<int> pids;
  for (int rank = 0; rank < 4; ++rank) {
    const int pid = stage_pid(running_stage_pod("corrupt", rank));
    ASSERT_GT(pid, 0) << "rank " << rank << " has no tessel-stage process";
    pids.push_back(pid);
  }
  const auto fault = steady_clock::now();
  for (int pid : pids) ::kill(pid, SIGSTOP);
  const json manifest = current_manifest(folder);
  ASSERT_FALSE(manifest.is_null()) << "no " << folder << "/manifest.json";
  const int64_t newest = manifest.value("step", int64_t{-1});
  // The process kubelet's nodes share this machine's disk, so every rank's folder is this one and
  // holds both replicas' files of a stage; a rank falls back to its replica's file of the same
  // step. A byte is flipped in every file of stage 0 at the newest step, so that no verified state
  // of stage 0 is left at that step.
  std::vector<std::string> damaged;
  for (const json& entry : manifest.value("files", json::array())) {
    if (entry.value("stage", -1) != 0) continue;
    const std::string path = folder + "/" + entry.value("file", "");
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(file) << "cannot open " << path;
    const auto size = std::filesystem::file_size(path);
    file.seekg(static_cast<std::streamoff>(size / 2));
    char byte = 0;
    file.read(&byte, 1);
    file.seekp(static_cast<std::streamoff>(size / 2));
    byte = static_cast<char>(byte ^ 0x5a);
    file.write(&byte, 1);
    damaged.push_back(entry.value("file", ""));
  }
  ASSERT_EQ(damaged.size(), 2u) << manifest.dump();
  for (int pid : pids) ::kill(pid, SIGKILL);

  const ChaosResult row = finish_restart_case(
      "corrupt-checkpoint",
      "a byte flipped in the middle of both stage-0 rank files of the newest checkpoint (step " +
          std::to_string(newest) + ": " + damaged[0] + ", " + damaged[1] +
          "), every stage process then SIGKILLed",
      "corrupt", fault, before.attempt(), 2 * kCheckpointInterval);
  EXPECT_EQ(row.resumed_from, newest - kCheckpointInterval)
      << "not resumed from the checkpoint before the damaged one";
  // One interval lost plus the damaged one: the bound of this case is two intervals.
}

}  // namespace
}  // namespace tessel::testing
