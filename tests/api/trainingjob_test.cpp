// The TrainingJob parser every consumer uses: the example manifest, the CRD's defaults, and
// invalid jobs refused with every field at fault named; the CRD's bounds are placement's limits.
#include "api/trainingjob.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>

#include "api/crds.h"
#include "api/yaml_json.h"
#include "placement/limits.h"

namespace tessel::api {
namespace {

using nlohmann::json;

const std::string kExample = std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/fables.yaml";

json example() {
  return yaml_to_json(placement::read_file_bounded(kExample, kMaxManifestBytes, nullptr).value(),
                      kExample);
}

std::set<std::string> fields_of(const std::vector<FieldError>& errors) {
  std::set<std::string> fields;
  for (const FieldError& e : errors) fields.insert(e.field);
  return fields;
}

TEST(TrainingJob, TheExampleParsesWithTheCrdDefaults) {
  const TrainingJob job = load_trainingjob_file(kExample);
  EXPECT_EQ(job.name, "fables");
  const TrainingJobSpec& s = job.spec;
  EXPECT_EQ(s.parallelism.stages, 2);
  EXPECT_EQ(s.parallelism.replicas, 2);
  EXPECT_EQ(s.parallelism.virtual_stages, 1);
  EXPECT_EQ(s.parallelism.schedule, placement::ScheduleKind::OneFOneB);
  EXPECT_EQ(s.micro_batch, 4);
  EXPECT_EQ(s.global_batch, 16);
  EXPECT_EQ(s.training.steps, 300);
  EXPECT_DOUBLE_EQ(s.training.learning_rate, 0.003);
  EXPECT_DOUBLE_EQ(s.training.beta2, 0.95);  // the CRD's default
  EXPECT_EQ(s.data.text_path, "../data/fables.txt");
  EXPECT_EQ(s.checkpoint.keep, 2);
  EXPECT_EQ(s.checkpoint.interval_steps, 100);
  EXPECT_EQ(s.failure_policy.start_timeout_seconds, 600);
  EXPECT_EQ(s.placement.evaluations, 2000);
  EXPECT_EQ(s.managed_by, "tessel.dev/operator");
  const placement::Workload w = s.workload();
  EXPECT_EQ(w.layers, 4);
  EXPECT_EQ(w.hidden, 128);
  EXPECT_EQ(w.vocab, 256);
  EXPECT_EQ(w.precision, placement::Precision::FP32);
  EXPECT_EQ(w.micro_batches_per_replica(2), 2);
  EXPECT_EQ(job.object["spec"]["placement"]["costModel"], "full");
}

TEST(TrainingJob, APresetIsTheModelAndFieldsBesideItOverrideIt) {
  json job = example();
  job["spec"]["model"] = {{"preset", "gpt2-124m"}, {"seqLen", 256}};
  job["spec"]["parallelism"]["stages"] = 4;
  const TrainingJob parsed = parse_trainingjob(job, "job.yaml");
  const placement::Workload w = parsed.spec.workload();
  EXPECT_EQ(w.layers, 12);
  EXPECT_EQ(w.hidden, 768);
  EXPECT_EQ(w.seq_len, 256);
  EXPECT_EQ(w.vocab, 50257);
}

struct Invalid {
  const char* name;
  std::function<void(json&)> edit;
  std::set<std::string> fields;  // every field the errors must name, and no other
  const char* words;             // a part of the first error's message
};

TEST(TrainingJob, InvalidJobsNameEveryFieldAtFault) {
  const std::vector<Invalid> cases = {
      {"wrong kind", [](json& j) { j["kind"] = "Job"; }, {"kind"}, "must be TrainingJob"},
      {"wrong version",
       [](json& j) { j["apiVersion"] = "tessel.dev/v1"; },
       {"apiVersion"},
       "must be tessel.dev/v1alpha1"},
      {"name escapes its folder",
       [](json& j) { j["metadata"]["name"] = "../../../../x"; },
       {"metadata.name"},
       "DNS-1123"},
      {"name too long for pod names",
       [](json& j) { j["metadata"]["name"] = std::string(50, 'a'); },
       {"metadata.name"},
       "at most 45"},
      {"no name", [](json& j) { j["metadata"].erase("name"); }, {"metadata.name"}, "required"},
      {"no spec", [](json& j) { j.erase("spec"); }, {"spec"}, "required"},
      {"zero stages",
       [](json& j) { j["spec"]["parallelism"]["stages"] = 0; },
       {"spec.parallelism.stages"},
       "must be >= 1, got 0"},
      {"stages as text",
       [](json& j) { j["spec"]["parallelism"]["stages"] = "two"; },
       {"spec.parallelism.stages"},
       "must be an integer, got 'two'"},
      {"replicas beyond the planner",
       [](json& j) { j["spec"]["parallelism"]["replicas"] = 65; },
       {"spec.parallelism.replicas"},
       "must be <= 64"},
      {"two errors at once",
       [](json& j) {
         j["spec"]["training"]["beta2"] = 1.5;
         j["spec"]["parallelism"]["schedule"] = "zigzag";
       },
       {"spec.training.beta2", "spec.parallelism.schedule"},
       ""},
      {"unknown field",
       [](json& j) { j["spec"]["training"]["momentum"] = 0.9; },
       {"spec.training.momentum"},
       "unknown field"},
      {"null value",
       [](json& j) { j["spec"]["batch"]["microBatch"] = nullptr; },
       {"spec.batch.microBatch"},
       "got null"},
      {"zero learning rate",
       [](json& j) { j["spec"]["training"]["learningRate"] = 0; },
       {"spec.training.learningRate"},
       "must be > 0"},
      {"steps beyond the limit",
       [](json& j) { j["spec"]["training"]["steps"] = 20000000; },
       {"spec.training.steps"},
       "must be <= 10000000"},
      {"negative seed",
       [](json& j) { j["spec"]["training"]["seed"] = -1; },
       {"spec.training.seed"},
       "must be >= 0"},
      {"both data sources",
       [](json& j) { j["spec"]["data"]["synthetic"] = json::object(); },
       {"spec.data"},
       "exactly one"},
      {"no data source",
       [](json& j) { j["spec"]["data"] = json::object(); },
       {"spec.data"},
       "exactly one"},
      {"shape without heads",
       [](json& j) { j["spec"]["model"].erase("heads"); },
       {"spec.model.heads"},
       "required when no preset"},
      {"heads do not divide hidden",
       [](json& j) { j["spec"]["model"]["heads"] = 3; },
       {"spec.model.heads"},
       "multiple of heads"},
      {"global batch not divisible",
       [](json& j) { j["spec"]["batch"]["globalBatch"] = 12; },
       {"spec.batch.globalBatch"},
       "12 is not a multiple of replicas x microBatch = 2 x 4 = 8"},
      {"more stages than layers",
       [](json& j) { j["spec"]["parallelism"]["stages"] = 5; },
       {"spec.parallelism.stages"},
       "exceeds the model's 4 layers"},
      {"interleaved with one chunk",
       [](json& j) { j["spec"]["parallelism"]["schedule"] = "interleaved"; },
       {"spec.parallelism.virtualStages"},
       "needs 2 or more"},
      {"chunks without interleaving",
       [](json& j) { j["spec"]["parallelism"]["virtualStages"] = 2; },
       {"spec.parallelism.virtualStages"},
       "only the interleaved schedule"},
      {"interleaved chunks beyond the layers",
       [](json& j) {
         j["spec"]["parallelism"]["schedule"] = "interleaved";
         j["spec"]["parallelism"]["virtualStages"] = 4;
       },
       {"spec.parallelism.stages"},
       "2 x 4 = 8 exceeds"},
      {"selector In without values",
       [](json& j) {
         j["spec"]["placement"]["clusterSelector"]["matchExpressions"] =
             json::array({{{"key", "region"}, {"operator", "In"}}});
       },
       {"spec.placement.clusterSelector.matchExpressions[0].values"},
       "non-empty for In"},
      {"bad quantity",
       [](json& j) { j["spec"]["template"]["resources"]["limits"]["memory"] = "10 GB"; },
       {"spec.template.resources.limits.memory"},
       "does not match"},
      {"env without name",
       [](json& j) {
         j["spec"]["template"]["env"] = json::array({{{"value", "1"}}});
       },
       {"spec.template.env[0].name"},
       "required"},
      {"budget beyond the limit",
       [](json& j) { j["spec"]["placement"]["evaluations"] = 2000000000; },
       {"spec.placement.evaluations"},
       "must be <= 10000000"},
      {"elastic minimum above the full width",
       [](json& j) {
         j["spec"]["elastic"] = {{"minReplicas", 3}};
       },
       {"spec.elastic.minReplicas"},
       "3 exceeds spec.parallelism.replicas 2"},
      {"elastic minimum of zero",
       [](json& j) {
         j["spec"]["elastic"] = {{"minReplicas", 0}};
       },
       {"spec.elastic.minReplicas"},
       "must be >= 1"},
      {"elastic without a minimum",
       [](json& j) { j["spec"]["elastic"] = json::object(); },
       {"spec.elastic.minReplicas"},
       ""},
      {"int32 overflow",
       [](json& j) { j["spec"]["checkpoint"]["keep"] = 5000000000; },
       {"spec.checkpoint.keep"},
       ""},
  };
  for (const Invalid& c : cases) {
    SCOPED_TRACE(c.name);
    json job = example();
    c.edit(job);
    const std::vector<FieldError> errors = trainingjob_errors(job);
    ASSERT_FALSE(errors.empty());
    EXPECT_EQ(fields_of(errors), c.fields);
    EXPECT_NE(errors[0].message.find(c.words), std::string::npos) << errors[0].message;
    try {
      parse_trainingjob(job, "job.yaml");
      ADD_FAILURE() << "parsed";
    } catch (const ManifestError& e) {
      EXPECT_EQ(e.source(), "job.yaml");
      EXPECT_EQ(std::string(e.what()).rfind("job.yaml: ", 0), 0u) << e.what();
    }
  }
}

// spec.elastic: absent, one width; present, every narrower width down to minReplicas that
// divides the global batch into whole micro-batches per replica.
TEST(TrainingJob, ElasticWidthsDivideTheGlobalBatch) {
  json job = example();
  job["spec"]["parallelism"]["replicas"] = 4;
  job["spec"]["batch"] = {{"microBatch", 2}, {"globalBatch", 24}};
  EXPECT_EQ(parse_trainingjob(job, "job.yaml").spec.usable_widths(), std::vector<int>{4});
  EXPECT_FALSE(parse_trainingjob(job, "job.yaml").spec.elastic.has_value());
  job["spec"]["elastic"] = {{"minReplicas", 1}};
  const TrainingJob elastic = parse_trainingjob(job, "job.yaml");
  ASSERT_TRUE(elastic.spec.elastic.has_value());
  EXPECT_EQ(elastic.spec.elastic->min_replicas, 1);
  // 24 = 4 x 2 x 3 = 3 x 2 x 4 = 2 x 2 x 6 = 1 x 2 x 12: every width divides it.
  EXPECT_EQ(elastic.spec.usable_widths(), (std::vector<int>{4, 3, 2, 1}));
  job["spec"]["batch"]["globalBatch"] = 16;  // 3 x 2 does not divide 16
  job["spec"]["elastic"]["minReplicas"] = 2;
  EXPECT_EQ(parse_trainingjob(job, "job.yaml").spec.usable_widths(), (std::vector<int>{4, 2}));
}

TEST(TrainingJob, ParallelismIsFixedWhileTheJobHasPods) {
  json running = example();
  running["status"] = {{"phase", "Running"}};
  json changed = running;
  changed["spec"]["parallelism"]["replicas"] = 4;
  changed["spec"]["training"]["steps"] = 600;  // may change
  EXPECT_EQ(fields_of(trainingjob_update_errors(running, changed)),
            std::set<std::string>{"spec.parallelism"});
  running["status"]["phase"] = "Suspended";
  EXPECT_TRUE(trainingjob_update_errors(running, changed).empty());
}

TEST(TrainingJob, AManifestFileIsBoundedAndNamed) {
  try {
    load_trainingjob_file("/dev/zero");
    FAIL() << "read /dev/zero";
  } catch (const ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/zero: "), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_trainingjob_file("/no/such/job.yaml"), ManifestError);
}

// The CRD's bounds are the limits the planner and runtime hold (placement/limits.h): a job
// the API server stores is one tessel can run, and the other way round.
TEST(TrainingJobCrd, BoundsAreThePlacementLimits) {
  const OpenApiSchema& schema = trainingjob_schema();
  const auto maximum = [&](const std::string& path) {
    return schema.at(path).at("maximum").get<int64_t>();
  };
  EXPECT_EQ(maximum("spec.model.layers"), placement::kMaxLayers);
  EXPECT_EQ(maximum("spec.model.hidden"), placement::kMaxHidden);
  EXPECT_EQ(maximum("spec.model.ffnHidden"), placement::kMaxFfnHidden);
  EXPECT_EQ(maximum("spec.model.seqLen"), placement::kMaxSeqLen);
  EXPECT_EQ(maximum("spec.model.vocab"), placement::kMaxVocab);
  EXPECT_EQ(maximum("spec.parallelism.stages"), placement::kMaxStages);
  EXPECT_EQ(maximum("spec.parallelism.replicas"), placement::kMaxReplicas);
  EXPECT_EQ(maximum("spec.parallelism.virtualStages"), placement::kMaxChunks);
  EXPECT_EQ(maximum("spec.parallelism.microbatchGroup"), placement::kMaxMicroBatches);
  EXPECT_EQ(maximum("spec.batch.microBatch"), placement::kMaxMicroBatch);
  EXPECT_EQ(maximum("spec.batch.globalBatch"), placement::kMaxGlobalBatch);
  EXPECT_EQ(maximum("spec.training.steps"), placement::kMaxSteps);
  EXPECT_EQ(maximum("spec.data.synthetic.bytes"), static_cast<int64_t>(placement::kMaxTextBytes));
  EXPECT_EQ(maximum("spec.checkpoint.intervalSteps"), placement::kMaxSteps);
  EXPECT_EQ(maximum("spec.placement.evaluations"), placement::kMaxSearchEvaluations);
}

}  // namespace
}  // namespace tessel::api
