// The writer of job.json (api/stage_job_file.h) and its reader (the stage's parse_job_spec)
// agree: an operator's job and a `tessel local` one, written from a TrainingJob's spec, parse
// back with every field as written.
#include <gtest/gtest.h>

#include <string>

#include "api/stage_job_file.h"
#include "noderuntime/stage/job_spec.h"

namespace tessel::stage {
namespace {

const std::string kExample = std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/fables.yaml";

// The example TrainingJob with every setting off its default, so that a field the writer
// dropped or the reader defaulted shows.
api::TrainingJobSpec spec_off_defaults() {
  api::TrainingJobSpec spec = api::load_trainingjob_file(kExample).spec;
  spec.model.precision = placement::Precision::BF16;
  spec.model.ffn_hidden = 384;
  spec.parallelism.schedule = placement::ScheduleKind::Interleaved;
  spec.parallelism.virtual_stages = 2;
  spec.parallelism.microbatch_group = 2;
  spec.parallelism.overlap = false;
  spec.training.steps = 7;
  spec.training.learning_rate = 0.002;
  spec.training.weight_decay = 0.05;
  spec.training.beta1 = 0.8;
  spec.training.beta2 = 0.9;
  spec.training.eps = 1e-6;
  spec.training.grad_clip = 0.5;
  spec.training.seed = 99;
  spec.training.threads = 3;
  spec.checkpoint.interval_steps = 5;
  spec.checkpoint.keep = 4;
  spec.network.connect_timeout_s = 30;
  spec.network.io_timeout_s = 90.5;
  return spec;
}

JobSpec round_trip(const api::TrainingJobSpec& spec, const api::StageJobFile& file) {
  return parse_job_spec(api::stage_job_text(spec, file), "job.json");
}

void expect_training_as_written(const api::TrainingJobSpec& spec, const JobSpec& job) {
  EXPECT_EQ(job.model, (GptConfig{4, 128, 4, 384, 64, 256, placement::Precision::BF16}));
  EXPECT_EQ(job.workload.precision, placement::Precision::BF16);
  EXPECT_EQ(job.workload.micro_batch, 4);
  EXPECT_EQ(job.workload.global_batch, 16);
  EXPECT_EQ(job.steps, 7);
  EXPECT_EQ(job.threads, 3);
  EXPECT_FLOAT_EQ(job.training.adamw.learning_rate, 0.002f);
  EXPECT_FLOAT_EQ(job.training.adamw.weight_decay, 0.05f);
  EXPECT_FLOAT_EQ(job.training.adamw.beta1, 0.8f);
  EXPECT_FLOAT_EQ(job.training.adamw.beta2, 0.9f);
  EXPECT_FLOAT_EQ(job.training.adamw.eps, 1e-6f);
  EXPECT_FLOAT_EQ(job.training.grad_clip, 0.5f);
  EXPECT_EQ(job.training.seed, 99u);
  EXPECT_EQ(job.training.schedule, placement::ScheduleKind::Interleaved);
  EXPECT_EQ(job.training.microbatch_group, 2);
  EXPECT_FALSE(job.training.overlap);
  EXPECT_EQ(job.training.micro_batch, 4);
  EXPECT_EQ(job.training.micro_batches, 2);  // 16 / (2 replicas x 4)
  EXPECT_EQ(job.layout.stages, spec.parallelism.stages);
  EXPECT_EQ(job.layout.replicas, spec.parallelism.replicas);
  EXPECT_EQ(job.layout.chunks, 2);
  EXPECT_EQ(job.connect_timeout, std::chrono::milliseconds(30000));
  EXPECT_EQ(job.io_timeout, std::chrono::milliseconds(90500));
}

TEST(StageJobFileRoundTrip, AnOperatorJob) {
  const api::TrainingJobSpec spec = spec_off_defaults();
  api::StageJobFile f;
  f.job_id = api::stage_job_id("0b6c3f7e-2d3a-4f60-8d0e-5a1f9c2b7e44", 0);
  f.layer_split = {1, 1, 1, 1};
  for (int r = 0; r < 4; ++r) {
    f.ranks.push_back({r % 2, r / 2, "0.0.0.0", 0, r < 2 ? "member-a/gpu-0" : "member-b/gpu-7"});
  }
  f.data_path = "/usr/share/tessel/examples/data/fables.txt";
  f.checkpoint_dir = "checkpoints";
  f.checkpoint_shared = false;
  f.rendezvous = api::StageEndpoint{"operator.hub.example:7443", "/etc/tessel/stage/token",
                                    "/etc/tessel/stage/ca.crt"};
  f.advertise_env = "POD_IP";
  f.progress = f.rendezvous;

  const JobSpec job = round_trip(spec, f);
  EXPECT_EQ(job.job_id, f.job_id);
  expect_training_as_written(spec, job);
  EXPECT_EQ(job.data.kind, DataSpec::Kind::kText);
  EXPECT_EQ(job.data.path, "/usr/share/tessel/examples/data/fables.txt");
  EXPECT_EQ(job.layout.layer_split, (std::vector<int>{1, 1, 1, 1}));
  ASSERT_EQ(job.addresses.size(), 4u);
  EXPECT_EQ(job.addresses[3], (transport::PeerAddress{"0.0.0.0", 0, "stage 1 replica 1"}));
  EXPECT_EQ(job.layout.rank_of_tasklet, (std::vector<int>{0, 2, 1, 3}));  // stage x replicas
  EXPECT_EQ(job.islands, (std::vector<std::string>{"member-a/gpu-0", "member-a/gpu-0",
                                                   "member-b/gpu-7", "member-b/gpu-7"}));
  EXPECT_FALSE(job.links.has_value());
  EXPECT_EQ(job.checkpoint.dir, "checkpoints");
  EXPECT_EQ(job.checkpoint.interval, 5);
  EXPECT_TRUE(job.checkpoint.resume);
  EXPECT_EQ(job.checkpoint.keep, 4);
  EXPECT_FALSE(job.checkpoint.shared);
  EXPECT_EQ(job.trace_path, "");
  ASSERT_TRUE(job.rendezvous.has_value());
  EXPECT_EQ(job.rendezvous->address, "operator.hub.example:7443");
  EXPECT_EQ(job.rendezvous->token_file, "/etc/tessel/stage/token");
  EXPECT_EQ(job.rendezvous->ca_file, "/etc/tessel/stage/ca.crt");
  EXPECT_EQ(job.rendezvous->advertise_env, "POD_IP");
  EXPECT_EQ(job.progress_address, "operator.hub.example:7443");
  EXPECT_EQ(job.progress_token_file, "/etc/tessel/stage/token");
  EXPECT_EQ(job.progress_ca_file, "/etc/tessel/stage/ca.crt");
}

TEST(StageJobFileRoundTrip, ALocalJob) {
  api::TrainingJobSpec spec = spec_off_defaults();
  spec.data = {};
  spec.data.synthetic = true;
  spec.data.synthetic_seed = 12;
  spec.data.synthetic_bytes = 30000;
  api::StageJobFile f;
  f.job_id = 0xfedcba9876543210ull;  // the launcher's ids use all 64 bits
  f.model_name = "fables";
  for (int r = 0; r < 4; ++r) f.ranks.push_back({r % 2, r / 2, "127.0.0.1", 0, ""});
  f.checkpoint_dir = "/tmp/run/checkpoints";
  f.checkpoint_resume = false;
  f.rendezvous = api::StageEndpoint{"127.0.0.1:41234", "/tmp/run/rendezvous.token", ""};
  f.progress = api::StageEndpoint{"127.0.0.1:41235", "", ""};
  f.trace_pattern = "/tmp/run/traces/trace-{rank}.json";
  f.links = {{"default", {{"gbps", 8}, {"latency_ms", 2}}},
             {"pairs", {{{"a", 0}, {"b", 3}, {"gbps", 0.5}, {"latency_ms", 40}}}}};

  const JobSpec job = round_trip(spec, f);
  EXPECT_EQ(job.job_id, 0xfedcba9876543210ull);
  expect_training_as_written(spec, job);
  EXPECT_EQ(job.workload.name, "fables");
  EXPECT_EQ(job.data.kind, DataSpec::Kind::kSynthetic);
  EXPECT_EQ(job.data.seed, 12u);
  EXPECT_EQ(job.data.bytes, 30000);
  EXPECT_EQ(job.layout.layer_split, (std::vector<int>{1, 1, 1, 1}));  // even, by the reader
  EXPECT_EQ(job.addresses[1], (transport::PeerAddress{"127.0.0.1", 0, "stage 1 replica 0"}));
  EXPECT_TRUE(job.islands.empty());
  ASSERT_TRUE(job.links.has_value());
  EXPECT_DOUBLE_EQ(job.links->shape(1, 2).bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(job.links->shape(1, 2).latency_s, 0.002);
  EXPECT_DOUBLE_EQ(job.links->shape(3, 0).bytes_per_s, 0.5e9 / 8);
  EXPECT_DOUBLE_EQ(job.links->shape(3, 0).latency_s, 0.040);
  EXPECT_EQ(job.checkpoint.dir, "/tmp/run/checkpoints");
  EXPECT_EQ(job.checkpoint.interval, 5);
  EXPECT_FALSE(job.checkpoint.resume);
  EXPECT_EQ(job.checkpoint.keep, 4);
  EXPECT_TRUE(job.checkpoint.shared);
  EXPECT_EQ(trace_path_for(job, 3), "/tmp/run/traces/trace-3.json");
  ASSERT_TRUE(job.rendezvous.has_value());
  EXPECT_EQ(job.rendezvous->address, "127.0.0.1:41234");
  EXPECT_EQ(job.rendezvous->token_file, "/tmp/run/rendezvous.token");
  EXPECT_EQ(job.rendezvous->ca_file, "");  // the launcher's loopback service: insecure
  EXPECT_EQ(job.rendezvous->advertise_env, "");
  EXPECT_EQ(job.progress_address, "127.0.0.1:41235");
  EXPECT_EQ(job.progress_token_file, "");
  EXPECT_EQ(job.progress_ca_file, "");
}

TEST(StageJobFileRoundTrip, EveryLimitTheWriterAcceptsTheReaderAccepts) {
  api::TrainingJobSpec spec = api::load_trainingjob_file(kExample).spec;
  api::StageJobFile f;
  for (int r = 0; r < 4; ++r) {
    f.ranks.push_back({r % 2, r / 2, "0.0.0.0", 0, std::string(kMaxIslandLabel, 'i')});
  }
  f.data_path = "/" + std::string(kMaxJobFilePath - 1, 'd');
  const std::string longest = "/" + std::string(kMaxJobFilePath - 1, 'f');
  f.rendezvous = api::StageEndpoint{"[fd00::1]:65535", longest, longest};
  f.advertise_env = std::string(placement::kMaxEnvVarName, 'E');
  f.progress = f.rendezvous;
  const JobSpec job = round_trip(spec, f);
  EXPECT_EQ(job.islands[3].size(), kMaxIslandLabel);
  EXPECT_EQ(job.rendezvous->ca_file, longest);
  EXPECT_EQ(job.progress_token_file, longest);
  EXPECT_EQ(job.rendezvous->advertise_env.size(), placement::kMaxEnvVarName);
}

}  // namespace
}  // namespace tessel::stage
