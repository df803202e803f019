// job.json: a complete file parses into the job, and every bad value is rejected with an error
// naming the file and the field.
#include "noderuntime/stage/job_spec.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "placement/topology.h"
#include "tests/stage/job_spec_error.h"

namespace tessel::stage {
namespace {

using nlohmann::json;

json good_job() {
  return json::parse(R"({
    "format_version": 1,
    "job_id": 9,
    "workload": {"model": {"layers": 4, "hidden": 32, "heads": 4, "seq_len": 16, "vocab": 256,
                           "precision": "fp32"},
                 "training": {"micro_batch": 2, "global_batch": 16}},
    "training": {"steps": 3, "learning_rate": 0.001, "grad_clip": 0.5, "seed": 5, "threads": 2},
    "data": {"kind": "synthetic", "seed": 4, "bytes": 10000},
    "schedule": {"kind": "interleaved", "chunks": 2, "overlap": false},
    "pipeline": {"stages": 2, "replicas": 2},
    "ranks": [{"stage": 0, "replica": 0, "host": "127.0.0.1", "port": 4000},
              {"stage": 1, "replica": 0, "host": "127.0.0.1", "port": 4001},
              {"stage": 0, "replica": 1, "host": "127.0.0.1", "port": 4002},
              {"stage": 1, "replica": 1, "host": "127.0.0.1", "port": 4003}],
    "links": {"default": {"gbps": 8, "latency_ms": 1},
              "pairs": [{"a": 0, "b": 2, "gbps": 0.8, "latency_ms": 30}]},
    "timeouts": {"connect_s": 5, "io_s": 2.5},
    "checkpoint": {"dir": "ckpt", "interval": 2, "resume": true},
    "trace": {"path": "trace-{rank}.json"},
    "progress": {"address": "127.0.0.1:7070"}
  })");
}

TEST(JobSpec, ParsesACompleteJob) {
  const JobSpec job = parse_job_spec(good_job().dump(), "job.json");
  EXPECT_EQ(job.job_id, 9u);
  EXPECT_EQ(job.model, (GptConfig{4, 32, 4, 128, 16, 256}));
  EXPECT_EQ(job.steps, 3);
  EXPECT_EQ(job.threads, 2);
  EXPECT_EQ(job.training.micro_batch, 2);
  EXPECT_EQ(job.training.micro_batches, 4);  // 16 / (2 replicas x 2)
  EXPECT_FLOAT_EQ(job.training.adamw.learning_rate, 0.001f);
  EXPECT_FLOAT_EQ(job.training.grad_clip, 0.5f);
  EXPECT_EQ(job.training.seed, 5u);
  EXPECT_EQ(job.training.schedule, placement::ScheduleKind::Interleaved);
  EXPECT_FALSE(job.training.overlap);
  EXPECT_EQ(job.layout.chunks, 2);
  EXPECT_EQ(job.layout.layer_split, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(job.layout.rank(0, 1), 2);
  EXPECT_EQ(job.layout.rank(1, 1), 3);
  EXPECT_EQ(job.addresses[3].port, 4003);
  EXPECT_EQ(job.addresses[3].label, "stage 1 replica 1");
  ASSERT_TRUE(job.links.has_value());
  EXPECT_DOUBLE_EQ(job.links->shape(1, 3).bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(job.links->shape(2, 0).bytes_per_s, 1e8);
  EXPECT_DOUBLE_EQ(job.links->shape(2, 0).latency_s, 0.03);
  EXPECT_EQ(job.io_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(job.checkpoint.dir, "ckpt");
  EXPECT_EQ(job.checkpoint.interval, 2);
  EXPECT_TRUE(job.checkpoint.resume);
  EXPECT_EQ(trace_path_for(job, 3), "trace-3.json");
  EXPECT_EQ(job.progress_address, "127.0.0.1:7070");
  EXPECT_EQ(job.data.kind, DataSpec::Kind::kSynthetic);
  EXPECT_EQ(job.data.bytes, 10000);
}

TEST(JobSpec, OptionalSectionsDefault) {
  json job = good_job();
  for (const char* key :
       {"links", "timeouts", "checkpoint", "trace", "progress", "job_id", "format_version"}) {
    job.erase(key);
  }
  job["schedule"] = {{"kind", "1f1b"}};
  job["pipeline"]["layer_split"] = {3, 1};
  const JobSpec spec = parse_job_spec(job.dump(), "job.json");
  EXPECT_FALSE(spec.links.has_value());
  EXPECT_TRUE(spec.training.overlap);
  EXPECT_TRUE(spec.checkpoint.dir.empty());
  EXPECT_EQ(trace_path_for(spec, 0), "");
  EXPECT_EQ(spec.progress_address, "");  // progress on stdout
  EXPECT_EQ(spec.layout.layer_split, (std::vector<int>{3, 1}));
}

TEST(JobSpec, TakesFp32AndBf16Precision) {
  for (const char* precision : {"fp32", "bf16"}) {
    json job = good_job();
    job["workload"]["model"]["precision"] = precision;
    const JobSpec spec = parse_job_spec(job.dump(), "job.json");
    EXPECT_EQ(placement::to_string(spec.workload.precision), std::string(precision));
  }
}

TEST(JobSpec, RendezvousLetsRanksBindAnyPort) {
  json job = good_job();
  job["ranks"][1]["port"] = 0;
  EXPECT_NE(error_of(job).find("job.json: ranks[1].port: must be in [1, 65535]"), std::string::npos)
      << error_of(job);  // port 0 needs a rendezvous
  job["rendezvous"] = {{"address", "127.0.0.1:7071"},
                       {"token_file", "/run/tessel/token"},
                       {"advertise_env", "POD_IP"}};
  const JobSpec spec = parse_job_spec(job.dump(), "job.json");
  ASSERT_TRUE(spec.rendezvous.has_value());
  EXPECT_EQ(spec.rendezvous->address, "127.0.0.1:7071");
  EXPECT_EQ(spec.rendezvous->token_file, "/run/tessel/token");
  EXPECT_EQ(spec.rendezvous->advertise_env, "POD_IP");
  EXPECT_EQ(spec.addresses[1].port, 0);
  EXPECT_FALSE(parse_job_spec(good_job().dump(), "job.json").rendezvous.has_value());
}

TEST(JobSpec, ShapesLinksFromThePlacementTopology) {
  placement::Topology topology;
  topology.gpu_types = {{"G", 100, 10, 16}};
  topology.sites = {{"east", "host", 2, {}, {}}, {"west", "host", 1, {}, {}}};
  topology.devices = {
      {0, "east", "G", 100, 16}, {1, "east", "G", 100, 16}, {2, "west", "G", 100, 16}};
  topology.intra_site = {0.5, 100};
  topology.inter_site_default = placement::Link{40, 2};
  topology.finalize("test");
  const auto path = std::filesystem::temp_directory_path() /
                    ("tessel-job-topology-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << placement::topology_to_yaml(topology);
  json job = good_job();
  // Ranks 0 and 1 (stage 0 and 1 of replica 0) in the east, rank 2 with rank 0's device, rank 3
  // in the west.
  job["links"] = {{"topology", path.string()}, {"devices", {0, 1, 0, 2}}};
  const JobSpec spec = parse_job_spec(job.dump(), "job.json");
  std::filesystem::remove(path);
  ASSERT_TRUE(spec.links.has_value());
  EXPECT_DOUBLE_EQ(spec.links->shape(0, 1).bytes_per_s, 100e9 / 8);
  EXPECT_DOUBLE_EQ(spec.links->shape(1, 3).bytes_per_s, 2e9 / 8);
  EXPECT_DOUBLE_EQ(spec.links->shape(3, 1).latency_s, 0.040);
  EXPECT_FALSE(spec.links->shape(0, 2).shaped());  // one device
  job["links"]["devices"] = {0, 1};
  EXPECT_NE(error_of(job).find("job.json: links.devices: expected an array of 4 device indices"),
            std::string::npos);
  job["links"] = {{"topology", "/nonexistent/topo.yaml"}, {"devices", {0, 1, 0, 2}}};
  EXPECT_NE(error_of(job).find("job.json: links.topology: /nonexistent/topo.yaml: cannot open"),
            std::string::npos)
      << error_of(job);
}

// Found by tests/fuzz (stage_job_spec): nlohmann throws out_of_range, not parse_error, for a
// number no double holds, and it escaped parse_job_spec (regressions/stage_job_spec).
TEST(JobSpec, ANumberOutOfRangeIsAConfigError) {
  try {
    parse_job_spec(R"({"format_version": 1, "job_id": 1e400})", "job.json");
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "job.json: not valid JSON: [json.exception.out_of_range.406] number overflow "
              "parsing '1e400'");
  }
}

TEST(JobSpec, ErrorsNameTheField) {
  struct Bad {
    const char* pointer;  // JSON pointer of the value to replace
    json value;
    const char* expected;  // part of the message
  };
  const std::vector<Bad> cases = {
      {"/training/steps", 0, "job.json: training.steps: must be in [1, "},
      {"/training/learning_rate", "fast",
       "job.json: training.learning_rate: expected a finite number"},
      {"/training/beta1", 1.5, "training.beta1: must be in [0, 1)"},
      {"/training/colour", 1, "job.json: training.colour: unknown field"},
      {"/data/kind", "video", "job.json: data.kind: must be \"synthetic\" or \"text\""},
      {"/schedule/kind", "zigzag", "job.json: schedule.kind: "},
      {"/pipeline/stages", 3,
       "job.json: pipeline: layer split: cannot split 4 layers into 6 virtual stages"},
      {"/ranks", json::array(), "job.json: ranks: has 0 entries, stages x replicas is 4"},
      {"/pipeline/layer_split", json::array({1, 1, 1}),
       "pipeline.layer_split: has 3 entries, stages x chunks is 4"},
      {"/ranks/2/stage", 1, "job.json: ranks[3]: stage 1 replica 1 is already rank 2"},
      {"/ranks/1/port", 70000, "job.json: ranks[1].port: must be in [1, 65535]"},
      {"/ranks/0/host", "", "job.json: ranks[0].host: must not be empty"},
      {"/links/pairs/0/b", 0, "job.json: links.pairs[0].b: a link joins two different ranks"},
      {"/links/default/gbps", -1, "job.json: links.default.gbps: must be >= 0"},
      {"/timeouts/io_s", 0, "job.json: timeouts.io_s: must be > 0"},
      {"/checkpoint/interval", -1, "job.json: checkpoint.interval: must be in [0, "},
      {"/rendezvous", json{{"address", "nowhere"}, {"token_file", "t"}},
       "job.json: rendezvous.address: expected host:port, got 'nowhere'"},
      {"/rendezvous", json{{"address", "127.0.0.1:1"}, {"token_file", ""}},
       "job.json: rendezvous.token_file: must not be empty"},
      {"/rendezvous",
       json{{"address", "127.0.0.1:1"}, {"token_file", "t"}, {"advertise_env", "POD IP"}},
       "job.json: rendezvous.advertise_env: expected an environment variable's name, got 'POD IP'"},
      {"/rendezvous", json{{"address", "127.0.0.1:1"}, {"token_file", "t"}, {"tls", true}},
       "job.json: rendezvous.tls: unknown field"},
      {"/workload/model/precision", "fp16",
       "job.json: workload.model.precision: the stage runtime trains in fp32 (CPU) or bf16 (CUDA), "
       "got fp16"},
      {"/workload/model/heads", 5, "job.json: workload: heads: hidden (32) must be a multiple"},
      {"/workload/training/global_batch", 10, "job.json: workload.training: global_batch 10"},
      {"/format_version", 2, "job.json: format_version: unsupported version 2"},
      {"/progress/address", "localhost", "job.json: progress.address: expected host:port, got "},
      {"/progress/address", ":80", "job.json: progress.address: expected host:port, got ':80'"},
      {"/progress/address", "h:0", "job.json: progress.address: expected host:port, got 'h:0'"},
      {"/progress/address", "h:99999", "progress.address: expected host:port, got 'h:99999'"},
      {"/progress/port", 1, "job.json: progress.port: unknown field"},
  };
  for (const Bad& bad : cases) {
    json job = good_job();
    job[json::json_pointer(bad.pointer)] = bad.value;
    const std::string error = error_of(job);
    EXPECT_NE(error.find(bad.expected), std::string::npos)
        << bad.pointer << ": got \"" << error << "\"";
  }
  // Megatron's rule for the interleaved schedule: m = 12 / (2 x 2) = 3 is not a multiple of p.
  json job = good_job();
  job["workload"]["training"]["global_batch"] = 12;
  EXPECT_NE(error_of(job).find("job.json: schedule: interleaved schedule (p=2, m=3, v=2): m mod G"),
            std::string::npos)
      << error_of(job);
  EXPECT_NE(error_of(json::parse("[1]")).find("job.json: (document): must be an object"),
            std::string::npos);
  EXPECT_NE(error_of(json("x")).find("job.json"), std::string::npos);
  EXPECT_THROW(load_job_spec("/nonexistent/job.json"), ConfigError);
}

}  // namespace
}  // namespace tessel::stage
