// The sync period H and the delta bits of a low-communication TrainingJob on clusters (issue 15):
// left out of spec.dataParallel, the planner chooses them for the placement the operator made
// (the H the cost model priced that placement at: choose_sync_every on its timing), the stage
// job.json carries those numbers, and status.placement.dataParallel and the Placed event say
// them and why. Given ones are run as given. A job that resumes a checkpoint keeps the H chosen
// at its earlier placement; one with no checkpoint has it chosen afresh.
#include "operator/controller/job_placement.h"
#include "placement/full_cost.h"
#include "placement/sync_period.h"
#include "tests/operator/placement_inputs.h"
#include "tests/operator/trainingjob_reconciler_fixture.h"

namespace tessel::controller::reconciler_test {
namespace {

// One stage x 2 replicas, one replica per cluster: the data-parallel group crosses the clusters.
api::TrainingJob two_regions_job(const json& data_parallel) {
  json object = api::parse_trainingjob(small_job(1, 2).object, "test job").object;
  object["spec"]["dataParallel"] = data_parallel;
  return api::parse_trainingjob(object, "test job");
}

const std::vector<GpuNode> kTwoRegions = {gpu_node("a", "a1", 1, "us"),
                                          gpu_node("b", "b1", 1, "eu")};

// choose_sync_every for the placement, from a cost model of its own on the placement's topology.
placement::SyncPeriodChoice expected_choice(const api::TrainingJob& job, const JobPlacement& p) {
  placement::FullCostOptions options;
  options.schedule = job.spec.parallelism.schedule;
  options.chunks = job.spec.parallelism.virtual_stages;
  options.overlap = job.spec.parallelism.overlap;
  const placement::FullCostModel model(p.topology.topology,
                                       {job.spec.parallelism.stages, job.spec.parallelism.replicas},
                                       job.spec.workload(), options);
  return placement::choose_sync_every(model.schedule(),
                                      model.pipeline_timing(p.placement.pipelines),
                                      placement::kDefaultSyncOverhead);
}

TEST(SyncPeriodPlacement, LeftOutTheyAreThePlannersChoiceForThePlacement) {
  const api::TrainingJob job = two_regions_job({{"mode", "low-communication"}});
  const JobPlacement placed = place_job(job, kTwoRegions);
  const placement::DataParallelChoice& dp = placed.data_parallel;
  ASSERT_TRUE(dp.low_communication());
  ASSERT_TRUE(dp.sync_every.has_value());
  const placement::SyncPeriodChoice expected = expected_choice(job, placed);
  EXPECT_EQ(dp.mode.sync_every, expected.sync_every);
  EXPECT_EQ(dp.sync_every_reason, placement::sync_every_reason(expected));
  EXPECT_EQ(dp.mode.delta_bits, placement::choose_delta_bits().bits);
  EXPECT_EQ(dp.delta_bits_reason, placement::delta_bits_reason(placement::choose_delta_bits()));

  const json status = placement_status(placed, job)["dataParallel"];
  EXPECT_EQ(status["mode"], "low-communication");
  EXPECT_EQ(status["syncEvery"], expected.sync_every);
  EXPECT_EQ(status["syncEveryChosen"], true);
  EXPECT_EQ(status["syncEveryReason"], dp.sync_every_reason);
  EXPECT_EQ(status["deltaBits"], placement::choose_delta_bits().bits);
  EXPECT_EQ(status["deltaBitsChosen"], true);
  EXPECT_EQ(chosen_sync_every_from_status(placement_status(placed, job)), expected.sync_every);
}

TEST(SyncPeriodPlacement, GivenTheyAreRunAsGivenAndNotKeptOver) {
  const api::TrainingJob job =
      two_regions_job({{"mode", "low-communication"}, {"syncEvery", 20}, {"deltaBits", 4}});
  // An H kept from an earlier choice does not override a given one.
  const JobPlacement placed = place_job(job, kTwoRegions, nullptr, {}, 7);
  const placement::DataParallelChoice& dp = placed.data_parallel;
  EXPECT_EQ(dp.mode.sync_every, 20);
  EXPECT_EQ(dp.mode.delta_bits, 4);
  EXPECT_FALSE(dp.sync_every.has_value());
  EXPECT_FALSE(dp.sync_every_kept);
  EXPECT_EQ(dp.sync_every_reason, "H=20: given (spec.dataParallel.syncEvery)");
  EXPECT_EQ(dp.delta_bits_reason, "4-bit deltas: given (spec.dataParallel.deltaBits)");
  const json status = placement_status(placed, job);
  EXPECT_EQ(status["dataParallel"]["syncEveryChosen"], false);
  EXPECT_EQ(status["dataParallel"]["deltaBitsChosen"], false);
  EXPECT_EQ(chosen_sync_every_from_status(status), std::nullopt);

  // A synchronous job has no section.
  EXPECT_FALSE(placement_status(place_job(small_job(1, 2), kTwoRegions), small_job(1, 2))
                   .contains("dataParallel"));
}

TEST(SyncPeriodPlacement, AKeptHIsPricedAndSaidToBeKept) {
  const api::TrainingJob job = two_regions_job({{"mode", "low-communication"}});
  const JobPlacement placed = place_job(job, kTwoRegions, nullptr, {}, 7);
  const placement::DataParallelChoice& dp = placed.data_parallel;
  EXPECT_EQ(dp.mode.sync_every, 7);  // not on the ladder: no fresh choice gives it
  EXPECT_TRUE(dp.sync_every_kept);
  EXPECT_NE(dp.sync_every_reason.find("H=7: kept from the job's earlier placement"),
            std::string::npos)
      << dp.sync_every_reason;
  EXPECT_TRUE(dp.delta_bits.has_value());  // the bits are still the planner's
  const json status = placement_status(placed, job);
  EXPECT_EQ(status["dataParallel"]["syncEveryChosen"], true);
  EXPECT_EQ(chosen_sync_every_from_status(status), 7);
}

TEST(SyncPeriodPlacement, AStatusWithoutAUsableChoiceKeepsNothing) {
  json status = {{"dataParallel",
                  {{"mode", "low-communication"},
                   {"syncEvery", 50},
                   {"syncEveryChosen", true},
                   {"deltaBits", 8},
                   {"deltaBitsChosen", true}}}};
  EXPECT_EQ(chosen_sync_every_from_status(status), 50);
  for (const json& bad : {json(0), json(placement::kMaxSyncEvery + 1), json("50"), json(2.5)}) {
    json changed = status;
    changed["dataParallel"]["syncEvery"] = bad;
    EXPECT_EQ(chosen_sync_every_from_status(changed), std::nullopt) << bad;
  }
  status["dataParallel"]["syncEveryChosen"] = false;
  EXPECT_EQ(chosen_sync_every_from_status(status), std::nullopt);
  EXPECT_EQ(chosen_sync_every_from_status(json::object()), std::nullopt);
  EXPECT_EQ(chosen_sync_every_from_status(nullptr), std::nullopt);
}

json job_json_of(const std::vector<json>& maps) {
  return json::parse(maps.at(0)["data"]["job.json"].get<std::string>());
}

// On clusters: the stage job.json, status.placement.dataParallel and the Placed event say the
// same H, the planner's.
TEST_F(TrainingJobReconcilerTest, TheStagesRunThePlannersChoiceAndTheStatusSaysIt) {
  add_node(0, "a1", 1);
  add_node(1, "b1", 1);
  json manifest = job_manifest("chosen", 1, 2);
  manifest["spec"]["dataParallel"] = {{"mode", "low-communication"}};
  create_and_place(manifest);
  const json current = job("chosen");
  ASSERT_EQ(phase(current), "Starting") << current["status"].dump();
  const json dp = current["status"]["placement"]["dataParallel"];
  ASSERT_TRUE(dp.is_object()) << current["status"].dump();
  EXPECT_EQ(dp["syncEveryChosen"], true);
  EXPECT_EQ(dp["deltaBits"], placement::choose_delta_bits().bits);
  const int h = dp["syncEvery"].get<int>();
  EXPECT_NE(
      std::find(std::begin(placement::kSyncEveryLadder), std::end(placement::kSyncEveryLadder), h),
      std::end(placement::kSyncEveryLadder));
  for (int m = 0; m < 2; ++m) {
    const json file = job_json_of(remote(m, "configmaps", current));
    EXPECT_EQ(file["data_parallel"]["sync_every"], h) << kMembers[m];
    EXPECT_EQ(file["data_parallel"]["delta_bits"], dp["deltaBits"]) << kMembers[m];
  }
  const std::string placed = condition(current, "Placed").value("message", "");
  EXPECT_NE(placed.find("Data parallelism low-communication H=" + std::to_string(h) + " " +
                        std::to_string(placement::choose_delta_bits().bits) + "-bit (" +
                        dp["syncEveryReason"].get<std::string>()),
            std::string::npos)
      << placed;
  bool event = false;
  for (const json& e : events("chosen"))
    event |= e.value("reason", "") == "Placed" &&
             e.value("message", "").find("H=" + std::to_string(h)) != std::string::npos;
  EXPECT_TRUE(event);
}

// A restart: with a checkpoint, the H of the earlier placement is kept (7 stands for an H chosen
// on another network: no fresh choice gives it); without one, the planner chooses afresh.
class SyncPeriodRestart : public TrainingJobReconcilerTest {
 protected:
  json restart(const std::string& name, bool with_checkpoint) {
    add_node(0, "a1", 1);
    add_node(1, "b1", 1);  // the restart uses the failed pod's node again: nothing else fits
    json manifest = job_manifest(name, 1, 2);
    manifest["spec"]["dataParallel"] = {{"mode", "low-communication"}};
    create_and_place(manifest);
    EXPECT_EQ(phase(job(name)), "Starting");
    first_choice_ = job(name)["status"]["placement"]["dataParallel"]["syncEvery"].get<int>();
    set_phase("Running");
    JobProgress progress;
    progress.world_size = 2;
    progress.started = 2;
    progress.step = 10;
    progress.total_steps = 40;
    if (with_checkpoint) progress.last_checkpoint_step = 5;
    stages_.set_progress(key(name), progress);
    reconcile(name);
    EXPECT_EQ(phase(job(name)), "Running") << job(name)["status"].dump();
    hub_->admin().patch(jobs_, ns_, name, kube::PatchType::kMerge,
                        {{"status", {{"placement", {{"dataParallel", {{"syncEvery", 7}}}}}}}}, {},
                        "status");
    sync_job(name);
    set_phase("Failed", name + "-s0-r1");
    reconcile(name);
    finish_deletions();
    reconcile(name);
    const json current = job(name);
    EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
    return current;
  }
  int first_choice_ = 0;
};

TEST_F(SyncPeriodRestart, WithACheckpointTheEarlierChoiceIsKept) {
  const json current = restart("kept", true);
  const json dp = current["status"]["placement"]["dataParallel"];
  EXPECT_EQ(dp["syncEvery"], 7) << current["status"].dump();
  EXPECT_EQ(dp["syncEveryChosen"], true);
  EXPECT_NE(dp["syncEveryReason"].get<std::string>().find("kept"), std::string::npos) << dp;
  for (int m = 0; m < 2; ++m) {
    for (const json& map : remote(m, "configmaps", current)) {
      EXPECT_EQ(
          json::parse(map["data"]["job.json"].get<std::string>())["data_parallel"]["sync_every"], 7)
          << kMembers[m];
    }
  }
}

TEST_F(SyncPeriodRestart, WithoutACheckpointThePlannerChoosesAfresh) {
  const json current = restart("fresh", false);
  const json dp = current["status"]["placement"]["dataParallel"];
  EXPECT_NE(dp["syncEvery"], 7) << current["status"].dump();
  EXPECT_EQ(dp["syncEvery"], first_choice_);  // the same nodes: the same choice
  EXPECT_EQ(dp["syncEveryChosen"], true);
  EXPECT_EQ(dp["syncEveryReason"].get<std::string>().find("kept"), std::string::npos) << dp;
}

}  // namespace
}  // namespace tessel::controller::reconciler_test
