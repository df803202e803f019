// job.json's data_parallel section is written by api/stage_job_file (the operator and `tessel
// local` write every job.json through it; api/ cannot include the stage) and read by the stage's
// parse_job_spec: what it writes parses to the LowCommunication the TrainingJob's
// spec.dataParallel says, and the spec's defaults of the outer settings are the stage runtime's.
#include <gtest/gtest.h>

#include <string>

#include "api/stage_job_file.h"
#include "noderuntime/stage/job_spec.h"

namespace tessel::stage {
namespace {

const std::string kExamples = std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/";

api::StageJobFile two_replicas() {
  api::StageJobFile f;
  f.ranks = {{0, 0, "0.0.0.0", 0, "member-a/gpu-0"}, {0, 1, "0.0.0.0", 0, "member-b/gpu-0"}};
  f.data_path = "/data/fables.txt";
  f.rendezvous = api::StageEndpoint{"operator.hub.example:7443", "/etc/tessel/token", ""};
  return f;
}

api::TrainingJobSpec low_communication_job() {
  return api::load_trainingjob_file(kExamples + "fables-low-communication.yaml").spec;
}

LowCommunication read_back(const api::TrainingJobSpec& spec) {
  return parse_job_spec(api::stage_job_text(spec, two_replicas()), "job.json")
      .training.low_communication;
}

void expect_same(const LowCommunication& a, const LowCommunication& b) {
  EXPECT_EQ(a.enabled, b.enabled);
  EXPECT_EQ(a.sync_every, b.sync_every);
  EXPECT_EQ(a.delta_bits, b.delta_bits);
  EXPECT_EQ(a.outer_learning_rate, b.outer_learning_rate);  // the same float, bit for bit
  EXPECT_EQ(a.outer_momentum, b.outer_momentum);
  EXPECT_EQ(a.nesterov, b.nesterov);
  EXPECT_EQ(a.delayed, b.delayed);
  EXPECT_EQ(a.stagger, b.stagger);
  EXPECT_EQ(a.final_step, b.final_step);
}

TEST(StageJobFileDataParallel, EverySettingParsesBackAsWritten) {
  api::TrainingJobSpec spec = low_communication_job();
  spec.data_parallel = {
      placement::DataParallelKind::LowCommunication, 7, 4, 0.35, 0.5, false, false, true};
  const LowCommunication l = read_back(spec);
  EXPECT_TRUE(l.enabled);
  EXPECT_EQ(l.sync_every, 7);
  EXPECT_EQ(l.delta_bits, 4);
  EXPECT_FLOAT_EQ(l.outer_learning_rate, 0.35f);
  EXPECT_FLOAT_EQ(l.outer_momentum, 0.5f);
  EXPECT_FALSE(l.nesterov);
  EXPECT_FALSE(l.delayed);
  EXPECT_TRUE(l.stagger);
  EXPECT_EQ(l.final_step, 300);  // the job's training.steps
}

// The outer settings' defaults; H and the bits the spec leaves out are the planner's, which the
// caller fills in before job.json is written (placement/data_parallel_choice.h), here the
// runtime's.
TEST(StageJobFileDataParallel, TheSpecsDefaultsAreTheRuntimes) {
  api::TrainingJobSpec spec = low_communication_job();
  spec.data_parallel = {};
  spec.data_parallel.mode = placement::DataParallelKind::LowCommunication;
  LowCommunication runtime;  // the stage's defaults
  runtime.enabled = true;
  runtime.final_step = spec.training.steps;
  spec.data_parallel.sync_every = runtime.sync_every;
  spec.data_parallel.delta_bits = runtime.delta_bits;
  expect_same(read_back(spec), runtime);
}

TEST(StageJobFileDataParallel, ASynchronousJobIsSynchronousThere) {
  api::TrainingJobSpec spec = low_communication_job();
  spec.data_parallel = {};
  EXPECT_FALSE(read_back(spec).enabled);
}

}  // namespace
}  // namespace tessel::stage
