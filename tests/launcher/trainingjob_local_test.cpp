// `tessel local` of a TrainingJob manifest: the example manifest gives the same job as the
// local job file it mirrors (one schema for clusters and this machine), and what the CPU
// runtime cannot do is refused naming the field.
#include "noderuntime/launcher/trainingjob_local.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "api/yaml_json.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSource = TESSEL_SOURCE_DIR;
const std::string kManifest = kSource + "/examples/trainingjobs/fables.yaml";
const std::string kTwoSites = kSource + "/examples/local/two-sites.yaml";

class TrainingJobLocal : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessel-tj-local-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "corpus.txt") << "the fox and the crow\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The example manifest with `edit` applied, written next to corpus.txt (its data).
  std::string manifest(const std::function<void(json&)>& edit) {
    std::ifstream in(kManifest);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    json job = api::yaml_to_json(text, kManifest);
    job["spec"]["data"]["text"]["path"] = "corpus.txt";
    edit(job);
    const fs::path path = dir_ / "job.yaml";
    std::ofstream(path) << job.dump(2);  // JSON is YAML
    return path.string();
  }

  std::string error_of(const std::string& path, const std::string& topology = kTwoSites) {
    try {
      load_job_file(path, topology);
    } catch (const LocalJobError& e) {
      return e.what();
    }
    return "(accepted)";
  }

  fs::path dir_;
};

TEST_F(TrainingJobLocal, TheExampleManifestIsTheExampleLocalJob) {
  const LocalJob from_manifest = load_job_file(kManifest, kTwoSites);
  const LocalJob local = load_job_file(kSource + "/examples/local/fables.yaml", "");
  EXPECT_EQ(from_manifest.name, local.name);
  EXPECT_EQ(fs::canonical(from_manifest.topology.file), fs::canonical(local.topology.file));
  EXPECT_EQ(fs::canonical(from_manifest.data.path), fs::canonical(local.data.path));
  const placement::Workload &a = from_manifest.workload, &b = local.workload;
  EXPECT_EQ(std::tie(a.layers, a.hidden, a.ffn_hidden, a.heads, a.seq_len, a.vocab, a.micro_batch,
                     a.global_batch, a.precision, a.recompute_activations),
            std::tie(b.layers, b.hidden, b.ffn_hidden, b.heads, b.seq_len, b.vocab, b.micro_batch,
                     b.global_batch, b.precision, b.recompute_activations));
  const LocalTraining &s = from_manifest.training, &t = local.training;
  EXPECT_EQ(std::tie(s.steps, s.learning_rate, s.weight_decay, s.beta1, s.beta2, s.eps, s.grad_clip,
                     s.seed, s.threads),
            std::tie(t.steps, t.learning_rate, t.weight_decay, t.beta1, t.beta2, t.eps, t.grad_clip,
                     t.seed, t.threads));
  EXPECT_EQ(from_manifest.schedule.kind, local.schedule.kind);
  EXPECT_EQ(from_manifest.chunks(), local.chunks());
  EXPECT_EQ(from_manifest.stages, local.stages);
  EXPECT_EQ(from_manifest.replicas, local.replicas);
  EXPECT_EQ(from_manifest.placement.strategy, local.placement.strategy);
  EXPECT_EQ(from_manifest.placement.evaluations, local.placement.evaluations);
  EXPECT_EQ(from_manifest.connect_timeout_s, local.connect_timeout_s);
  EXPECT_EQ(from_manifest.io_timeout_s, local.io_timeout_s);
  // The manifest asks for checkpoints every 100 steps, keeping 2.
  EXPECT_EQ(from_manifest.checkpoint_interval, 100);
  EXPECT_EQ(from_manifest.checkpoint_keep, 2);
}

TEST_F(TrainingJobLocal, Bf16AndFp32ManifestsAreTrained) {
  for (const auto& [text, precision] :
       {std::pair{"bf16", placement::Precision::BF16}, {"fp32", placement::Precision::FP32}}) {
    const std::string path = manifest([&](json& j) { j["spec"]["model"]["precision"] = text; });
    EXPECT_EQ(error_of(path), "(accepted)") << text;
    EXPECT_EQ(load_job_file(path, kTwoSites).workload.precision, precision) << text;
  }
}

TEST_F(TrainingJobLocal, WhatTheCpuRuntimeCannotDoIsRefusedNamingTheField) {
  const std::string source = (dir_ / "job.yaml").string() + ": ";
  EXPECT_EQ(error_of(manifest([](json& j) { j["spec"]["model"]["precision"] = "fp16"; })),
            source +
                "spec.model.precision: tessel local trains fp32 or bf16 (bf16 on a GPU, or in "
                "fp32 on the CPU), got fp16");
  EXPECT_EQ(
      error_of(manifest([](json& j) { j["spec"]["model"]["recomputeActivations"] = true; })),
      source + "spec.model.recomputeActivations: the CPU stage runtime keeps its activations");
  EXPECT_EQ(error_of(manifest([](json& j) { j["spec"]["placement"]["costModel"] = "paper"; })),
            source + "spec.placement.costModel: tessel local plans with the full cost model");
  EXPECT_NE(error_of(manifest([](json&) {}), "").find("give the one to emulate with --topology"),
            std::string::npos);
  EXPECT_NE(error_of(manifest([](json& j) {
              j["spec"]["data"]["text"]["path"] = "missing.txt";
            })).find("spec.data.text.path: "),
            std::string::npos);
}

TEST_F(TrainingJobLocal, SchemaAndRuleErrorsNameTheFieldAsWritten) {
  const std::string source = (dir_ / "job.yaml").string() + ": ";
  EXPECT_EQ(error_of(manifest([](json& j) { j["spec"]["parallelism"]["stages"] = 0; })),
            source + "spec.parallelism.stages: must be >= 1, got 0");
  EXPECT_EQ(error_of(manifest([](json& j) {
              j["metadata"]["name"] = "../../x";
            })).rfind(source + "metadata.name: ", 0),
            0u);
  EXPECT_EQ(error_of(manifest([](json& j) { j["spec"]["batch"]["globalBatch"] = 12; })),
            source +
                "spec.batch.globalBatch: 12 is not a multiple of replicas x microBatch = 2 "
                "x 4 = 8");
}

TEST_F(TrainingJobLocal, ALocalJobFileNamesItsOwnTopology) {
  EXPECT_NE(error_of(kSource + "/examples/local/fables.yaml")
                .find("a local job file names its topology itself"),
            std::string::npos);
}

}  // namespace
}  // namespace tessel::launcher
