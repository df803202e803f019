// The local job file: a complete job parses with its defaults, relative paths resolve against
// the job's folder, and every bad input is refused with the file, the field and the reason.
#include "noderuntime/launcher/local_job.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#ifndef TESSEL_SOURCE_DIR
#error "define TESSEL_SOURCE_DIR as the repository root"
#endif

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

class LocalJobFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessel-local-job-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "corpus.txt") << "the fox and the crow\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A valid job; `extra` lines are appended (a later key replaces nothing: YAML keys must be
  // unique, so tests that change a section write the whole job through `job_with`).
  static std::string job_with(const std::string& model, const std::string& training,
                              const std::string& rest) {
    return "format_version: 1\n"
           "name: tiny\n"
           "topology: {generate: {sites: 2, seed: 3}}\n"
           "model: " +
           model +
           "\n"
           "training: " +
           training +
           "\n"
           "data: {text: corpus.txt}\n"
           "pipeline: {stages: 2, replicas: 2}\n" +
           rest;
  }
  static std::string valid_model() { return "{layers: 4, hidden: 32, heads: 4, seq_len: 16}"; }
  static std::string valid_training() { return "{steps: 10, micro_batch: 2, global_batch: 8}"; }

  LocalJob parse(const std::string& text) const {
    return parse_local_job(text, "job.yaml", dir_.string());
  }
  // The error message of parsing text, or "" when it parses.
  std::string error_of(const std::string& text) const {
    try {
      parse(text);
    } catch (const LocalJobError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(LocalJobFile, ValidJobGetsItsDefaults) {
  const LocalJob job = parse(job_with(valid_model(), valid_training(), ""));
  EXPECT_EQ(job.name, "tiny");
  EXPECT_EQ(job.stages, 2);
  EXPECT_EQ(job.replicas, 2);
  EXPECT_EQ(job.workload.layers, 4);
  EXPECT_EQ(job.workload.vocab, 256);  // byte-level by default
  EXPECT_EQ(job.workload.precision, placement::Precision::FP32);
  EXPECT_FALSE(job.workload.recompute_activations);
  EXPECT_EQ(job.workload.micro_batches_per_replica(2), 2);
  EXPECT_EQ(job.training.steps, 10);
  EXPECT_EQ(job.training.threads, 1);
  EXPECT_EQ(job.schedule.kind, placement::ScheduleKind::OneFOneB);
  EXPECT_TRUE(job.schedule.overlap);
  EXPECT_EQ(job.placement.strategy, placement::Strategy::Evolutionary);
  EXPECT_EQ(job.data.kind, stage::DataSpec::Kind::kText);
  EXPECT_EQ(fs::path(job.data.path), dir_ / "corpus.txt");
  ASSERT_TRUE(job.topology.generate);
  EXPECT_EQ(job.topology.generate->sites, 2);
  EXPECT_EQ(job.topology.generate->seed, 3u);
  EXPECT_EQ(job.checkpoint_interval, -1);
}

TEST_F(LocalJobFile, EveryOptionalSectionIsRead) {
  const LocalJob job = parse(job_with(
      "{layers: 8, hidden: 32, heads: 4, seq_len: 16, vocab: 300}",
      "{steps: 5, micro_batch: 1, global_batch: 8, learning_rate: 0.01, threads: 2, seed: 9}",
      "schedule: {kind: interleaved, chunks: 2, overlap: false}\n"
      "placement: {strategy: random, evaluations: 50, seed: 4}\n"
      "timeouts: {connect_s: 5, io_s: 7.5}\n"
      "checkpoint: {interval: 2, resume: true}\n"));
  EXPECT_EQ(job.workload.vocab, 300);
  EXPECT_DOUBLE_EQ(job.training.learning_rate, 0.01);
  EXPECT_EQ(job.training.threads, 2);
  EXPECT_EQ(job.training.seed, 9u);
  EXPECT_EQ(job.schedule.kind, placement::ScheduleKind::Interleaved);
  EXPECT_EQ(job.chunks(), 2);
  EXPECT_FALSE(job.schedule.overlap);
  EXPECT_EQ(job.placement.strategy, placement::Strategy::Random);
  EXPECT_EQ(job.placement.evaluations, 50);
  EXPECT_DOUBLE_EQ(job.io_timeout_s, 7.5);
  EXPECT_EQ(job.checkpoint_interval, 2);
  EXPECT_TRUE(job.resume);
}

TEST_F(LocalJobFile, TheExampleJobParses) {
  const LocalJob job =
      load_local_job(std::string(TESSEL_SOURCE_DIR) + "/examples/local/fables.yaml");
  EXPECT_EQ(job.world_size(), 4);
  EXPECT_TRUE(fs::exists(job.topology.file)) << job.topology.file;
  EXPECT_TRUE(fs::exists(job.data.path)) << job.data.path;
}

TEST_F(LocalJobFile, ErrorsNameTheFileAndTheField) {
  struct Case {
    std::string text;
    std::string expected;
  };
  const std::string model = valid_model(), training = valid_training();
  const std::vector<Case> cases = {
      {job_with(model, training, "modle: {}\n"), "job.yaml: modle: unknown field"},
      {job_with(model, "{micro_batch: 2, global_batch: 8}", ""),
       "job.yaml: training.steps: missing"},
      {job_with(model, "{steps: ten, micro_batch: 2, global_batch: 8}", ""),
       "job.yaml: training.steps: expected an integer, got 'ten'"},
      {job_with(model, "{steps: 0, micro_batch: 2, global_batch: 8}", ""),
       "job.yaml: training.steps: must be in [1, "},
      {job_with(model, "{steps: 1, micro_batch: 2, global_batch: 8, learning_rate: -1}", ""),
       "job.yaml: training.learning_rate: must be in (0, 1]"},
      {job_with(model, "{steps: 1, micro_batch: 2, global_batch: 7}", ""),
       "job.yaml: training.global_batch: "},
      {job_with("{layers: 4, hidden: 32, heads: 4, seq_len: 16, precision: fp16}", training, ""),
       "job.yaml: model.precision: tessel local trains fp32 or bf16 (bf16 on a GPU, or in fp32 "
       "on the CPU), got fp16"},
      {job_with("{layers: 4, hidden: 32, heads: 4, seq_len: 16, precision: fp8}", training, ""),
       "job.yaml: model.precision: unknown precision 'fp8' (expected fp32, fp16 or bf16)"},
      {job_with("{layers: 4, hidden: 32, heads: 4, seq_len: 16, recompute_activations: true}",
                training, ""),
       "job.yaml: model.recompute_activations: "},
      {job_with("{layers: 4, hidden: 30, heads: 4, seq_len: 16}", training, ""),
       "job.yaml: model.heads: hidden (30) must be a multiple of heads (4)"},
      {job_with("{preset: gpt5}", training, ""), "job.yaml: model.preset: unknown model preset"},
      {job_with(model, "{steps: 1, micro_batch: 4, global_batch: 2}", ""),
       "job.yaml: training.global_batch: must be >= micro_batch (4)"},
      {job_with("{layers: 4, hidden: 32, heads: 4, seq_len: 16, vocab: 100}", training, ""),
       "job.yaml: model.vocab: tokens are bytes"},
      {job_with("{layers: 4, hidden: 32, heads: 4, seq_len: 16, widht: 3}", training, ""),
       "job.yaml: model.widht: unknown field"},
      {job_with("{layers: 1, hidden: 32, heads: 4, seq_len: 16}", training, ""),
       "job.yaml: pipeline.stages: must be in [1, 1], got 2"},
      {job_with(model, training, "schedule: {kind: zigzag}\n"), "job.yaml: schedule.kind: "},
      {job_with(model, training, "schedule: {kind: interleaved, chunks: 1}\n"),
       "job.yaml: schedule.chunks: the interleaved schedule needs 2 or more"},
      {job_with(model, training, "schedule: {kind: 1f1b, chunks: 2}\n"),
       "job.yaml: schedule.chunks: only the interleaved schedule"},
      {job_with(model, training, "schedule: {overlap: maybe}\n"),
       "job.yaml: schedule.overlap: expected true or false, got 'maybe'"},
      {job_with(model, training, "placement: {strategy: best}\n"),
       "job.yaml: placement.strategy: "},
      {job_with(model, training, "timeouts: {io_s: 0}\n"),
       "job.yaml: timeouts.io_s: must be in (0"},
      {"name: x\n", "job.yaml: training: missing"},
      {"training: [1, 2]\n", "job.yaml: training: expected a mapping"},
      {"training: {steps: 1\n", "job.yaml: line "},
      {"format_version: 2\n", "job.yaml: format_version: unsupported version 2"},
  };
  for (const Case& c : cases) {
    const std::string error = error_of(c.text);
    EXPECT_NE(error.find(c.expected), std::string::npos)
        << "expected \"" << c.expected << "\" in \"" << error << "\" for\n"
        << c.text;
  }
}

TEST_F(LocalJobFile, Bf16IsTrainedAndFp32StaysTheDefault) {
  const LocalJob bf16 = parse(job_with(
      "{layers: 4, hidden: 32, heads: 4, seq_len: 16, precision: bf16}", valid_training(), ""));
  EXPECT_EQ(bf16.workload.precision, placement::Precision::BF16);
  const LocalJob fp32 = parse(job_with(
      "{layers: 4, hidden: 32, heads: 4, seq_len: 16, precision: fp32}", valid_training(), ""));
  EXPECT_EQ(fp32.workload.precision, placement::Precision::FP32);
  EXPECT_EQ(local_precision_problem(placement::Precision::FP32), "");
  EXPECT_EQ(local_precision_problem(placement::Precision::BF16), "");
  EXPECT_EQ(local_precision_problem(placement::Precision::FP16),
            "tessel local trains fp32 or bf16 (bf16 on a GPU, or in fp32 on the CPU), got fp16");
}

TEST_F(LocalJobFile, TopologyAndDataSourcesAreExclusiveAndChecked) {
  const std::string model = valid_model(), training = valid_training();
  const std::string head =
      "model: " + model + "\ntraining: " + training + "\npipeline: {stages: 2, replicas: 2}\n";
  EXPECT_NE(error_of(head + "data: {text: corpus.txt}\n"
                            "topology: {file: t.yaml, generate: {sites: 2}}\n")
                .find("job.yaml: topology: give exactly one of file"),
            std::string::npos);
  EXPECT_NE(error_of(head + "data: {text: corpus.txt}\ntopology: {}\n")
                .find("job.yaml: topology: give exactly one of file"),
            std::string::npos);
  EXPECT_NE(error_of(head + "data: {text: corpus.txt}\n"
                            "topology: {generate: {sites: 2, min_bandwidth_gbps: 0}}\n")
                .find("job.yaml: topology.generate.min_bandwidth_gbps: must be in (0"),
            std::string::npos);
  EXPECT_NE(error_of(head + "data: {text: corpus.txt}\n"
                            "topology: {generate: {sites: 2}, bandwidth_scale: -2}\n")
                .find("job.yaml: topology.bandwidth_scale: must be in (0"),
            std::string::npos);
  EXPECT_NE(error_of(head + "topology: {generate: {sites: 2}}\ndata: {text: missing.txt}\n")
                .find("job.yaml: data.text: cannot read '" + (dir_ / "missing.txt").string()),
            std::string::npos);
  EXPECT_NE(error_of(head + "topology: {generate: {sites: 2}}\n"
                            "data: {text: corpus.txt, synthetic: {seed: 1}}\n")
                .find("job.yaml: data: give exactly one of text"),
            std::string::npos);
  const LocalJob synthetic =
      parse(head + "topology: {file: t.yaml}\ndata: {synthetic: {seed: 5, bytes: 1000}}\n");
  EXPECT_EQ(synthetic.data.kind, stage::DataSpec::Kind::kSynthetic);
  EXPECT_EQ(synthetic.data.bytes, 1000);
  EXPECT_EQ(fs::path(synthetic.topology.file), dir_ / "t.yaml");
}

TEST_F(LocalJobFile, MissingJobFileIsNamed) {
  try {
    load_local_job((dir_ / "nope.yaml").string());
    FAIL() << "no error";
  } catch (const LocalJobError& e) {
    EXPECT_NE(std::string(e.what()).find("nope.yaml: cannot open the job file"), std::string::npos);
  }
}

}  // namespace
}  // namespace tessel::launcher
