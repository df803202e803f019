// spec.dataParallel on clusters (issue 15): the operator's placement prices the low-communication
// mode (the data-parallel exchange across clusters every syncEvery steps at deltaBits, not an
// all-reduce per step), the job.json every member's stage pods get carries the mode's section
// (a synchronous job's job.json has none: the stage's default), and the admission webhook
// refuses what the schema cannot (settings beside mode synchronous, a mode change under a
// checkpoint).
#include "operator/controller/job_placement.h"
#include "operator/server/admission.h"
#include "tests/operator/example_job.h"
#include "tests/operator/placement_inputs.h"
#include "tests/operator/trainingjob_reconciler_fixture.h"

namespace tessel::controller::reconciler_test {
namespace {

// One stage x 2 replicas, one replica per cluster: the data-parallel group crosses the clusters.
api::TrainingJob two_regions_job(const json& data_parallel) {
  json object = api::parse_trainingjob(small_job(1, 2).object, "test job").object;
  if (!data_parallel.is_null()) object["spec"]["dataParallel"] = data_parallel;
  return api::parse_trainingjob(object, "test job");
}

TEST(DataParallelPlacement, TheLowCommunicationModeIsPriced) {
  const std::vector<GpuNode> nodes = {gpu_node("a", "a1", 1, "us"), gpu_node("b", "b1", 1, "eu")};
  const JobPlacement synchronous = place_job(two_regions_job(nullptr), nodes);
  const JobPlacement low = place_job(
      two_regions_job({{"mode", "low-communication"}, {"syncEvery", 50}, {"deltaBits", 8}}), nodes);
  const double sync_s = synchronous.placement.cost.data_parallel_s;
  const double low_s = low.placement.cost.data_parallel_s;
  ASSERT_GT(sync_s, 0);
  // One 8-bit exchange (a quarter of fp32's bytes) every 50 steps, against an fp32 all-reduce
  // every step: far under a tenth of it per step.
  EXPECT_LT(low_s, sync_s / 10) << "synchronous " << sync_s << " s, low-communication " << low_s;
  EXPECT_LT(low.placement.predicted_iteration_s, synchronous.placement.predicted_iteration_s);
}

json admission_review(const std::string& operation, const json& object, const json& old_object) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "c0ffee00-6393-11e8-b7cc-42010a800002"},
            {"kind", {{"group", "tessel.dev"}, {"version", "v1alpha1"}, {"kind", "TrainingJob"}}},
            {"operation", operation},
            {"object", object},
            {"oldObject", old_object}}}};
}

TEST(DataParallelAdmission, TheWebhookRefusesWhatTheSchemaCannot) {
  json job = server::example_job();
  job["spec"]["dataParallel"] = {{"mode", "synchronous"}, {"syncEvery", 10}};
  const json refused =
      server::review_admission(admission_review("CREATE", job, nullptr))["response"];
  EXPECT_EQ(refused["allowed"], false);
  EXPECT_EQ(refused["status"]["message"],
            "spec.dataParallel.syncEvery: applies to mode low-communication only; "
            "spec.dataParallel.mode is synchronous");

  json old_job = server::example_job();
  old_job["status"] = {{"phase", "Suspended"}, {"progress", {{"lastCheckpointStep", 200}}}};
  job["spec"]["dataParallel"] = {{"mode", "low-communication"}};
  const json update =
      server::review_admission(admission_review("UPDATE", job, old_job))["response"];
  EXPECT_EQ(update["allowed"], false);
  EXPECT_NE(update["status"]["message"].get<std::string>().find(
                "spec.dataParallel.mode: cannot change from \"synchronous\" to "
                "\"low-communication\": the job has a checkpoint (step 200)"),
            std::string::npos)
      << update.dump();
  EXPECT_EQ(
      server::review_admission(admission_review("CREATE", job, nullptr))["response"]["allowed"],
      true);
}

TEST_F(TrainingJobReconcilerTest, TheStagesJobJsonCarriesTheMode) {
  add_node(0, "a1", 1);
  add_node(1, "b1", 1);
  json manifest = job_manifest("diloco", 1, 2);
  manifest["spec"]["dataParallel"] = {
      {"mode", "low-communication"}, {"syncEvery", 20},      {"deltaBits", 4},
      {"outerLearningRate", 1.0},    {"outerMomentum", 0.0}, {"stagger", true}};
  create_and_place(manifest);
  const json current = job("diloco");
  ASSERT_EQ(phase(current), "Starting") << current["status"].dump();
  for (int m = 0; m < 2; ++m) {
    const std::vector<json> maps = remote(m, "configmaps", current);
    ASSERT_EQ(maps.size(), 1u) << kMembers[m];
    const json file = json::parse(maps[0]["data"]["job.json"].get<std::string>());
    EXPECT_EQ(file["data_parallel"], (json{{"mode", "low-communication"},
                                           {"sync_every", 20},
                                           {"delta_bits", 4},
                                           {"outer_learning_rate", 1.0},
                                           {"outer_momentum", 0.0},
                                           {"nesterov", true},
                                           {"delayed", true},
                                           {"stagger", true}}))
        << kMembers[m];
  }
}

TEST_F(TrainingJobReconcilerTest, ASynchronousJobsJobJsonHasNoSection) {
  add_node(0, "a1", 1);
  add_node(1, "b1", 1);
  json manifest = job_manifest("allreduce", 1, 2);
  manifest["spec"]["dataParallel"] = {{"mode", "synchronous"}};
  create_and_place(manifest);
  const json current = job("allreduce");
  ASSERT_EQ(phase(current), "Starting") << current["status"].dump();
  const std::vector<json> maps = remote(0, "configmaps", current);
  ASSERT_EQ(maps.size(), 1u);
  const json file = json::parse(maps[0]["data"]["job.json"].get<std::string>());
  EXPECT_FALSE(file.contains("data_parallel")) << file.dump();
}

}  // namespace
}  // namespace tessel::controller::reconciler_test
