// job.json's service credentials: rendezvous.ca_file, progress.token_file and progress.ca_file
// are read into the job, and a bad path is refused with an error naming the file and the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "noderuntime/stage/job_spec.h"
#include "tests/stage/job_spec_error.h"

namespace tessel::stage {
namespace {

using nlohmann::json;

json minimal_job() {
  return json::parse(R"({
    "workload": {"model": {"layers": 2, "hidden": 32, "heads": 4, "seq_len": 16, "vocab": 256,
                           "precision": "fp32"},
                 "training": {"micro_batch": 1, "global_batch": 2}},
    "training": {"steps": 1},
    "data": {"kind": "synthetic"},
    "schedule": {"kind": "1f1b"},
    "pipeline": {"stages": 2, "replicas": 1},
    "ranks": [{"stage": 0, "replica": 0, "host": "0.0.0.0", "port": 0},
              {"stage": 1, "replica": 0, "host": "0.0.0.0", "port": 0}],
    "rendezvous": {"address": "hub.example:7071", "token_file": "/etc/tessel/stage/token"}
  })");
}

TEST(JobSpecServiceAuth, ReadsTheCaAndTokenFiles) {
  json job = minimal_job();
  job["rendezvous"]["ca_file"] = "/etc/tessel/stage/ca.crt";
  job["progress"] = {{"address", "hub.example:7071"},
                     {"token_file", "/etc/tessel/stage/token"},
                     {"ca_file", "/etc/tessel/stage/ca.crt"}};
  const JobSpec spec = parse_job_spec(job.dump(), "job.json");
  ASSERT_TRUE(spec.rendezvous.has_value());
  EXPECT_EQ(spec.rendezvous->ca_file, "/etc/tessel/stage/ca.crt");
  EXPECT_EQ(spec.progress_address, "hub.example:7071");
  EXPECT_EQ(spec.progress_token_file, "/etc/tessel/stage/token");
  EXPECT_EQ(spec.progress_ca_file, "/etc/tessel/stage/ca.crt");
}

TEST(JobSpecServiceAuth, WithoutThemTheChannelsAreInsecureAndProgressUnauthenticated) {
  json job = minimal_job();
  job["progress"] = {{"address", "127.0.0.1:7070"}};
  const JobSpec spec = parse_job_spec(job.dump(), "job.json");
  EXPECT_EQ(spec.rendezvous->ca_file, "");
  EXPECT_EQ(spec.progress_token_file, "");
  EXPECT_EQ(spec.progress_ca_file, "");
}

TEST(JobSpecServiceAuth, BadPathsNameTheField) {
  struct Bad {
    const char* pointer;
    json value;
    std::string expected;
  };
  const std::string too_long(kMaxJobFilePath + 1, 'a');
  const std::vector<Bad> cases = {
      {"/rendezvous/ca_file", "", "job.json: rendezvous.ca_file: must not be empty"},
      {"/rendezvous/ca_file", 7, "job.json: rendezvous.ca_file: expected a string, got 7"},
      {"/rendezvous/ca_file", too_long,
       "job.json: rendezvous.ca_file: is 4097 characters long, at most 4096"},
      {"/rendezvous/token_file", too_long,
       "job.json: rendezvous.token_file: is 4097 characters long, at most 4096"},
      {"/rendezvous/token_file", std::string("tok\0en", 6),
       "job.json: rendezvous.token_file: has a NUL character"},
      {"/progress", json{{"address", "127.0.0.1:1"}, {"token_file", ""}},
       "job.json: progress.token_file: must not be empty"},
      {"/progress", json{{"address", "127.0.0.1:1"}, {"ca_file", too_long}},
       "job.json: progress.ca_file: is 4097 characters long, at most 4096"},
      {"/progress", json{{"address", "127.0.0.1:1"}, {"ca_file", std::string("c\0a", 3)}},
       "job.json: progress.ca_file: has a NUL character"},
      {"/progress", json{{"address", "127.0.0.1:1"}, {"tls", true}},
       "job.json: progress.tls: unknown field"},
  };
  for (const Bad& bad : cases) {
    json job = minimal_job();
    job[json::json_pointer(bad.pointer)] = bad.value;
    EXPECT_NE(error_of(job).find(bad.expected), std::string::npos)
        << bad.pointer << ": got '" << error_of(job) << "'";
  }
}

// The operator's pods mount the token beside the job file and name it relative to it; joined
// lexically, so a job folder that is a symlink (a kubelet's mount) still finds its sibling.
TEST(JobSpecServiceAuth, RelativeCredentialsAreTakenBesideTheJobFile) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("tessel-jobfile-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "volumes/job");
  std::filesystem::create_directories(root / "etc/tessel");
  std::filesystem::create_symlink(root / "volumes/job", root / "etc/tessel/job");
  json job = minimal_job();
  job["rendezvous"]["token_file"] = "../stage/token";
  job["rendezvous"]["ca_file"] = "../stage/ca.crt";
  job["progress"] = {{"address", "hub.example:7071"},
                     {"token_file", "../stage/token"},
                     {"ca_file", "/abs/ca.crt"}};
  std::ofstream(root / "volumes/job/job.json") << job.dump();
  const JobSpec spec = load_job_spec((root / "etc/tessel/job/job.json").string());
  const std::string stage = (root / "etc/tessel/stage").string();
  EXPECT_EQ(spec.rendezvous->token_file, stage + "/token");
  EXPECT_EQ(spec.rendezvous->ca_file, stage + "/ca.crt");
  EXPECT_EQ(spec.progress_token_file, stage + "/token");
  EXPECT_EQ(spec.progress_ca_file, "/abs/ca.crt") << "an absolute path is kept";
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace tessel::stage
