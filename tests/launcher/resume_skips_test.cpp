// resume_skips: the skip lines of the stage processes' logs, each fault once with the rank that
// said it, in rank order; a line still being written and other lines left out; at most
// kMaxResumeSkips lines and a count of the rest.
#include "noderuntime/launcher/resume_skips.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

class ResumeSkips : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessel-resume-skips-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string log(int rank, const std::string& text) {
    const std::string path = (dir_ / ("rank-" + std::to_string(rank) + ".log")).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  fs::path dir_;
};

TEST_F(ResumeSkips, EachFaultOnceWithTheRankThatSaidIt) {
  const std::string top =
      "step 3: /c/manifest.json: missing; it commits the newest step, which "
      "is therefore not used";
  const std::string file =
      "step 2: /c/step-00000002/rank-00001.safetensors: tensor 'w': "
      "checksum mismatch (stored crc32c 1a2b3c4d, data 00000000)";
  const std::vector<std::string> logs = {
      log(0,
          "tessel-stage rank 0: device cpu: the default\n"
          "tessel-stage rank 0 (stage 0 replica 0): resume: skipping " +
              top +
              "\n"
              "tessel-stage rank 0 (stage 0 replica 0): resume: step 2: state from /c/x\n"),
      log(1, "tessel-stage rank 1 (stage 1 replica 0): resume: skipping " + top +
                 "\n"
                 "tessel-stage rank 1 (stage 1 replica 0): resume: skipping " +
                 file +
                 "\n"
                 "tessel-stage rank 1 (stage 1 replica 0): resume: skipping step 1: half"),
      (dir_ / "no-such.log").string()};
  EXPECT_EQ(resume_skips(logs), (std::vector<std::string>{top + " (rank 0)", file + " (rank 1)"}));
  EXPECT_TRUE(resume_skips({log(2,
                                "tessel-stage rank 2 (stage 0 replica 1): resume: step 3: "
                                "state from /c/step-00000003/rank-00002.safetensors\n")})
                  .empty());
}

TEST_F(ResumeSkips, ManyAreCutWithACountOfTheRest) {
  std::string text;
  for (size_t step = 1; step <= kMaxResumeSkips + 3; ++step) {
    text += "tessel-stage rank 0 (stage 0 replica 0): resume: skipping step " +
            std::to_string(step) + ": f: damaged\n";
  }
  const std::vector<std::string> lines = resume_skips({log(0, text)});
  ASSERT_EQ(lines.size(), kMaxResumeSkips + 1);
  EXPECT_EQ(lines.front(), "step 1: f: damaged (rank 0)");
  EXPECT_EQ(lines.back(), "and 3 more (the logs say them)");
}

}  // namespace
}  // namespace tessel::launcher
