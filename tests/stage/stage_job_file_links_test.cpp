// job.json's links as the operator writes them for stage pods on clusters (issue 20;
// api::unshaped_links_json, operator/controller/stage_links.h) parse back through the stage's
// parse_job_spec: nothing is shaped, and each listed pair's bandwidth, both ways, is the capacity
// that sizes the pair's TCP streams (stage_process.cpp); an unlisted pair has none (one stream).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/manifest_error.h"
#include "api/stage_job_file.h"
#include "noderuntime/stage/job_spec.h"

namespace tessel::stage {
namespace {

const std::string kExample = std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/fables.yaml";

// stages x replicas ranks, rank = replica x stages + stage, each on a node of its own.
api::StageJobFile ranks_on_nodes(int stages, int replicas) {
  api::StageJobFile f;
  for (int r = 0; r < stages * replicas; ++r) {
    f.ranks.push_back({r % stages, r / stages, "0.0.0.0", 0, "member-a/gpu-" + std::to_string(r)});
  }
  f.data_path = "/data/fables.txt";
  f.rendezvous = api::StageEndpoint{"operator.hub.example:7443", "/etc/tessel/stage/token", ""};
  return f;
}

TEST(StageJobFileLinks, MeasuredPairsSizeTheStreamsAndShapeNothing) {
  const api::TrainingJobSpec spec = api::load_trainingjob_file(kExample).spec;  // 2 x 2
  const std::vector<api::StageLinkPair> pairs = {{0, 2, 0.9, 75.0}, {1, 3, 9.4, 0.25}};
  api::StageJobFile file = ranks_on_nodes(2, 2);
  file.links = api::unshaped_links_json(pairs);
  const JobSpec job = parse_job_spec(api::stage_job_text(spec, file), "job.json");
  EXPECT_FALSE(job.shape_links);
  ASSERT_TRUE(job.links.has_value());
  for (const api::StageLinkPair& p : pairs) {
    for (const auto& [from, to] : {std::pair{p.a, p.b}, std::pair{p.b, p.a}}) {
      EXPECT_DOUBLE_EQ(job.links->shape(from, to).bytes_per_s, p.gbps * 1e9 / 8)
          << from << " -> " << to;
      EXPECT_DOUBLE_EQ(job.links->shape(from, to).latency_s, p.latency_ms / 1e3)
          << from << " -> " << to;
    }
  }
  EXPECT_EQ(job.links->shape(0, 1), transport::LinkShape{});  // unlisted: no capacity known
  EXPECT_EQ(job.links->shape(3, 0), transport::LinkShape{});
}

TEST(StageJobFileLinks, NoMeasuredPairsLeaveEveryLinkUnknown) {
  api::StageJobFile file = ranks_on_nodes(2, 2);
  file.links = api::unshaped_links_json({});
  const JobSpec job = parse_job_spec(
      api::stage_job_text(api::load_trainingjob_file(kExample).spec, file), "job.json");
  EXPECT_FALSE(job.shape_links);
  ASSERT_TRUE(job.links.has_value());
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) EXPECT_FALSE(job.links->shape(a, b).shaped()) << a << " " << b;
}

TEST(StageJobFileLinks, WarmUpIsOnUnlessTheFileTurnsItOff) {
  const api::TrainingJobSpec spec = api::load_trainingjob_file(kExample).spec;
  api::StageJobFile file = ranks_on_nodes(2, 2);
  file.links = api::unshaped_links_json({{0, 2, 0.9, 75.0}});
  EXPECT_TRUE(parse_job_spec(api::stage_job_text(spec, file), "job.json").warm_up_links);
  file.links["warmup"] = false;
  EXPECT_FALSE(parse_job_spec(api::stage_job_text(spec, file), "job.json").warm_up_links);
  file.links["warmup"] = "no";
  try {
    api::stage_job_text(spec, file);
    ADD_FAILURE() << "a links.warmup that is not a boolean was written";
  } catch (const api::ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find("links.warmup: expected true or false, got \"no\""),
              std::string::npos)
        << e.what();
  }
}

// 64 ranks (8 stages x 8 replicas), each on its own node, every pair that shares a stage or a
// replica listed (64 x 14 / 2 = 448, the most stage_links lists for 64 ranks): the file stays far
// under a ConfigMap's limit and parses back whole.
TEST(StageJobFileLinks, SixtyFourRanksWithEveryPairFitAndParse) {
  api::TrainingJobSpec spec = api::load_trainingjob_file(kExample).spec;
  spec.model.layers = 8;
  spec.parallelism.stages = 8;
  spec.parallelism.replicas = 8;
  spec.micro_batch = 1;
  spec.global_batch = 8;
  std::vector<api::StageLinkPair> pairs;
  for (int a = 0; a < 64; ++a) {
    for (int b = a + 1; b < 64; ++b) {
      if (a % 8 == b % 8 || a / 8 == b / 8) pairs.push_back({a, b, 0.9 + a * 0.01, 40.0 + b});
    }
  }
  ASSERT_EQ(pairs.size(), 448u);
  api::StageJobFile file = ranks_on_nodes(8, 8);
  file.links = api::unshaped_links_json(pairs);
  const std::string text = api::stage_job_text(spec, file);
  EXPECT_LT(text.size(), api::kMaxStageJobFileBytes / 10) << text.size() << " bytes";
  RecordProperty("job_json_bytes", static_cast<int>(text.size()));
  const JobSpec job = parse_job_spec(text, "job.json");
  ASSERT_TRUE(job.links.has_value());
  for (const api::StageLinkPair& p : pairs) {
    EXPECT_DOUBLE_EQ(job.links->shape(p.b, p.a).bytes_per_s, p.gbps * 1e9 / 8);
  }
}

}  // namespace
}  // namespace tessel::stage
