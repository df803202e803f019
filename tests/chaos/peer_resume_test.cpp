// A node lost with the only copy of its stage's checkpoint: the checkpoints live on a hostPath,
// which is each node's own disk (the process kubelet gives every node a root of its own, as a
// real cluster does), so the rank placed where no checkpoint of its stage exists takes its state
// from a data-parallel peer over the network, and the loss after the resume is that of an
// uninterrupted run of the same job at the same steps.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>

#include "tests/chaos/chaos_fixture.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::steady_clock;
namespace fs = std::filesystem;

// Enough steps after the resume that the two runs' status polls (every 100 ms, the status
// written every 0.2 s) see a few steps in common besides the last.
constexpr int kSteps = 200;
constexpr int64_t kFaultStep = 2 * kCheckpointInterval + 3;
// The same job from the same seed on the CPU backend is deterministic, and a peer's state is its
// exact bytes; what may differ is the order in which an all-reduce adds (a ring over other
// nodes), a few float ulps of a loss near 3-10, hence a relative tolerance well above that and
// far below what one lost or repeated step changes (the loss moves by ~1e-2 a step here).
constexpr double kLossTolerance = 1e-4;

// The checkpoints on a hostPath at /var/lib/tessel/<job>, which is each node's own directory.
// spec.checkpoint.path is where the stage process opens it: job.json is a file, whose contents
// the process kubelet does not rewrite, so the path is given relative to the stage's working
// directory (its pod directory), through the container's mount symlink
// (<pod dir>/root/stage/<mountPath>; process_kubelet_container_setup.h). On a real cluster the
// same job names the mountPath itself.
std::function<void(json&)> checkpoints_on_each_node(const std::string& job_name) {
  const std::string mount = "/var/lib/tessel/" + job_name;
  return [mount](json& job) {
    job["spec"]["checkpoint"]["path"] = "root/stage" + mount;
    job["spec"]["template"]["volumes"] = {
        {{"name", "checkpoints"}, {"hostPath", {{"path", mount}, {"type", "DirectoryOrCreate"}}}}};
    job["spec"]["template"]["volumeMounts"] = {{{"name", "checkpoints"}, {"mountPath", mount}}};
  };
}

// step -> loss of the samples that have both (the status' progress, polled every 100 ms).
std::map<int64_t, double> losses(const std::vector<JobSample>& samples, int64_t after_attempt) {
  std::map<int64_t, double> out;
  for (const JobSample& s : samples)
    if (s.step >= 0 && s.loss >= 0 && s.attempt() >= after_attempt) out[s.step] = s.loss;
  return out;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(ChaosE2e, ANodeLostWithTheOnlyCopyOfItsCheckpointResumesFromADataParallelPeer) {
  // The uninterrupted run: the same job (same seed, same steps) under another name.
  apply_chaos_job("peer-reference", kSteps, 3, checkpoints_on_each_node("peer-reference"));
  watch("peer-reference");
  wait_for_phase("peer-reference", "Succeeded", kChaosTimeout);
  const std::map<int64_t, double> reference = losses(job_watch_->samples(), 0);
  ASSERT_EQ(delete_and_count_leftovers("peer-reference"), 0);

  apply_chaos_job("peer-resume", kSteps, 3, checkpoints_on_each_node("peer-resume"));
  watch("peer-resume");
  const JobSample before = wait_for_step("peer-resume", kFaultStep);
  const StagePod pod = running_stage_pod("peer-resume", 0);
  ASSERT_FALSE(pod.node.empty());
  // Its checkpoints exist on that node only.
  const fs::path lost_dir =
      fs::path(fleet_->kubelet(pod.member).node_root(pod.node)) / "var/lib/tessel/peer-resume";
  ASSERT_TRUE(fs::exists(lost_dir)) << lost_dir << ": no checkpoint folder on the node of rank 0";

  const auto fault = steady_clock::now();
  fleet_->kubelet(pod.member).fail_node(pod.node);
  // Past the resume (the status shows the old step until the next attempt reports), the logs of
  // this attempt's pods are read before anything could start pods of the same names again.
  wait_for_step("peer-resume", before.step + 2 * kCheckpointInterval);
  // Some rank of the next attempt took stage 0's state from its data-parallel peer
  // (checkpoint_resume.cpp's line).
  std::vector<std::string> peer_lines;
  for (int m = 0; m < 2; ++m) {
    for (const auto& entry : fs::directory_iterator(fleet_->kubelet(m).work_dir())) {
      if (entry.path().filename().string().find("_peer-resume") == std::string::npos) continue;
      std::istringstream log(read_text(entry.path() / "stage.log"));
      for (std::string line; std::getline(log, line);)
        if (line.find(", a data-parallel peer") != std::string::npos) peer_lines.push_back(line);
    }
  }
  EXPECT_FALSE(peer_lines.empty()) << "no rank resumed from a data-parallel peer's state";
  bool stage0 = false;
  for (const std::string& line : peer_lines) {
    std::cout << "peer-resume: " << line << "\n";
    stage0 = stage0 || line.find("(stage 0 replica") != std::string::npos;
  }
  EXPECT_TRUE(stage0) << "no stage-0 rank took its state from a peer";

  const ChaosResult row = finish_restart_case(
      "peer-resume",
      "node " + pod.node +
          " of rank 0 failed, with the only copy of rank 0's checkpoints (a hostPath: each node's "
          "own disk)",
      "peer-resume", fault, before.attempt(), kCheckpointInterval);
  EXPECT_EQ(row.outcome, "recovered");
  // The loss after the resume is the uninterrupted run's at the same step.
  const std::map<int64_t, double> resumed = losses(job_watch_->samples(), before.attempt() + 1);
  int compared = 0;
  double worst = 0;
  for (const auto& [step, loss] : resumed) {
    const auto it = reference.find(step);
    if (step <= row.resumed_from || it == reference.end()) continue;
    ++compared;
    const double relative = std::abs(loss - it->second) / std::abs(it->second);
    worst = std::max(worst, relative);
    EXPECT_LE(relative, kLossTolerance) << "step " << step << ": loss " << loss
                                        << " after the resume, " << it->second << " uninterrupted";
  }
  // The polls catch a step here and there of each run. At least one step after the resume must
  // be caught by both (the last step's loss is not always in a finished job's status: CI saw a
  // run without it, so it cannot be the one step relied on).
  EXPECT_GE(compared, 1) << "no step after the resume was seen in both runs' status";
  std::cout << "peer-resume: " << reference.size() << " steps seen uninterrupted, "
            << resumed.size() << " after the resume; " << compared
            << " steps after the resume compared with the "
            << "uninterrupted run, largest relative loss difference " << worst << "\n";
}

}  // namespace
}  // namespace tessel::testing
