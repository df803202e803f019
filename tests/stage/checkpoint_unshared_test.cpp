// Checkpoints in per-rank dirs (job.json checkpoint.shared: false, as stage pods in different
// clusters have them) through four real tessel-stage processes, each with a job file whose
// checkpoint.dir is a folder of its own (one volume per pod): SIGTERM to every rank at once (a
// suspend: the operator deletes the pods) stops all of them after the same step with a
// checkpoint in every dir, and the resume continues the step count with the losses of a run
// never stopped (so does the shared dir); a rank whose dir is lost, whose manifest names an older
// step or cannot be read, resumes with the others from the newest step every stage holds
// (checkpoint_peer_resume_test.cpp has more); per-rank dirs that are in fact one folder still
// work. The shared default is
// checkpoint_process_test.cpp's.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/job_spec.h"
#include "stage_process_support.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::StageProcess;

constexpr int kWorld = 4;  // 2 stages x 2 replicas; rank r = replica x 2 + stage

std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class UnsharedCheckpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');  // "Case/PerRankDirs" of a parameterised one
    dir_ = fs::temp_directory_path() /
           ("tessel-stage-unshared-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Rank r's own checkpoint dir (its pod's volume).
  std::string ckpt(int rank) const {
    return (dir_ / ("pod-" + std::to_string(rank)) / "ckpt").string();
  }

  static nlohmann::json job(int steps, int interval, int keep = 3) {
    auto j = testing::tiny_job(2, 2, 4, 2, "1f1b", steps);
    j["checkpoint"] = {{"dir", "set per rank"},
                       {"interval", interval},
                       {"resume", true},
                       {"keep", keep},
                       {"shared", false}};
    return j;
  }

  // Every rank with the same job but for its checkpoint dir (`dir` for all of them when set).
  std::vector<std::unique_ptr<StageProcess>> launch(nlohmann::json j, const std::string& dir = "") {
    std::vector<std::unique_ptr<StageProcess>> processes;
    for (int rank = 0; rank < kWorld; ++rank) {
      if (j.contains("checkpoint")) j["checkpoint"]["dir"] = dir.empty() ? ckpt(rank) : dir;
      const fs::path path =
          dir_ / ("job-" + std::to_string(runs_) + "-rank-" + std::to_string(rank) + ".json");
      std::ofstream(path) << j.dump(2);
      processes.push_back(std::make_unique<StageProcess>(path.string(), rank));
    }
    ++runs_;
    return processes;
  }

  fs::path dir_;
  int runs_ = 0;
};

TEST_F(UnsharedCheckpoints, SharedIsTrueByDefaultAndChecked) {
  auto j = job(1, 1);
  EXPECT_FALSE(parse_job_spec(j.dump(), "job.json").checkpoint.shared);
  j["checkpoint"].erase("shared");
  EXPECT_TRUE(parse_job_spec(j.dump(), "job.json").checkpoint.shared);
  j["checkpoint"]["shared"] = "no";
  try {
    parse_job_spec(j.dump(), "job.json");
    FAIL() << "shared: \"no\" accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "job.json: checkpoint.shared: expected true or false, got \"no\""),
              std::string::npos)
        << e.what();
  }
}

// SIGTERM to every rank at once (as the kubelets send it when the operator deletes a suspended
// job's pods), with per-rank dirs (false) and with the shared one (true).
class StopAndResume : public UnsharedCheckpoints, public ::testing::WithParamInterface<bool> {
 protected:
  bool shared() const { return GetParam(); }
  std::string one() const { return (dir_ / "shared" / "ckpt").string(); }
  // The dir rank r writes and reads.
  std::string dir_of(int rank) const { return shared() ? one() : ckpt(rank); }
  std::vector<std::unique_ptr<StageProcess>> launch_job(int steps) {
    auto j = job(steps, 0);
    j["checkpoint"]["shared"] = shared();
    return launch(j, shared() ? one() : "");
  }
};

TEST_P(StopAndResume, SigtermToEveryRankStopsThemWithACheckpointAndTheResumeContinues) {
  auto stopped_run = launch_job(100000);
  for (auto& p : stopped_run) {
    ASSERT_TRUE(p->next_line(60s));  // start
    ASSERT_TRUE(p->next_line(60s));  // a first step: the mesh is up
  }
  const auto signalled = std::chrono::steady_clock::now();
  for (auto& p : stopped_run) kill(p->pid(), SIGTERM);
  std::vector<int64_t> stopped_at;
  for (auto& p : stopped_run) {
    EXPECT_EQ(p->finish(60s), 128 + SIGTERM) << p->stderr_text();
    const auto& lines = p->lines();
    ASSERT_GE(lines.size(), 2u);
    ASSERT_EQ(lines.back()["event"], "stopped") << lines.back().dump();
    EXPECT_EQ(lines.back()["signal"], "SIGTERM");
    const int64_t step = lines.back()["step"].get<int64_t>();
    const auto& saved = lines[lines.size() - 2];
    EXPECT_EQ(saved["event"], "checkpoint") << saved.dump();
    EXPECT_EQ(saved["step"], step) << saved.dump();
    stopped_at.push_back(step);
  }
  std::cerr << "[ stop    ] every rank stopped with a checkpoint "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count()
            << " s after SIGTERM\n";
  ASSERT_EQ(stopped_at, std::vector<int64_t>(kWorld, stopped_at[0]));
  const int64_t stop = stopped_at[0];

  // Every dir holds the same manifest, which names every rank's file, and the rank files of
  // the ranks that write there (per-rank: its own alone).
  const std::string manifest = file_text(checkpoint_manifest(dir_of(0)));
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_NE(manifest.find(checkpoint_rank_file("", stop, rank)), std::string::npos) << manifest;
    EXPECT_EQ(latest_checkpoint(dir_of(rank)), stop) << dir_of(rank);
    EXPECT_EQ(file_text(checkpoint_manifest(dir_of(rank))), manifest) << dir_of(rank);
    for (int other = 0; other < kWorld; ++other) {
      EXPECT_EQ(fs::exists(checkpoint_rank_file(dir_of(rank), stop, other)),
                shared() || other == rank)
          << checkpoint_rank_file(dir_of(rank), stop, other);
    }
  }

  // The same job again continues at the checkpoint's step, as a run that was never stopped.
  constexpr int kMore = 3;
  auto resumed = launch_job(static_cast<int>(stop) + kMore);
  auto unstopped = job(static_cast<int>(stop) + kMore, 0);
  unstopped.erase("checkpoint");
  auto reference = launch(unstopped);
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_EQ(reference[rank]->finish(120s), 0) << reference[rank]->stderr_text();
    ASSERT_EQ(resumed[rank]->finish(120s), 0) << resumed[rank]->stderr_text();
    const std::vector<double> whole = reference[rank]->losses();
    ASSERT_EQ(whole.size(), static_cast<size_t>(stop + kMore));
    const std::vector<double> before = stopped_run[rank]->losses();
    ASSERT_EQ(before.size(), static_cast<size_t>(stop));
    EXPECT_EQ(before, std::vector<double>(whole.begin(), whole.begin() + stop));  // bit for bit
    EXPECT_EQ(resumed[rank]->lines().front()["resumed_from"], stop);
    std::vector<int64_t> steps;
    for (const auto& line : resumed[rank]->lines()) {
      if (line["event"] == "step") steps.push_back(line["step"].get<int64_t>());
    }
    EXPECT_EQ(steps, (std::vector<int64_t>{stop + 1, stop + 2, stop + 3}));
    EXPECT_EQ(resumed[rank]->losses(), std::vector<double>(whole.begin() + stop, whole.end()));
    EXPECT_EQ(latest_checkpoint(dir_of(rank)), stop + kMore);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedOrNot, StopAndResume, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "SharedDir" : "PerRankDirs";
                         });

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The faults that made every rank refuse before per-rank resumes took the newest step every stage
// holds (issue 14): now each rank skips what it cannot use, saying why, and the job resumes.
TEST_F(UnsharedCheckpoints, ALostDirOrAnUncommittedStepResumesFromTheNewestStepEveryStageHolds) {
  for (auto& p : launch(job(3, 1, 2))) ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
  for (int rank = 0; rank < kWorld; ++rank) {  // every rank pruned its own dir to keep = 2
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(ckpt(rank))) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"manifest.json", "step-00000002", "step-00000003"}))
        << ckpt(rank);
  }
  // A save killed between two ranks' manifests: rank 1's names the step before.
  fs::copy_file(checkpoint_step_manifest(ckpt(1), 2), checkpoint_manifest(ckpt(1)),
                fs::copy_options::overwrite_existing);
  // Rank 3's manifest.json cannot be read: its newest step is not used.
  std::ofstream(checkpoint_manifest(ckpt(3)), std::ios::binary) << "{";
  // One pod's volume lost: rank 2 has no checkpoint at all.
  fs::remove_all(ckpt(2));

  auto resumed = launch(job(5, 1));
  auto unstopped = job(5, 0);
  unstopped.erase("checkpoint");
  auto reference = launch(unstopped);
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_EQ(reference[rank]->finish(120s), 0) << reference[rank]->stderr_text();
    StageProcess& p = *resumed[rank];
    ASSERT_EQ(p.finish(120s), 0) << p.stderr_text();
    EXPECT_EQ(p.lines().front()["resumed_from"], 2) << p.stderr_text();  // stage 1 holds only 2
    const std::vector<double> whole = reference[rank]->losses();
    EXPECT_EQ(p.losses(), std::vector<double>(whole.begin() + 2, whole.end()));  // bit for bit
  }
  EXPECT_TRUE(contains(resumed[1]->stderr_text(),
                       "tessel-stage rank 1 (stage 1 replica 0): resume: skipping step 3: " +
                           checkpoint_manifest(ckpt(1)) +
                           " names step 2: this newer step's save did not finish in this folder"))
      << resumed[1]->stderr_text();
  EXPECT_TRUE(contains(resumed[3]->stderr_text(),
                       "tessel-stage rank 3 (stage 1 replica 1): resume: skipping step 3: " +
                           checkpoint_manifest(ckpt(3)) + ": not valid JSON"))
      << resumed[3]->stderr_text();
  EXPECT_TRUE(contains(resumed[2]->stderr_text(),
                       "tessel-stage rank 2 (stage 0 replica 1): resume: step 2: state from rank 0 "
                       "(stage 0 replica 0), a data-parallel peer (no verified state of it in " +
                           ckpt(2) + ")"))
      << resumed[2]->stderr_text();
  for (int rank = 0; rank < kWorld; ++rank) EXPECT_EQ(latest_checkpoint(ckpt(rank)), 5);
}

TEST_F(UnsharedCheckpoints, PerRankDirsThatAreOneFolderStillWork) {
  // Every rank writes the same manifest bytes and prunes the same folders (keep 1) at once.
  const std::string one = (dir_ / "one").string();
  for (auto& p : launch(job(4, 1, 1), one)) ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
  EXPECT_EQ(latest_checkpoint(one), 4);
  for (auto& p : launch(job(6, 1, 1), one)) {
    ASSERT_EQ(p->finish(60s), 0) << p->stderr_text();
    EXPECT_EQ(p->lines().front()["resumed_from"], 4);
  }
  EXPECT_EQ(latest_checkpoint(one), 6);
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_TRUE(fs::exists(checkpoint_rank_file(one, 6, rank)));
  }
}

}  // namespace
}  // namespace tessel::stage
