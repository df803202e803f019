// The one writer of job.json: an operator's job (the example TrainingJob, ranks on 0.0.0.0 with
// ports the kernel picks, islands, TLS services with a token) is written field by field, what
// the caller leaves out stays out, and every bad value is refused naming its job.json field.
// (tests/stage/stage_job_file_roundtrip_test.cpp reads the output with the stage's parser.)
#include "api/stage_job_file.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "placement/limits.h"

namespace tessel::api {
namespace {

using nlohmann::ordered_json;

const std::string kExample = std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/fables.yaml";

TrainingJobSpec example_spec() { return load_trainingjob_file(kExample).spec; }

// What the operator decides for the example (2 stages x 2 replicas over two clusters).
StageJobFile operator_file() {
  StageJobFile f;
  f.job_id = stage_job_id("6f1c1e0a-3b52-4d8e-9a57-2c4f0e7d9b31", 0);
  f.layer_split = {3, 1};
  for (int r = 0; r < 4; ++r) {
    f.ranks.push_back({r % 2, r / 2, "0.0.0.0", 0, r / 2 == 0 ? "member-a/gpu-0" : "member-b/n1"});
  }
  f.data_path = "/usr/share/tessel/examples/data/fables.txt";
  f.checkpoint_dir = "checkpoints";
  f.checkpoint_shared = false;
  f.rendezvous = StageEndpoint{"tessel-operator.tessel-system.svc:7443", "/etc/tessel/stage/token",
                               "/etc/tessel/stage/ca.crt"};
  f.advertise_env = "POD_IP";
  f.progress = f.rendezvous;
  return f;
}

std::string error_of(const TrainingJobSpec& spec, const StageJobFile& f) {
  try {
    stage_job_json(spec, f);
  } catch (const ManifestError& e) {
    return e.what();
  }
  return "";
}

TEST(StageJobFile, WritesAnOperatorJob) {
  const ordered_json j = stage_job_json(example_spec(), operator_file());
  EXPECT_EQ(j["format_version"], 1);
  EXPECT_EQ(j["job_id"], 6798325390966219097ull);
  const ordered_json& model = j["workload"]["model"];
  EXPECT_FALSE(model.contains("name"));  // no preset, no name given
  EXPECT_EQ(model["layers"], 4);
  EXPECT_EQ(model["hidden"], 128);
  EXPECT_EQ(model["ffn_hidden"], 512);
  EXPECT_EQ(model["heads"], 4);
  EXPECT_EQ(model["seq_len"], 64);
  EXPECT_EQ(model["vocab"], 256);
  EXPECT_EQ(model["precision"], "fp32");
  EXPECT_EQ(model["recompute_activations"], false);
  EXPECT_EQ(j["workload"]["training"], (ordered_json{{"micro_batch", 4}, {"global_batch", 16}}));
  EXPECT_EQ(j["training"]["steps"], 300);
  EXPECT_EQ(j["training"]["learning_rate"], 0.003);
  EXPECT_EQ(j["training"]["beta2"], 0.95);
  EXPECT_EQ(j["training"]["seed"], 1337);
  EXPECT_EQ(j["training"]["threads"], 1);
  EXPECT_EQ(j["data"], (ordered_json{{"kind", "text"},
                                     {"path", "/usr/share/tessel/examples/data/fables.txt"}}));
  EXPECT_EQ(
      j["schedule"],
      (ordered_json{{"kind", "1f1b"}, {"chunks", 1}, {"microbatch_group", 0}, {"overlap", true}}));
  EXPECT_EQ(j["pipeline"], (ordered_json{{"stages", 2}, {"replicas", 2}, {"layer_split", {3, 1}}}));
  ASSERT_EQ(j["ranks"].size(), 4u);
  EXPECT_EQ(j["ranks"][3], (ordered_json{{"stage", 1},
                                         {"replica", 1},
                                         {"host", "0.0.0.0"},
                                         {"port", 0},
                                         {"island", "member-b/n1"}}));
  EXPECT_FALSE(j.contains("links"));  // a real network
  EXPECT_FALSE(j.contains("trace"));
  EXPECT_EQ(j["timeouts"], (ordered_json{{"connect_s", 60.0}, {"io_s", 120.0}}));
  EXPECT_EQ(j["checkpoint"], (ordered_json{{"dir", "checkpoints"},
                                           {"interval", 100},
                                           {"resume", true},
                                           {"keep", 2},
                                           {"shared", false}}));
  const ordered_json service = {{"address", "tessel-operator.tessel-system.svc:7443"},
                                {"token_file", "/etc/tessel/stage/token"},
                                {"ca_file", "/etc/tessel/stage/ca.crt"}};
  EXPECT_EQ(j["progress"], service);
  ordered_json rendezvous = service;
  rendezvous["advertise_env"] = "POD_IP";
  EXPECT_EQ(j["rendezvous"], rendezvous);
}

TEST(StageJobFile, LeavesOutWhatTheCallerLeavesOut) {
  TrainingJobSpec spec = example_spec();
  spec.data = {};
  spec.data.synthetic = true;
  spec.data.synthetic_seed = 4;
  spec.data.synthetic_bytes = 5000;
  spec.model.preset = "";
  StageJobFile f = operator_file();
  f.data_path = "";
  f.layer_split.clear();
  f.checkpoint_shared = true;  // the reader's default: not written
  f.progress.reset();
  f.rendezvous->ca_file = "";
  f.advertise_env = "";
  f.model_name = "fables";
  const ordered_json j = stage_job_json(spec, f);
  EXPECT_EQ(j["workload"]["model"]["name"], "fables");
  EXPECT_EQ(j["data"], (ordered_json{{"kind", "synthetic"}, {"seed", 4}, {"bytes", 5000}}));
  EXPECT_FALSE(j["pipeline"].contains("layer_split"));  // the reader splits evenly
  EXPECT_FALSE(j["checkpoint"].contains("shared"));
  EXPECT_FALSE(j.contains("progress"));  // progress lines on stdout
  EXPECT_EQ(j["rendezvous"], (ordered_json{{"address", "tessel-operator.tessel-system.svc:7443"},
                                           {"token_file", "/etc/tessel/stage/token"}}));
  f.checkpoint_dir = "";
  EXPECT_FALSE(stage_job_json(spec, f).contains("checkpoint"));
}

TEST(StageJobFile, RefusesBadValuesNamingTheField) {
  struct Bad {
    const char* name;
    std::function<void(StageJobFile&)> change;
    std::string expected;  // part of the message, after "job.json: "
  };
  const std::string long_path(placement::kMaxJobFilePath + 1, 'p');
  const std::vector<Bad> cases = {
      {"split size",
       [](StageJobFile& f) {
         f.layer_split = {1, 1, 2};
       },
       "pipeline.layer_split: has 3 entries, stages x virtualStages is 2"},
      {"split sum",
       [](StageJobFile& f) {
         f.layer_split = {3, 3};
       },
       "pipeline.layer_split: sums to 6 layers, the model has 4"},
      {"split zero",
       [](StageJobFile& f) {
         f.layer_split = {4, 0};
       },
       "pipeline.layer_split[1]: every virtual stage needs a layer, got 0"},
      {"rank count", [](StageJobFile& f) { f.ranks.pop_back(); },
       "ranks: has 3 entries, stages x replicas is 4"},
      {"stage range", [](StageJobFile& f) { f.ranks[1].stage = 2; },
       "ranks[1].stage: must be in [0, 1], got 2"},
      {"replica range", [](StageJobFile& f) { f.ranks[2].replica = -1; },
       "ranks[2].replica: must be in [0, 1], got -1"},
      {"duplicate", [](StageJobFile& f) { f.ranks[3] = f.ranks[0]; },
       "ranks[3]: stage 0 replica 0 is already rank 0"},
      {"empty host", [](StageJobFile& f) { f.ranks[0].host = ""; },
       "ranks[0].host: must not be empty"},
      {"NUL host", [](StageJobFile& f) { f.ranks[0].host = std::string("a\0b", 3); },
       "ranks[0].host: has a NUL character"},
      {"port", [](StageJobFile& f) { f.ranks[1].port = 70000; },
       "ranks[1].port: must be in [0, 65535], got 70000"},
      {"port 0 without rendezvous",
       [](StageJobFile& f) {
         f.rendezvous.reset();
         f.advertise_env = "";
       },
       "ranks[0].port: must be in [1, 65535], got 0"},
      {"island chars", [](StageJobFile& f) { f.ranks[2].island = "member a/n\n1"; },
       "ranks[2].island: \"member a/n\\x0a1\" has a character outside [A-Za-z0-9._:/-]"},
      {"island not UTF-8", [](StageJobFile& f) { f.ranks[1].island = "member-a/\xe9"; },
       "ranks[1].island: is not UTF-8 text"},
      {"island length",
       [](StageJobFile& f) {
         f.ranks[2].island = std::string(63, 'c') + "/" + std::string(253, 'n');
       },
       "ranks[2].island: is 317 characters long, at most 253"},
      {"text data path", [](StageJobFile& f) { f.data_path = ""; }, "data.path: must not be empty"},
      {"data path not UTF-8", [](StageJobFile& f) { f.data_path = "/data/\xff.txt"; },
       "data.path: is not UTF-8 text"},
      {"checkpoint dir", [&](StageJobFile& f) { f.checkpoint_dir = long_path; },
       "checkpoint.dir: is 4097 characters long, at most 4096"},
      {"trace", [](StageJobFile& f) { f.trace_pattern = std::string("t\0{rank}", 8); },
       "trace.path: has a NUL character"},
      {"rendezvous address", [](StageJobFile& f) { f.rendezvous->address = "operator"; },
       "rendezvous.address: expected host:port, got 'operator'"},
      {"rendezvous port", [](StageJobFile& f) { f.rendezvous->address = "operator:0"; },
       "rendezvous.address: expected host:port, got 'operator:0'"},
      {"rendezvous token", [](StageJobFile& f) { f.rendezvous->token_file = ""; },
       "rendezvous.token_file: must not be empty"},
      {"rendezvous CA", [&](StageJobFile& f) { f.rendezvous->ca_file = long_path; },
       "rendezvous.ca_file: is 4097 characters long, at most 4096"},
      {"advertise_env name", [](StageJobFile& f) { f.advertise_env = "POD IP"; },
       "rendezvous.advertise_env: expected an environment variable's name, got "
       "'POD IP'"},
      {"advertise_env alone",
       [](StageJobFile& f) {
         f.rendezvous.reset();
         for (StageRank& r : f.ranks) r.port = 4000 + r.stage * 2 + r.replica;
       },
       "rendezvous.advertise_env: is for ranks that meet at a rendezvous; none given"},
      {"progress address", [](StageJobFile& f) { f.progress->address = "[::1]:"; },
       "progress.address: expected host:port, got '[::1]:'"},
      {"NUL address",
       [](StageJobFile& f) { f.progress->address = std::string("operator\0:7443", 14); },
       "progress.address: has a NUL character"},
      {"progress token", [](StageJobFile& f) { f.progress->token_file = std::string(1, '\0'); },
       "progress.token_file: has a NUL character"},
      {"progress CA", [](StageJobFile& f) { f.progress->ca_file = "/ca/\xc3\x28.crt"; },
       "progress.ca_file: is not UTF-8 text"},
      {"model name", [](StageJobFile& f) { f.model_name = "gpt\xfe"; },
       "workload.model.name: is not UTF-8 text"},
      {"links array",
       [](StageJobFile& f) {
         f.links = ordered_json::array({1, 2});
       },
       "links: expected an object or nothing, got array"},
      {"links text",
       [](StageJobFile& f) {
         f.links = {{"topology", "/t\xff.yaml"}};
       },
       "links: holds text that is not UTF-8"},
  };
  const TrainingJobSpec spec = example_spec();
  for (const Bad& bad : cases) {
    StageJobFile f = operator_file();
    bad.change(f);
    const std::string error = error_of(spec, f);
    EXPECT_EQ(error.rfind("job.json: ", 0), 0u) << bad.name << ": got '" << error << "'";
    EXPECT_NE(error.find(bad.expected), std::string::npos) << bad.name << ": got '" << error << "'";
  }
}

TEST(StageJobFile, NamesEveryFieldAtFaultAtOnce) {
  StageJobFile f = operator_file();
  f.ranks[0].island = "a b";
  f.progress->address = "nowhere";
  try {
    stage_job_json(example_spec(), f);
    FAIL() << "accepted";
  } catch (const ManifestError& e) {
    ASSERT_EQ(e.errors().size(), 2u) << e.what();
    EXPECT_EQ(e.errors()[0].field, "ranks[0].island");
    EXPECT_EQ(e.errors()[1].field, "progress.address");
  }
}

TEST(StageJobFile, RefusesASpecWhoseWorkloadIsInvalid) {
  TrainingJobSpec spec = example_spec();
  spec.model.heads = 5;  // 128 is no multiple of 5
  EXPECT_NE(error_of(spec, operator_file()).find("job.json: workload: "), std::string::npos)
      << error_of(spec, operator_file());
}

TEST(StageJobFile, TextEndsInANewlineAndFitsAConfigMap) {
  const std::string text = stage_job_text(example_spec(), operator_file());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(nlohmann::json::parse(text)["job_id"], 6798325390966219097ull);

  // 64 stages x 64 replicas, each rank with the longest island label: about 1.6 MB.
  TrainingJobSpec spec = example_spec();
  spec.model.layers = 64;
  spec.parallelism.stages = 64;
  spec.parallelism.replicas = 64;
  spec.micro_batch = 1;
  spec.global_batch = 64;
  StageJobFile f = operator_file();
  f.layer_split.clear();
  f.ranks.clear();
  for (int r = 0; r < 64 * 64; ++r) {
    f.ranks.push_back({r % 64, r / 64, "0.0.0.0", 0, std::string(placement::kMaxIslandLabel, 'n')});
  }
  EXPECT_NO_THROW(stage_job_json(spec, f));
  try {
    stage_job_text(spec, f);
    FAIL() << "a job.json over the limit was written";
  } catch (const ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes, more than the 1000000 a ConfigMap holds"),
              std::string::npos)
        << e.what();
  }
}

TEST(StageJobId, IsAStable63BitNonZeroHashOfTheUid) {
  EXPECT_EQ(stage_job_id("a", 0), 0x2f63dc4c8601ec8cull);  // FNV-1a("a") less its top bit
  const uint64_t id = stage_job_id("6f1c1e0a-3b52-4d8e-9a57-2c4f0e7d9b31", 0);
  EXPECT_EQ(id, 6798325390966219097ull);
  EXPECT_LT(id, uint64_t{1} << 63);
  EXPECT_NE(id, stage_job_id("6f1c1e0a-3b52-4d8e-9a57-2c4f0e7d9b32", 0));
  EXPECT_THROW(stage_job_id("", 0), std::invalid_argument);
}

TEST(StageJobId, EachStartAttemptHasAnIdOfItsOwn) {
  const std::string uid = "6f1c1e0a-3b52-4d8e-9a57-2c4f0e7d9b31";
  // Attempt 0 keeps the id of the uid alone; later ones hash "<uid>#<attempt>".
  EXPECT_EQ(stage_job_id(uid, 0), 6798325390966219097ull);
  EXPECT_NE(stage_job_id(uid, 1), stage_job_id(uid, 0));
  EXPECT_NE(stage_job_id(uid, 2), stage_job_id(uid, 1));
  EXPECT_EQ(stage_job_id(uid, 2), stage_job_id(uid, 2));
  EXPECT_LT(stage_job_id(uid, 7), uint64_t{1} << 63);
  EXPECT_THROW(stage_job_id(uid, -1), std::invalid_argument);
}

}  // namespace
}  // namespace tessel::api
