// Checkpoints in per-rank dirs (job.json checkpoint.shared: false, as stage pods in different
// clusters have them) through four real tessel-stage processes, each with a job file whose
// checkpoint.dir is a folder of its own (one volume per pod): SIGTERM to every rank at once (a
// suspend: the operator deletes the pods) stops all of them after the same step with a
// checkpoint in every dir, and the resume continues the step count with the losses of a run
// never stopped (so does the shared dir); a rank whose dir is lost, or whose manifest names another
// step, fails every rank with one error naming the ranks and their steps before any trains;
// per-rank dirs that are in fact one folder still work. The shared default is
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

// Every rank fails, its error holding `fragment`, and none trained.
void expect_every_rank_fails_with(std::vector<std::unique_ptr<StageProcess>>& processes,
                                  const std::string& fragment) {
  for (int rank = 0; rank < kWorld; ++rank) {
    StageProcess& p = *processes[rank];
    EXPECT_EQ(p.finish(60s), 1) << p.stderr_text();
    EXPECT_NE(p.stderr_text().find(fragment), std::string::npos)
        << "rank " << rank << ": " << p.stderr_text();
    for (const auto& line : p.lines()) EXPECT_NE(line["event"], "step") << line.dump();
  }
}

TEST_F(UnsharedCheckpoints, ALostDirOrAnotherStepFailsEveryRankNamingTheRanksAndSteps) {
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
  const std::string where =
      "resume: the ranks' checkpoints (checkpoint.shared: false, each rank's own " + ckpt(0) + ") ";

  // A save killed between two ranks' manifests: rank 1's names the step before.
  const std::string rank1_manifest = checkpoint_manifest(ckpt(1));
  const std::string current = file_text(rank1_manifest);
  fs::copy_file(checkpoint_step_manifest(ckpt(1), 2), rank1_manifest,
                fs::copy_options::overwrite_existing);
  auto mixed = launch(job(5, 1));
  // Each rank names its own dir: rank 0's is checked below.
  expect_every_rank_fails_with(
      mixed,
      "are not of one step: step 3: rank 0 (stage 0 replica 0), rank 2 (stage 0 replica 1), rank "
      "3 (stage 1 replica 1); step 2: rank 1 (stage 1 replica 0). Every rank resumes from the "
      "same step or none does");
  EXPECT_NE(mixed[0]->stderr_text().find(where), std::string::npos) << mixed[0]->stderr_text();
  std::ofstream(rank1_manifest, std::ios::binary) << current;

  // One pod's volume lost: rank 2 has no checkpoint at all.
  fs::remove_all(ckpt(2));
  auto lost = launch(job(5, 1));
  expect_every_rank_fails_with(
      lost,
      "are not of one step: step 3: rank 0 (stage 0 replica 0), rank 1 (stage 1 replica 0), rank "
      "3 (stage 1 replica 1); no checkpoint: rank 2 (stage 0 replica 1)");
  EXPECT_FALSE(fs::exists(checkpoint_step_dir(ckpt(2), 3)));
  for (int rank : {0, 1, 3}) EXPECT_EQ(latest_checkpoint(ckpt(rank)), 3);

  // A rank whose manifest cannot be read fails with its own error, the others name it.
  std::ofstream(checkpoint_manifest(ckpt(3)), std::ios::binary) << "{";
  fs::create_directories(ckpt(2));
  auto unreadable = launch(job(5, 1));
  EXPECT_EQ(unreadable[3]->finish(60s), 1);
  EXPECT_NE(unreadable[3]->stderr_text().find(checkpoint_manifest(ckpt(3)) + ": not valid JSON"),
            std::string::npos)
      << unreadable[3]->stderr_text();
  for (int rank : {0, 1, 2}) {
    EXPECT_EQ(unreadable[rank]->finish(60s), 1);
    EXPECT_NE(unreadable[rank]->stderr_text().find(
                  "resume: not starting: rank 3 (stage 1 replica 1) could not read its "
                  "checkpoint manifest (its error says why)"),
              std::string::npos)
        << "rank " << rank << ": " << unreadable[rank]->stderr_text();
  }
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
