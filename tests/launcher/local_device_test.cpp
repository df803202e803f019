// `tessel local --device`: the choice is checked with tessel-stage's own parser before anything
// is written and reaches every stage process; a bf16 job is trained, and when its ranks run on
// the CPU backend (fp32 arithmetic) the launcher says so once on its standard error (an fp32
// job on the CUDA backend likewise) while each rank's device line stays in its log; the report
// names what each rank computed on.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "launcher_process.h"
#include "noderuntime/launcher/launcher.h"
#include "noderuntime/launcher/stage_devices.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++count;
  }
  return count;
}

// What a FILE* written by the launcher holds, through open_memstream.
class CapturedFile {
 public:
  CapturedFile() : file_(open_memstream(&data_, &size_)) {}
  ~CapturedFile() {
    if (file_) std::fclose(file_);
    std::free(data_);
  }
  CapturedFile(const CapturedFile&) = delete;
  CapturedFile& operator=(const CapturedFile&) = delete;
  std::FILE* get() { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(data_, size_);
  }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

class LocalDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessel-local-device-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The tiny 2 x 2 job with the given model precision.
  LocalJob job(const std::string& precision) {
    std::string text = testing::tiny_job_yaml(2);
    const std::string model = "seq_len: 16}";
    text.replace(text.find(model), model.size(), "seq_len: 16, precision: " + precision + "}");
    const fs::path path = dir_ / "job.yaml";
    std::ofstream(path) << text;
    return load_local_job(path.string());
  }

  LocalRunOptions options(const std::string& device) {
    LocalRunOptions o;
    o.output_dir = (dir_ / "out").string();
    o.out = nullptr;
    o.stage_binary = TESSEL_STAGE_BINARY;
    o.device = device;
    return o;
  }

  fs::path dir_;
};

TEST_F(LocalDevice, AnUnknownDeviceIsRefusedBeforeAnythingIsWritten) {
  for (const std::string bad : {"gpu", "", "CUDA", "cpu "}) {
    try {
      run_local_job(job("bf16"), options(bad));
      ADD_FAILURE() << "--device '" << bad << "' was accepted";
    } catch (const LocalJobError& e) {
      EXPECT_EQ(std::string(e.what()), "--device: expected cpu, cuda or auto, got '" + bad + "'");
    }
    EXPECT_FALSE(fs::exists(dir_ / "out")) << bad;
  }
}

TEST_F(LocalDevice, Bf16OnTheCpuBackendTrainsAndIsSaidOnceOnStandardError) {
  CapturedFile err;
  LocalRunOptions o = options("cpu");
  o.err = err.get();
  const LocalRunResult result = run_local_job(job("bf16"), o);
  const std::string said = err.text();
  ASSERT_EQ(result.exit_code, 0) << result.message << "\n" << said;
  ASSERT_EQ(result.steps.size(), 2u);
  EXPECT_TRUE(std::isfinite(result.steps.back().loss));
  // Once for the whole job, naming the first rank's reason; the ranks' lines stay in their logs.
  EXPECT_EQ(said,
            "tessel local: the job's precision is bf16, but all 4 ranks run on the CPU backend, "
            "which computes it in fp32 (rank 0, stage 0 replica 0: --device cpu (fp32 "
            "arithmetic))\n");
  EXPECT_NE(read_text(dir_ / "out" / "job.json").find("\"precision\": \"bf16\""),
            std::string::npos);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(result.ranks[rank].backend, "cpu") << rank;
    const std::string log =
        read_text(dir_ / "out" / "logs" / ("rank-" + std::to_string(rank) + ".log"));
    EXPECT_EQ(count_of(log, "tessel-stage rank " + std::to_string(rank) +
                                ": device cpu: --device cpu (fp32 arithmetic)\n"),
              1u)
        << log;
  }
  const std::string report = read_text(dir_ / "out" / "report.md");
  EXPECT_NE(report.find("| computes on | exit |"), std::string::npos) << report;
  EXPECT_EQ(count_of(report, " | cpu | exited with status 0 |"), 4u) << report;
}

TEST_F(LocalDevice, AnFp32JobSaysNothingAboutPrecision) {
  CapturedFile err;
  LocalRunOptions o = options("auto");
  o.err = err.get();
  const LocalRunResult result = run_local_job(job("fp32"), o);
  ASSERT_EQ(result.exit_code, 0) << result.message;
  EXPECT_EQ(err.text(), "");
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(result.ranks[rank].backend, "cpu") << rank;  // auto keeps an fp32 job on the CPU
    EXPECT_NE(read_text(dir_ / "out" / "logs" / ("rank-" + std::to_string(rank) + ".log"))
                  .find("device cpu: --device auto: the job's precision is fp32"),
              std::string::npos);
  }
}

TEST(StageDevices, TheDeviceLineIsReadFromTheLogAndAnythingElseIsNot) {
  const fs::path log =
      fs::temp_directory_path() / ("tessel-stage-devices-" + std::to_string(::getpid()) + ".log");
  const auto device_of = [&](const std::string& text) {
    std::ofstream(log, std::ios::binary | std::ios::trunc) << text;
    return device_of_log(log.string());
  };
  const auto cuda = device_of(
      "tessel-stage rank 3: device cuda: --device auto: a bf16 job and a usable GPU\nmore\n");
  ASSERT_TRUE(cuda);
  EXPECT_EQ(cuda->device, "cuda");
  EXPECT_EQ(cuda->reason, "--device auto: a bf16 job and a usable GPU");
  const auto later = device_of("warning: x\ntessel-stage rank 0: device cpu: --device cpu (a)\n");
  ASSERT_TRUE(later);
  EXPECT_EQ(later->device, "cpu");
  EXPECT_EQ(later->reason, "--device cpu (a)");
  EXPECT_FALSE(device_of(""));
  EXPECT_FALSE(device_of("tessel-stage rank 0: device cpu: half a line"));  // still being written
  EXPECT_FALSE(device_of("tessel-stage rank 0: device tpu: --device tpu\n"));
  EXPECT_FALSE(device_of("tessel-stage: --device cuda: no usable GPU: no driver\n"));
  EXPECT_FALSE(device_of("rank 0: device cpu: x\n"));
  fs::remove(log);
  EXPECT_FALSE(device_of_log(log.string()));
}

TEST(StageDevices, ThePrecisionNoteCountsTheRanksOfTheOtherArithmeticAndNamesTheFirst) {
  using placement::Precision;
  const std::vector<std::string> labels = {"stage 0 replica 0", "stage 1 replica 0",
                                           "stage 0 replica 1"};
  const StageDevice cpu{"cpu", "why"};
  const StageDevice cuda{"cuda", "gpu"};
  EXPECT_EQ(precision_note(Precision::BF16, {cuda, cuda, std::nullopt}, labels), "");
  EXPECT_EQ(precision_note(Precision::BF16, {std::nullopt, std::nullopt, std::nullopt}, labels),
            "");
  EXPECT_EQ(precision_note(Precision::FP32, {cpu, cpu, cpu}, labels), "");
  EXPECT_EQ(precision_note(Precision::BF16, {cuda, cpu, cpu}, labels),
            "the job's precision is bf16, but 2 of 3 ranks run on the CPU backend, which "
            "computes it in fp32 (rank 1, stage 1 replica 0: why)");
  EXPECT_EQ(precision_note(Precision::BF16, {cpu, std::nullopt, cpu}, labels),
            "the job's precision is bf16, but all 2 ranks run on the CPU backend, which "
            "computes it in fp32 (rank 0, stage 0 replica 0: why)");
  EXPECT_EQ(precision_note(Precision::BF16, {cpu}, {"stage 0 replica 0"}),
            "the job's precision is bf16, but its rank runs on the CPU backend, which computes "
            "it in fp32 (rank 0, stage 0 replica 0: why)");
  EXPECT_EQ(precision_note(Precision::FP32, {cpu, cpu, cuda}, labels),
            "the job's precision is fp32, but 1 of 3 ranks run on the CUDA backend, which "
            "computes it in bf16 mixed precision (fp32 master weights) (rank 2, stage 0 replica "
            "1: gpu)");
  EXPECT_EQ(precision_note(Precision::FP16, {cpu, cpu, cuda}, labels), "");  // never trained
}

}  // namespace
}  // namespace tessel::launcher
