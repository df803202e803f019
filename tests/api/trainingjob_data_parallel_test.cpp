// spec.dataParallel (issue 15): the example low-communication job parses with its settings and
// the stage runtime's defaults, the placement's workload carries the mode, job.json gets the
// section the stage reads (none for synchronous jobs), every bad value is refused naming its
// field, and the mode cannot change under a job's checkpoints.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>

#include "api/crds.h"
#include "api/stage_job_file.h"
#include "api/trainingjob.h"
#include "api/yaml_json.h"
#include "placement/limits.h"
#include "placement/sync_period.h"

namespace tessel::api {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const std::string kExamples = std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/";

json manifest(const std::string& name) {
  const std::string path = kExamples + name;
  return yaml_to_json(placement::read_file_bounded(path, kMaxManifestBytes, nullptr).value(), path);
}

std::set<std::string> fields_of(const std::vector<FieldError>& errors) {
  std::set<std::string> fields;
  for (const FieldError& e : errors) fields.insert(e.field);
  return fields;
}

// What the operator decides for a 1 x 2 job (ports the kernel picks, a rendezvous).
StageJobFile two_replicas() {
  StageJobFile f;
  f.ranks = {{0, 0, "0.0.0.0", 0, "member-a/gpu-0"}, {0, 1, "0.0.0.0", 0, "member-b/gpu-0"}};
  f.data_path = "/data/fables.txt";
  f.rendezvous = StageEndpoint{"tessel-operator.tessel-system.svc:7443", "/etc/tessel/token", ""};
  return f;
}

TEST(TrainingJobDataParallel, TheExampleRunsTheLowCommunicationMode) {
  const TrainingJob job =
      parse_trainingjob(manifest("fables-low-communication.yaml"), "example.yaml");
  const DataParallelSpec& d = job.spec.data_parallel;
  EXPECT_TRUE(d.low_communication());
  EXPECT_EQ(d.sync_every, 10);
  EXPECT_EQ(d.delta_bits, 8);
  EXPECT_DOUBLE_EQ(d.outer_learning_rate, 1.0);
  EXPECT_DOUBLE_EQ(d.outer_momentum, 0.0);
  EXPECT_TRUE(d.nesterov);
  EXPECT_TRUE(d.delayed);
  EXPECT_FALSE(d.stagger);  // not given: the default
  // The placement prices the mode as given.
  const placement::DataParallelMode mode = job.spec.workload().data_parallel;
  EXPECT_EQ(mode.kind, placement::DataParallelKind::LowCommunication);
  EXPECT_EQ(mode.sync_every, 10);
  EXPECT_EQ(mode.delta_bits, 8);
  EXPECT_TRUE(mode.delayed);
}

TEST(TrainingJobDataParallel, AbsentOrOnlyAModeTakesTheDefaultsAndLeavesHToThePlanner) {
  const TrainingJob plain = parse_trainingjob(manifest("fables.yaml"), "fables.yaml");
  EXPECT_FALSE(plain.spec.data_parallel.low_communication());
  EXPECT_FALSE(plain.spec.workload().data_parallel.low_communication());
  EXPECT_FALSE(plain.object["spec"].contains("dataParallel"));  // no section invented

  json job = manifest("fables.yaml");
  job["spec"]["dataParallel"] = json::object();
  const TrainingJob defaulted = parse_trainingjob(job, "job.yaml");
  EXPECT_EQ(defaulted.object["spec"]["dataParallel"],
            (json{{"mode", "synchronous"}}));  // the CRD's one default
  EXPECT_FALSE(defaulted.spec.data_parallel.low_communication());

  job["spec"]["dataParallel"] = {{"mode", "low-communication"}};
  const DataParallelSpec d = parse_trainingjob(job, "job.yaml").spec.data_parallel;
  EXPECT_TRUE(d.low_communication());
  // H and the bits are the planner's to choose for the placement (not the runtime's 50 and 32):
  // the placement's workload says so, with the bits the planner picks.
  EXPECT_FALSE(d.sync_every.has_value());
  EXPECT_FALSE(d.delta_bits.has_value());
  const placement::DataParallelMode mode =
      parse_trainingjob(job, "job.yaml").spec.workload().data_parallel;
  EXPECT_TRUE(mode.low_communication());
  EXPECT_TRUE(mode.choose_sync_every);
  EXPECT_TRUE(mode.choose_delta_bits);
  EXPECT_EQ(mode.delta_bits, placement::choose_delta_bits().bits);
  EXPECT_EQ(mode.sync_overhead, placement::kDefaultSyncOverhead);
  // The outer settings: the stage runtime's defaults (noderuntime/stage/training_options.h
  // LowCommunication; tests/stage/stage_job_file_data_parallel_test.cpp checks they are the same).
  EXPECT_DOUBLE_EQ(d.outer_learning_rate, 0.7);
  EXPECT_DOUBLE_EQ(d.outer_momentum, 0.9);
  EXPECT_TRUE(d.nesterov);
  EXPECT_TRUE(d.delayed);
  EXPECT_FALSE(d.stagger);
}

struct Invalid {
  const char* name;
  json data_parallel;            // spec.dataParallel
  std::set<std::string> fields;  // every field the errors must name, and no other
  const char* words;             // a part of the first error's message
};

TEST(TrainingJobDataParallel, EveryBadValueIsNamed) {
  const std::vector<Invalid> cases = {
      {"unknown mode", {{"mode", "sometimes"}}, {"spec.dataParallel.mode"}, "sometimes"},
      {"zero period",
       {{"mode", "low-communication"}, {"syncEvery", 0}},
       {"spec.dataParallel.syncEvery"},
       "must be >= 1"},
      {"period beyond the runtime's",
       {{"mode", "low-communication"}, {"syncEvery", 10001}},
       {"spec.dataParallel.syncEvery"},
       "must be <= 10000"},
      {"16-bit deltas",
       {{"mode", "low-communication"}, {"deltaBits", 16}},
       {"spec.dataParallel.deltaBits"},
       "16"},
      {"zero outer learning rate",
       {{"mode", "low-communication"}, {"outerLearningRate", 0}},
       {"spec.dataParallel.outerLearningRate"},
       "must be > 0"},
      {"momentum of 1",
       {{"mode", "low-communication"}, {"outerMomentum", 1}},
       {"spec.dataParallel.outerMomentum"},
       "must be < 1"},
      {"negative momentum",
       {{"mode", "low-communication"}, {"outerMomentum", -0.1}},
       {"spec.dataParallel.outerMomentum"},
       "must be >= 0"},
      {"nesterov as text",
       {{"mode", "low-communication"}, {"nesterov", "yes"}},
       {"spec.dataParallel.nesterov"},
       "must be true or false"},
      {"unknown field",
       {{"mode", "low-communication"}, {"period", 10}},
       {"spec.dataParallel.period"},
       "unknown field"},
      {"three at once",
       {{"mode", "low-communication"}, {"syncEvery", 0}, {"deltaBits", 6}, {"outerMomentum", 2}},
       {"spec.dataParallel.syncEvery", "spec.dataParallel.deltaBits",
        "spec.dataParallel.outerMomentum"},
       ""},
      {"settings beside mode synchronous",
       {{"mode", "synchronous"}, {"syncEvery", 10}, {"stagger", true}},
       {"spec.dataParallel.syncEvery", "spec.dataParallel.stagger"},
       "applies to mode low-communication only"},
      {"settings without a mode (synchronous, the default)",
       {{"deltaBits", 8}},
       {"spec.dataParallel.deltaBits"},
       "spec.dataParallel.mode is synchronous"},
  };
  for (const Invalid& c : cases) {
    SCOPED_TRACE(c.name);
    json job = manifest("fables.yaml");
    job["spec"]["dataParallel"] = c.data_parallel;
    const std::vector<FieldError> errors = trainingjob_errors(job);
    ASSERT_FALSE(errors.empty());
    EXPECT_EQ(fields_of(errors), c.fields);
    EXPECT_NE(errors[0].message.find(c.words), std::string::npos) << errors[0].message;
    EXPECT_THROW(parse_trainingjob(job, "job.yaml"), ManifestError);
  }
}

// A checkpoint of one mode does not resume in the other (checkpoint_outer_state.h).
TEST(TrainingJobDataParallel, TheModeCannotChangeUnderACheckpoint) {
  json old_job = manifest("fables.yaml");
  old_job["status"] = {{"phase", "Suspended"}};
  json changed = old_job;
  changed["spec"]["dataParallel"] = {{"mode", "low-communication"}};
  EXPECT_TRUE(trainingjob_update_errors(old_job, changed).empty());  // nothing to resume yet

  old_job["status"]["progress"] = {{"step", 100}, {"lastCheckpointStep", 100}};
  const std::vector<FieldError> errors = trainingjob_update_errors(old_job, changed);
  EXPECT_EQ(fields_of(errors), std::set<std::string>{"spec.dataParallel.mode"});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].message.find("checkpoint (step 100)"), std::string::npos)
      << errors[0].message;

  json running = manifest("fables.yaml");
  running["status"] = {{"phase", "Running"}};
  EXPECT_EQ(fields_of(trainingjob_update_errors(running, changed)),
            std::set<std::string>{"spec.dataParallel.mode"});
  // The other settings may change (the next start takes them; the outer state means the same
  // under any of them), as may spec.training.
  json low = manifest("fables-low-communication.yaml");
  low["status"] = {{"phase", "Running"}, {"progress", {{"lastCheckpointStep", 100}}}};
  json retuned = low;
  retuned["spec"]["dataParallel"]["syncEvery"] = 50;
  retuned["spec"]["dataParallel"]["deltaBits"] = 4;
  EXPECT_TRUE(trainingjob_update_errors(low, retuned).empty());
}

TEST(TrainingJobDataParallel, JobJsonCarriesTheSection) {
  const TrainingJobSpec spec =
      parse_trainingjob(manifest("fables-low-communication.yaml"), "example.yaml").spec;
  const ordered_json j = stage_job_json(spec, two_replicas());
  EXPECT_EQ(j["data_parallel"], (ordered_json{{"mode", "low-communication"},
                                              {"sync_every", 10},
                                              {"delta_bits", 8},
                                              {"outer_learning_rate", 1.0},
                                              {"outer_momentum", 0.0},
                                              {"nesterov", true},
                                              {"delayed", true},
                                              {"stagger", false}}));
  TrainingJobSpec synchronous = spec;
  synchronous.data_parallel = {};
  // Synchronous: no section, the stage's default (job.json as before the mode existed).
  EXPECT_FALSE(stage_job_json(synchronous, two_replicas()).contains("data_parallel"));
}

// job.json always carries numbers: a spec whose H and bits were left to the planner is refused
// until the caller fills in the planner's choice, each field named.
TEST(TrainingJobDataParallel, JobJsonRefusesHAndBitsNotChosen) {
  TrainingJobSpec spec =
      parse_trainingjob(manifest("fables-low-communication.yaml"), "example.yaml").spec;
  spec.data_parallel.sync_every.reset();
  spec.data_parallel.delta_bits.reset();
  try {
    stage_job_json(spec, two_replicas());
    FAIL() << "wrote a job.json without H";
  } catch (const ManifestError& e) {
    EXPECT_EQ(fields_of(e.errors()),
              (std::set<std::string>{"data_parallel.sync_every", "data_parallel.delta_bits"}));
    EXPECT_NE(std::string(e.what()).find("left to the planner"), std::string::npos) << e.what();
  }
  spec.data_parallel.sync_every = 20;
  spec.data_parallel.delta_bits = 4;
  EXPECT_EQ(stage_job_json(spec, two_replicas())["data_parallel"]["sync_every"], 20);
}

// A spec built by hand (the launcher's) is checked like the caller's values, by job.json path.
TEST(TrainingJobDataParallel, JobJsonRefusesBadOuterSettings) {
  TrainingJobSpec spec =
      parse_trainingjob(manifest("fables-low-communication.yaml"), "example.yaml").spec;
  spec.data_parallel.outer_learning_rate = -1;
  spec.data_parallel.outer_momentum = 1;
  try {
    stage_job_json(spec, two_replicas());
    FAIL() << "wrote a negative outer learning rate";
  } catch (const ManifestError& e) {
    EXPECT_EQ(fields_of(e.errors()), (std::set<std::string>{"data_parallel.outer_learning_rate",
                                                            "data_parallel.outer_momentum"}));
  }
}

// The CRD's bounds are the runtime's: a job the API server stores is one the stages run.
TEST(TrainingJobDataParallel, CrdBoundsAreTheRuntimes) {
  const OpenApiSchema& schema = trainingjob_schema();
  EXPECT_EQ(schema.at("spec.dataParallel.syncEvery").at("maximum").get<int>(),
            placement::kMaxSyncEvery);
  EXPECT_EQ(schema.at("spec.dataParallel.syncEvery").at("minimum").get<int>(), 1);
  EXPECT_EQ(schema.at("spec.dataParallel.deltaBits").at("enum"), (json{32, 8, 4}));
  EXPECT_EQ(schema.at("spec.dataParallel.mode").at("enum"),
            (json{"synchronous", "low-communication"}));
  // Only mode has a default: a default on the others would put them beside mode synchronous,
  // where they are refused.
  for (const char* field : {"syncEvery", "deltaBits", "outerLearningRate", "outerMomentum",
                            "nesterov", "delayed", "stagger"}) {
    EXPECT_FALSE(schema.at(std::string("spec.dataParallel.") + field).contains("default")) << field;
  }
}

}  // namespace
}  // namespace tessel::api
