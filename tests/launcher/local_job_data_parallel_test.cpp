// `tessel local`'s data_parallel section and training.optimizer: the example parses into the
// low-communication mode, the mode and the optimizer reach job.json through the launcher's
// writer (make_job_json, api/stage_job_file.h) and parse back there as written, and every bad value
// is refused naming the file and the field.
#include <gtest/gtest.h>

#include <string>

#include "api/stage_job_file.h"
#include "noderuntime/launcher/job_file.h"
#include "noderuntime/launcher/local_job.h"
#include "noderuntime/stage/job_spec.h"

namespace tessel::launcher {
namespace {

const std::string kExamples = std::string(TESSEL_SOURCE_DIR) + "/examples/local";

std::string with_section(const std::string& extra) {
  return "name: dp\n"
         "topology: {file: two-sites-slow.yaml}\n"
         "model: {layers: 2, hidden: 32, heads: 4, seq_len: 16}\n"
         "training: {steps: 20, micro_batch: 2, global_batch: 8, optimizer: sgd}\n"
         "data: {synthetic: {seed: 1, bytes: 20000}}\n"
         "pipeline: {stages: 1, replicas: 2}\n" +
         extra;
}

std::string error_of(const std::string& text) {
  try {
    parse_local_job(text, "job.yaml", kExamples);
  } catch (const LocalJobError& e) {
    return e.what();
  }
  return "";
}

TEST(LocalJobDataParallel, TheExampleRunsTheLowCommunicationMode) {
  const LocalJob job = load_local_job(kExamples + "/fables-low-communication.yaml");
  EXPECT_TRUE(job.data_parallel.enabled);
  EXPECT_EQ(job.data_parallel.sync_every, 10);
  EXPECT_EQ(job.data_parallel.delta_bits, 8);
  EXPECT_TRUE(job.data_parallel.delayed);
  EXPECT_EQ(job.replicas, 2);
  EXPECT_FALSE(load_local_job(kExamples + "/fables.yaml").data_parallel.enabled);
}

TEST(LocalJobDataParallel, ReachesJobJsonAndParsesBackThere) {
  const LocalJob job = parse_local_job(
      with_section("data_parallel: {mode: low-communication, sync_every: 5, delta_bits: 4, "
                   "outer_momentum: 0.5, delayed: false, stagger: true}\n"),
      "job.yaml", kExamples);
  EXPECT_EQ(job.training.optimizer, stage::InnerOptimizer::kSgd);
  LocalPlan plan;
  plan.layer_split = {2};
  plan.device_of_rank = {0, 1};
  // H and bits given: the plan runs them as given (no timing needed to choose).
  plan.data_parallel = placement::choose_data_parallel(
      job.workload.data_parallel, {}, {}, "data_parallel.sync_every", "data_parallel.delta_bits");
  JobFilePaths paths;
  paths.topology = kExamples + "/two-sites-slow.yaml";
  paths.rendezvous_address = "127.0.0.1:4000";
  paths.token_file = "token";
  const stage::JobSpec parsed =
      stage::parse_job_spec(make_job_json(job, plan, paths, 7).dump(), "job.json");
  const stage::LowCommunication& l = parsed.training.low_communication;
  EXPECT_TRUE(l.enabled);
  EXPECT_EQ(l.sync_every, 5);
  EXPECT_EQ(l.delta_bits, 4);
  EXPECT_FLOAT_EQ(l.outer_momentum, 0.5f);
  EXPECT_FALSE(l.delayed);
  EXPECT_TRUE(l.stagger);
  EXPECT_EQ(l.final_step, 20);
  EXPECT_EQ(parsed.training.optimizer, stage::InnerOptimizer::kSgd);
}

TEST(LocalJobDataParallel, JobJsonRefusesAnUnknownOptimizer) {
  api::TrainingJobSpec spec;
  spec.model.layers = 2;
  spec.model.hidden = 32;
  spec.model.heads = 4;
  spec.model.seq_len = 16;
  spec.model.vocab = 256;
  spec.model.precision = placement::Precision::FP32;
  spec.micro_batch = 2;
  spec.global_batch = 8;
  spec.parallelism.stages = 1;
  spec.parallelism.replicas = 2;
  spec.training.steps = 20;
  spec.data.synthetic = true;
  api::StageJobFile file;
  file.ranks = {{0, 0, "127.0.0.1", 4000, ""}, {0, 1, "127.0.0.1", 4001, ""}};
  file.optimizer = "lion";
  try {
    api::stage_job_text(spec, file);
    FAIL() << "wrote an unknown optimizer";
  } catch (const api::ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find("training.optimizer"), std::string::npos) << e.what();
  }
}

TEST(LocalJobDataParallel, ErrorsNameTheField) {
  EXPECT_EQ(error_of(with_section("data_parallel: {mode: sometimes}\n")),
            "job.yaml: data_parallel.mode: must be \"synchronous\" or \"low-communication\", got "
            "\"sometimes\"");
  EXPECT_NE(error_of(with_section("data_parallel: {mode: low-communication, delta_bits: 6}\n"))
                .find("data_parallel.delta_bits: must be 32, 8, 4 or auto, got 6"),
            std::string::npos);
  EXPECT_NE(error_of(with_section("data_parallel: {mode: low-communication, sync_every: 0}\n"))
                .find("data_parallel.sync_every"),
            std::string::npos);
  EXPECT_NE(error_of(with_section("data_parallel: {mode: low-communication, outer_momentum: 1}\n"))
                .find("data_parallel.outer_momentum"),
            std::string::npos);
  EXPECT_NE(error_of(with_section("data_parallel: {mode: synchronous, sync_every: 3}\n"))
                .find("data_parallel.sync_every"),
            std::string::npos);
  // Checkpoints hold the mode's outer state (noderuntime/stage/checkpoint_outer_state.h).
  EXPECT_EQ(error_of(with_section("data_parallel: {mode: low-communication}\n"
                                  "checkpoint: {interval: 5}\n")),
            "");
  std::string bad_optimizer = with_section("");
  bad_optimizer.replace(bad_optimizer.find("optimizer: sgd"), 14, "optimizer: adam");
  EXPECT_NE(error_of(bad_optimizer).find("training.optimizer: must be \"adamw\" or \"sgd\""),
            std::string::npos);
}

}  // namespace
}  // namespace tessel::launcher
