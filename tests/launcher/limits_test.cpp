// The stated limits (placement/limits.h) inside the library functions behind `tessel local`:
// the job parser refuses names that are not Kubernetes names, data that is not a bounded
// regular file, counts past their limits and a model larger than this machine's memory, naming
// the field; the stage runtime's corpus and model checks hold the same limits.
#include "placement/limits.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "noderuntime/launcher/local_job.h"
#include "noderuntime/stage/gpt_config.h"
#include "noderuntime/stage/token_data.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

class LocalJobLimits : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessel-job-limits-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A valid job with one section replaced: name, model, training, data or topology.
  static std::string job(const std::string& name_line, const std::string& model,
                         const std::string& training, const std::string& data,
                         const std::string& topology = "{generate: {sites: 2}}") {
    return name_line + "topology: " + topology + "\nmodel: " + model + "\ntraining: " + training +
           "\ndata: " + data + "\npipeline: {stages: 2, replicas: 2}\n";
  }
  static constexpr const char* kModel = "{layers: 4, hidden: 32, heads: 4, seq_len: 16}";
  static constexpr const char* kTraining = "{steps: 2, micro_batch: 2, global_batch: 8}";
  static constexpr const char* kData = "{synthetic: {seed: 1, bytes: 4096}}";

  std::string error_of(const std::string& text, const std::string& source = "job.yaml") const {
    try {
      parse_local_job(text, source, dir_.string());
    } catch (const LocalJobError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(LocalJobLimits, TheBaseJobParses) {
  EXPECT_EQ(error_of(job("name: tiny\n", kModel, kTraining, kData)), "");
}

TEST_F(LocalJobLimits, NamesMustBeKubernetesNames) {
  EXPECT_TRUE(Contains(error_of(job("name: ../../../../x\n", kModel, kTraining, kData)),
                       "job.yaml: name: must consist of lowercase letters, digits and '-' (a "
                       "Kubernetes DNS-1123 label), got '../../../../x'"));
  EXPECT_TRUE(
      Contains(error_of(job("name: Fables\n", kModel, kTraining, kData)), "job.yaml: name:"));
  EXPECT_TRUE(
      Contains(error_of(job("name: " + std::string(64, 'a') + "\n", kModel, kTraining, kData)),
               "job.yaml: name: must be at most 63 characters"));
  // No name: the file's stem is the default, and it must be a valid name too.
  EXPECT_TRUE(Contains(error_of(job("", kModel, kTraining, kData), "some/dir/My_Job.yaml"),
                       "some/dir/My_Job.yaml: name: not given, and the default, the job file's "
                       "name 'My_Job', is not a valid job name"));
  const LocalJob named =
      parse_local_job(job("", kModel, kTraining, kData), "dir/fables-2.yaml", dir_.string());
  EXPECT_EQ(named.name, "fables-2");
}

TEST_F(LocalJobLimits, DataTextMustBeABoundedRegularFile) {
  EXPECT_TRUE(Contains(error_of(job("name: z\n", kModel, kTraining, "{text: /dev/zero}")),
                       "job.yaml: data.text: '/dev/zero' is not a regular file"));
  EXPECT_TRUE(
      Contains(error_of(job("name: z\n", kModel, kTraining, "{text: " + dir_.string() + "}")),
               "is not a regular file"));
  EXPECT_TRUE(Contains(error_of(job("name: z\n", kModel, kTraining, "{text: missing.txt}")),
                       "job.yaml: data.text: cannot read"));
  EXPECT_TRUE(
      Contains(error_of(job("name: z\n", kModel, kTraining, "{synthetic: {bytes: 1000000000000}}")),
               "job.yaml: data.synthetic.bytes: must be in [2, 1073741824]"));
}

TEST_F(LocalJobLimits, CountsSeedsAndScalesAreBounded) {
  EXPECT_TRUE(
      Contains(error_of(job("name: z\n", kModel,
                            "{steps: 100000000000, micro_batch: 2, global_batch: 8}", kData)),
               "job.yaml: training.steps: must be in [1, 10000000]"));
  EXPECT_TRUE(
      Contains(error_of(job("name: z\n", kModel,
                            "{steps: 2, micro_batch: 2, global_batch: 8, seed: -1}", kData)),
               "job.yaml: training.seed: expected a non-negative integer, got '-1'"));
  EXPECT_TRUE(Contains(error_of(job("name: z\n", kModel,
                                    "{steps: 2, micro_batch: 2, global_batch: 3000000000}", kData)),
                       "job.yaml: training.global_batch: must be in [1, 1048576]"));
  EXPECT_TRUE(Contains(error_of(job("name: z\n", kModel, kTraining, kData,
                                    "{generate: {sites: 2}, bandwidth_scale: 1.0e300}")),
                       "job.yaml: topology.bandwidth_scale: must be in (0, 1000000]"));
  EXPECT_TRUE(Contains(error_of(job("name: z\n", kModel, kTraining, kData,
                                    "{generate: {sites: 2, min_bandwidth_gbps: 1.0e-300}}")),
                       "job.yaml: topology.generate.min_bandwidth_gbps: must be at least 1e-06 "
                       "Gbit/s (1 kbit/s), got 1e-300"));
  EXPECT_TRUE(
      Contains(error_of(job("name: z\n", kModel, kTraining, kData, "{generate: {sites: 5000}}")),
               "job.yaml: topology.generate.sites: must be in [1, 1024]"));
}

TEST_F(LocalJobLimits, ModelsPastTheLimitsOrTheMachinesMemoryAreRefused) {
  EXPECT_TRUE(
      Contains(error_of(job("name: z\n", "{layers: 4, hidden: 1048576, heads: 4, seq_len: 16}",
                            kTraining, kData)),
               "job.yaml: model.hidden: must be at most 65536, got 1048576"));
  // Within every field's limit, but 4 layers of hidden 32768 are 5e10 parameters: 16 bytes each
  // (weights, gradients, Adam's m and v) in two replicas is 1.6 TB.
  const std::string huge =
      job("name: z\n", "{layers: 4, hidden: 32768, heads: 4, seq_len: 16}", kTraining, kData);
  EXPECT_TRUE(Contains(error_of(huge), "job.yaml: model: the job's 4 stage processes"));
  EXPECT_TRUE(Contains(error_of(huge), "needs about"));

  const LocalJob small =
      parse_local_job(job("name: z\n", kModel, kTraining, kData), "job.yaml", dir_.string());
  const double bytes = estimate_local_job_memory(small);
  // At least the parameters' state: 16 bytes a parameter, two replicas.
  EXPECT_GE(bytes, 2 * 16.0 * double(small.workload.total_parameters()));
  EXPECT_LT(bytes, 1e9);
}

TEST_F(LocalJobLimits, JobFilesAreReadBounded) {
  try {
    load_local_job("/dev/zero");
    FAIL() << "expected LocalJobError";
  } catch (const LocalJobError& e) {
    EXPECT_TRUE(Contains(e.what(), "/dev/zero: cannot read the job file: is not a regular file"));
  }
}

TEST(StageRuntimeLimits, CorpusAndModelAreBounded) {
  try {
    stage::TokenCorpus::from_file("/dev/zero", 256);
    FAIL() << "expected ConfigError";
  } catch (const stage::ConfigError& e) {
    EXPECT_TRUE(Contains(e.what(), "data file '/dev/zero': is not a regular file"));
  }
  try {
    stage::TokenCorpus::synthetic(1, int64_t{1} << 40, 256);
    FAIL() << "expected ConfigError";
  } catch (const stage::ConfigError& e) {
    EXPECT_TRUE(Contains(e.what(), "bytes must be in [2, 1073741824]"));
  }
  stage::GptConfig config{4, 1 << 20, 16, 4 << 20, 16, 256};
  try {
    config.validate();
    FAIL() << "expected ConfigError";
  } catch (const stage::ConfigError& e) {
    EXPECT_TRUE(Contains(e.what(), "model.hidden: must be at most 65536, got 1048576"));
  }
}

}  // namespace
}  // namespace tessel::launcher
