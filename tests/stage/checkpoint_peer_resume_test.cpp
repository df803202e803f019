// Resuming per-rank checkpoint dirs (checkpoint.shared: false) from the newest step every stage
// holds, through real tessel-stage processes: 2 stages x 2 replicas (rank r = replica x 2 +
// stage) train 4 steps with a checkpoint every 2, each rank in its own dir (one volume per pod);
// each case copies those dirs, damages them as a lost node, a disk or a killed save would, and
// resumes. A rank without a verified state gets it from a data-parallel peer over the transport;
// a corrupt or torn newest step is skipped, named, and the previous one used; the losses after
// the resume are bit-identical to a run never stopped. A stage with no state fails every rank
// with one error. A checkpoint of 2 replicas resumes with 1 (the same global batch) and back
// with 2, the new replicas' state from their peers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "checkpoint_damage.h"
#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/safetensors.h"
#include "stage_process_support.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::StageProcess;

constexpr int kStages = 2;
constexpr int kMicroBatches = 4;  // per replica, with 2 replicas: a global batch of 16
constexpr int kSaved = 4;         // steps of the first run, a checkpoint every 2
constexpr int kLast = 10;         // the reference run's steps

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class PeerResume : public ::testing::Test {
 protected:
  // The first run (steps 2 and 4 saved in every rank's dir) and the reference, never stopped.
  static void SetUpTestSuite() {
    base_ = fs::temp_directory_path() / ("tessel-peer-resume-" + std::to_string(::getpid()));
    fs::remove_all(base_);
    fs::create_directories(base_);
    auto first = launch(base_, "first", job(2, kSaved), 2);
    for (auto& p : first) {
      ASSERT_EQ(p->finish(120s), 0) << p->stderr_text();
    }
    auto never_stopped = job(2, kLast);
    never_stopped.erase("checkpoint");
    auto reference = launch(base_, "reference", never_stopped, 2);
    for (auto& p : reference) ASSERT_EQ(p->finish(120s), 0) << p->stderr_text();
    reference_ = reference[0]->losses();
    ASSERT_EQ(reference_.size(), static_cast<size_t>(kLast));
  }
  static void TearDownTestSuite() { fs::remove_all(base_); }

  void SetUp() override {
    ASSERT_EQ(reference_.size(), static_cast<size_t>(kLast));
    dir_ = base_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy(base_ / "pods", dir_ / "pods", fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Pod p's checkpoint dir under `root` (its volume; pod p runs rank p).
  static std::string ckpt(const fs::path& root, int pod) {
    return (root / "pods" / ("pod-" + std::to_string(pod)) / "ckpt").string();
  }
  std::string ckpt(int pod) const { return ckpt(dir_, pod); }

  // The job of `replicas` replicas with the same global batch, saving every 2 steps.
  static nlohmann::json job(int replicas, int steps) {
    auto j = testing::tiny_job(kStages, replicas, 4, kMicroBatches * 2 / replicas, "1f1b", steps);
    j["checkpoint"] = {
        {"dir", "set per rank"}, {"interval", 2}, {"resume", true}, {"shared", false}};
    return j;
  }

  // Every rank of `j` under `root`, rank r with pod r's dir.
  static std::vector<std::unique_ptr<StageProcess>> launch(const fs::path& root,
                                                           const std::string& name,
                                                           nlohmann::json j, int replicas) {
    std::vector<std::unique_ptr<StageProcess>> processes;
    for (int rank = 0; rank < kStages * replicas; ++rank) {
      if (j.contains("checkpoint")) j["checkpoint"]["dir"] = ckpt(root, rank);
      const fs::path path = root / ("job-" + name + "-rank-" + std::to_string(rank) + ".json");
      std::ofstream(path) << j.dump(2);
      processes.push_back(std::make_unique<StageProcess>(path.string(), rank));
    }
    return processes;
  }
  std::vector<std::unique_ptr<StageProcess>> resume(int replicas, int steps) {
    return launch(dir_, "resume-" + std::to_string(runs_++), job(replicas, steps), replicas);
  }

  // Every rank ends well, resumed from `step`, and its losses from there on are the reference's
  // (bit for bit, or within `tolerance`).
  void expect_resumed(std::vector<std::unique_ptr<StageProcess>>& processes, int64_t step,
                      int steps, double tolerance = 0) {
    double deviation = 0;
    for (size_t rank = 0; rank < processes.size(); ++rank) {
      StageProcess& p = *processes[rank];
      ASSERT_EQ(p.finish(120s), 0) << p.stderr_text();
      EXPECT_EQ(p.lines().front()["resumed_from"], step) << p.stderr_text();
      const std::vector<double> losses = p.losses();
      ASSERT_EQ(losses.size(), static_cast<size_t>(steps - step)) << p.stderr_text();
      for (size_t i = 0; i < losses.size(); ++i) {
        const double expected = reference_[static_cast<size_t>(step) + i];
        deviation = std::max(deviation, std::abs(losses[i] - expected));
        if (tolerance == 0) {
          EXPECT_EQ(losses[i], expected) << "rank " << rank << " step " << step + 1 + i;
        } else {
          EXPECT_NEAR(losses[i], expected, tolerance)
              << "rank " << rank << " step " << step + 1 + i;
        }
      }
    }
    if (tolerance != 0) {
      std::cerr << "[ width   ] " << processes.size() / kStages << " replicas from step " << step
                << ": largest |loss - uninterrupted loss| " << deviation << '\n';
    }
  }

  // The tensors of a rank file (metadata aside: it says which replica wrote it).
  static std::map<std::string, std::vector<std::byte>> tensors(const std::string& path) {
    std::map<std::string, std::vector<std::byte>> out;
    for (const auto& [name, tensor] : read_safetensors(path).tensors) out[name] = tensor.data;
    return out;
  }

  static inline fs::path base_;
  static inline std::vector<double> reference_;
  fs::path dir_;
  int runs_ = 0;
};

TEST_F(PeerResume, ALostDirIsFilledFromADataParallelPeerAndTheLossesContinueBitForBit) {
  fs::remove_all(fs::path(ckpt(2)).parent_path());  // the node of stage 0 replica 1 is gone
  auto processes = resume(2, 6);
  expect_resumed(processes, kSaved, 6);
  EXPECT_TRUE(contains(processes[2]->stderr_text(),
                       "tessel-stage rank 2 (stage 0 replica 1): resume: step 4: state from rank 0 "
                       "(stage 0 replica 0), a data-parallel peer"))
      << processes[2]->stderr_text();
  EXPECT_TRUE(contains(processes[0]->stderr_text(), "resume: step 4: state from its own dir, " +
                                                        checkpoint_rank_file(ckpt(0), 4, 0) +
                                                        "; sent to rank 2 (stage 0 replica 1)"))
      << processes[0]->stderr_text();
  EXPECT_TRUE(contains(processes[1]->stderr_text(), "resume: step 4: state from its own dir"))
      << processes[1]->stderr_text();
  // The replica that got its state from the peer trained the same parameters and moments.
  EXPECT_EQ(tensors(checkpoint_rank_file(ckpt(2), 6, 2)),
            tensors(checkpoint_rank_file(ckpt(0), 6, 0)));
}

TEST_F(PeerResume, ACorruptOrTornNewestStepIsSkippedNamedAndThePreviousOneUsed) {
  // Stage 1 loses step 4 in both replicas: a flipped byte in rank 1's file, a torn
  // <dir>/manifest.json in rank 3's dir. Stage 0's ranks hold step 4 and resume from 2 too.
  const std::string rank1 = checkpoint_rank_file(ckpt(1), 4, 1);
  std::string bytes = testing::read_all(rank1);
  bytes[bytes.size() - 5] = static_cast<char>(bytes[bytes.size() - 5] ^ 0x10);
  testing::write_all(rank1, bytes);
  const std::string top3 = checkpoint_manifest(ckpt(3));
  const std::string text = testing::read_all(top3);
  testing::write_all(top3, text.substr(0, text.size() / 2));

  auto processes = resume(2, 6);
  expect_resumed(processes, 2, 6);
  EXPECT_TRUE(contains(
      processes[1]->stderr_text(),
      "tessel-stage rank 1 (stage 1 replica 0): resume: skipping step 4: " + rank1 + ": tensor '"))
      << processes[1]->stderr_text();
  EXPECT_TRUE(contains(processes[1]->stderr_text(), "checksum mismatch"))
      << processes[1]->stderr_text();
  EXPECT_TRUE(contains(processes[3]->stderr_text(),
                       "tessel-stage rank 3 (stage 1 replica 1): resume: skipping step 4: " + top3 +
                           ": not valid JSON"))
      << processes[3]->stderr_text();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(contains(processes[rank]->stderr_text(), "resume: step 2: state from its own dir"))
        << processes[rank]->stderr_text();
  }
}

TEST_F(PeerResume, AStageWithNoStateFailsEveryRankNamingItBeforeAnyTrains) {
  fs::remove_all(ckpt(1));
  fs::remove_all(ckpt(3));
  auto processes = resume(2, 6);
  for (int rank = 0; rank < 4; ++rank) {
    StageProcess& p = *processes[rank];
    EXPECT_EQ(p.finish(60s), 1) << p.stderr_text();
    EXPECT_TRUE(contains(p.stderr_text(),
                         "resume: no checkpoint step at which every stage has a verified state "
                         "(checkpoint.shared: false, each rank's own " +
                             ckpt(rank) +
                             "): no rank holds a state of stage 1. The ranks hold: rank 0 (stage 0 "
                             "replica 0): steps 4, 2; rank 1 (stage 1 replica 0): none; rank 2 "
                             "(stage 0 replica 1): steps 4, 2; rank 3 (stage 1 replica 1): none"))
        << "rank " << rank << ": " << p.stderr_text();
    for (const auto& line : p.lines()) EXPECT_NE(line["event"], "step") << line.dump();
  }
}

TEST_F(PeerResume, ShrinkToOneReplicaAndRegrowToTwoContinueTheLossCurve) {
  // 1 replica of 8 micro-batches sums the same 16 sequences' gradients in another order than 2
  // replicas of 4 joined by the ring all-reduce: float sums of another order round differently
  // (~1e-7 relative a step), so the losses agree within a tolerance, not bit for bit.
  constexpr double kTolerance = 1e-4;
  auto shrunk = resume(1, 7);  // ranks 0 and 1: pods 0 and 1
  expect_resumed(shrunk, kSaved, 7, kTolerance);
  for (auto& p : shrunk) {
    EXPECT_TRUE(contains(p->stderr_text(), "resume: step 4: state from its own dir"))
        << p->stderr_text();
  }
  // The 1-replica run saved step 6 (every 2) and its last, 7, in pods 0 and 1; pods 2 and 3
  // still hold the 2-replica run's step 4 (rank 2 and 3 of it). Regrowing resumes from 7: the
  // new replica's ranks get it from their peers.
  auto regrown = resume(2, kLast);
  expect_resumed(regrown, 7, kLast, kTolerance);
  EXPECT_TRUE(contains(regrown[2]->stderr_text(),
                       "resume: step 7: state from rank 0 (stage 0 replica 0), a data-parallel "
                       "peer"))
      << regrown[2]->stderr_text();
  EXPECT_TRUE(contains(regrown[3]->stderr_text(),
                       "resume: step 7: state from rank 1 (stage 1 replica 0), a data-parallel "
                       "peer"))
      << regrown[3]->stderr_text();
  EXPECT_EQ(tensors(checkpoint_rank_file(ckpt(3), kLast, 3)),
            tensors(checkpoint_rank_file(ckpt(1), kLast, 1)));
}

TEST_F(PeerResume, AnotherLayerSplitIsRefusedNamingBothSplits) {
  auto j = job(2, 6);
  j["pipeline"]["layer_split"] = {1, 3};
  auto processes = launch(dir_, "split", j, 2);
  for (int rank = 0; rank < 4; ++rank) {
    StageProcess& p = *processes[rank];
    EXPECT_EQ(p.finish(60s), 1) << p.stderr_text();
    EXPECT_TRUE(contains(p.stderr_text(),
                         "written by a job of 2 stages x 1 chunks, layer split "
                         "2,2; this job has 2 stages x 1 chunks, layer split 1,3"))
        << "rank " << rank << ": " << p.stderr_text();
    for (const auto& line : p.lines()) EXPECT_NE(line["event"], "step") << line.dump();
  }
}

}  // namespace
}  // namespace tessel::stage
