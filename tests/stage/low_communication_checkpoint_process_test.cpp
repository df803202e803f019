// A low-communication job's checkpoints through real tessel-stage processes (job.json with
// data_parallel and checkpoint together): 2 stages x 2 replicas, H = 3, 8-bit, delayed, a
// checkpoint every 3 steps in a shared dir. The step-3 checkpoint (a delayed exchange in flight)
// made current again and resumed gives every rank the losses of steps 4..9 of the run that wrote
// it, bit for bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "checkpoint_damage.h"
#include "noderuntime/stage/checkpoint.h"
#include "stage_process_support.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::StageProcess;

constexpr int kSteps = 9;
constexpr int kRanks = 4;

class LowCommunicationCheckpointProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessel-lowcomm-ckpt-proc-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string ckpt() const { return (dir_ / "ckpt").string(); }

  nlohmann::json job() const {
    auto j = testing::tiny_job(2, 2, 4, 2, "1f1b", kSteps);
    j["data_parallel"] = {
        {"mode", "low-communication"}, {"sync_every", 3}, {"delta_bits", 8}, {"delayed", true}};
    j["checkpoint"] = {{"dir", ckpt()}, {"interval", 3}, {"resume", true}, {"keep", 5}};
    return j;
  }

  // Runs every rank of `j` to the end; their losses per rank.
  std::vector<std::vector<double>> run(const nlohmann::json& j, int64_t* resumed_from) {
    const std::string path = (dir_ / ("job-" + std::to_string(runs_++) + ".json")).string();
    std::ofstream(path) << j.dump(2);
    std::vector<std::unique_ptr<StageProcess>> processes;
    for (int r = 0; r < kRanks; ++r) processes.push_back(std::make_unique<StageProcess>(path, r));
    std::vector<std::vector<double>> losses;
    for (auto& p : processes) {
      EXPECT_EQ(p->finish(120s), 0) << p->stderr_text();
      const auto& first = p->lines().front()["resumed_from"];
      if (resumed_from) *resumed_from = first.is_null() ? -1 : first.get<int64_t>();
      losses.push_back(p->losses());
    }
    return losses;
  }

  fs::path dir_;
  int runs_ = 0;
};

TEST_F(LowCommunicationCheckpointProcesses, ResumingAStepWithAnExchangeInFlightIsBitExact) {
  const std::vector<std::vector<double>> whole = run(job(), nullptr);
  ASSERT_EQ(latest_checkpoint(ckpt()), kSteps);
  // Step 3 current again, as if the run had been killed after saving it.
  for (const int64_t later : {6, 9}) fs::remove_all(checkpoint_step_dir(ckpt(), later));
  testing::write_all(checkpoint_manifest(ckpt()),
                     testing::read_all(checkpoint_step_manifest(ckpt(), 3)));
  int64_t resumed_from = 0;
  const std::vector<std::vector<double>> resumed = run(job(), &resumed_from);
  EXPECT_EQ(resumed_from, 3);
  EXPECT_GT(whole[1].back(), 0.0);  // rank 1, the last stage, reports its replica's loss
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_EQ(whole[rank].size(), static_cast<size_t>(kSteps)) << "rank " << rank;
    ASSERT_EQ(resumed[rank].size(), static_cast<size_t>(kSteps - 3)) << "rank " << rank;
    for (int step = 4; step <= kSteps; ++step) {
      EXPECT_EQ(resumed[rank][step - 4], whole[rank][step - 1])
          << "rank " << rank << " step " << step;
    }
  }
}

}  // namespace
}  // namespace tessel::stage
