// `tessel local` of a low-communication job whose file leaves sync_every and delta_bits out (or
// says auto): the job.json the stages read carries the planner's choice for the placement the
// job runs (choose_sync_every on that placement's timing, as `tessel plan` chooses it), also for
// a placement given with --placement; a resumed run keeps the H of the run it resumes; given
// numbers are run as given; bad values are refused naming the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "noderuntime/launcher/job_file.h"
#include "noderuntime/launcher/local_plan.h"
#include "noderuntime/launcher/local_topology.h"
#include "noderuntime/stage/job_spec.h"
#include "placement/full_cost.h"
#include "placement/sync_period.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

// 2 stages x 2 replicas over two generated sites whose links are slowed down: the outer sync
// costs something against the inner step, so H is a real choice.
LocalJob job_with(const std::string& data_parallel) {
  return parse_local_job(
      "name: dp\n"
      "topology: {generate: {sites: 2, seed: 3}, bandwidth_scale: 0.01}\n"
      "model: {layers: 4, hidden: 32, heads: 4, seq_len: 16}\n"
      "training: {steps: 20, micro_batch: 1, global_batch: 4}\n"
      "data: {synthetic: {seed: 1, bytes: 20000}}\n"
      "pipeline: {stages: 2, replicas: 2}\n"
      "data_parallel: " +
          data_parallel + "\n",
      "job.yaml", "");
}

std::string error_of(const std::string& data_parallel) {
  try {
    job_with(data_parallel);
  } catch (const LocalJobError& e) {
    return e.what();
  }
  return "";
}

ComputeSpeed speed() {
  ComputeSpeed s;
  s.flops_per_s = 4e9;
  s.cores = 2;
  s.share = 0.5;
  return s;
}

// choose_sync_every for the plan's placement, from a cost model of its own on the plan's
// (localized) topology.
placement::SyncPeriodChoice expected_choice(const LocalJob& job, const LocalPlan& plan,
                                            double overhead = placement::kDefaultSyncOverhead) {
  const placement::FullCostModel model(plan.topology, {job.stages, job.replicas}, job.workload,
                                       cost_options(job));
  return placement::choose_sync_every(model.schedule(),
                                      model.pipeline_timing(plan.placement.pipelines), overhead);
}

JobFilePaths paths(const std::string& topology = "topology.yaml") {
  JobFilePaths p;
  p.topology = topology;
  p.rendezvous_address = "127.0.0.1:4000";
  p.token_file = "token";
  return p;
}

// job.json's data_parallel section, as the stage parses it (with the plan's topology, which its
// links name, in a file of this process's own).
stage::LowCommunication stage_reads(const LocalJob& job, const LocalPlan& plan) {
  const fs::path topology =
      fs::temp_directory_path() / ("tessel-sync-period-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(topology) << placement::topology_to_yaml(plan.topology);
  const std::string text = make_job_json(job, plan, paths(topology.string()), 7).dump();
  stage::LowCommunication read;
  try {
    read = stage::parse_job_spec(text, "job.json").training.low_communication;
  } catch (...) {
    fs::remove(topology);
    throw;
  }
  fs::remove(topology);
  return read;
}

TEST(LocalSyncPeriod, LeftOutTheyAreThePlannersChoiceForThePlacement) {
  for (const char* section : {"{mode: low-communication}",
                              "{mode: low-communication, sync_every: auto, delta_bits: auto}"}) {
    const LocalJob job = job_with(section);
    EXPECT_TRUE(job.workload.data_parallel.choose_sync_every) << section;
    const LocalPlan plan = plan_local_job(job, job_topology(job), speed(), "");
    const placement::SyncPeriodChoice expected = expected_choice(job, plan);
    const stage::LowCommunication l = stage_reads(job, plan);
    EXPECT_TRUE(l.enabled);
    EXPECT_EQ(l.sync_every, expected.sync_every) << section;
    EXPECT_EQ(l.delta_bits, placement::choose_delta_bits().bits) << section;
    // The H the plan was priced and simulated at; the plan's mode holds numbers, nothing left.
    EXPECT_EQ(plan.timing.outer_sync.sync_every, expected.sync_every);
    EXPECT_EQ(plan.data_parallel.mode.sync_every, expected.sync_every);
    EXPECT_FALSE(plan.data_parallel.mode.choose_sync_every);
    EXPECT_FALSE(plan.data_parallel.mode.choose_delta_bits);
    EXPECT_EQ(plan.data_parallel.sync_every_reason, placement::sync_every_reason(expected));
    EXPECT_EQ(plan.data_parallel.delta_bits_reason,
              placement::delta_bits_reason(placement::choose_delta_bits()));
  }
}

TEST(LocalSyncPeriod, TheToleranceIsTheJobs) {
  const LocalJob job = job_with("{mode: low-communication, sync_overhead: 0.5}");
  const LocalPlan plan = plan_local_job(job, job_topology(job), speed(), "");
  EXPECT_EQ(stage_reads(job, plan).sync_every, expected_choice(job, plan, 0.5).sync_every);
}

TEST(LocalSyncPeriod, GivenNumbersAreRunAsGiven) {
  const LocalJob job = job_with("{mode: low-communication, sync_every: 7, delta_bits: 4}");
  EXPECT_FALSE(job.workload.data_parallel.choose_sync_every);
  const LocalPlan plan = plan_local_job(job, job_topology(job), speed(), "");
  const stage::LowCommunication l = stage_reads(job, plan);
  EXPECT_EQ(l.sync_every, 7);
  EXPECT_EQ(l.delta_bits, 4);
  EXPECT_EQ(plan.timing.outer_sync.sync_every, 7);
  EXPECT_EQ(plan.data_parallel.sync_every_reason, "H=7: given (data_parallel.sync_every)");
  EXPECT_EQ(plan.data_parallel.delta_bits_reason, "4-bit deltas: given (data_parallel.delta_bits)");

  // One given, the other chosen.
  const LocalJob bits_only = job_with("{mode: low-communication, delta_bits: 32}");
  const LocalPlan bits_plan = plan_local_job(bits_only, job_topology(bits_only), speed(), "");
  EXPECT_EQ(stage_reads(bits_only, bits_plan).delta_bits, 32);
  EXPECT_EQ(stage_reads(bits_only, bits_plan).sync_every,
            expected_choice(bits_only, bits_plan).sync_every);
}

// --placement: the choice is made for the placement given, as for a searched one.
TEST(LocalSyncPeriod, AGivenPlacementGetsTheChoiceForIt) {
  const fs::path dir =
      fs::temp_directory_path() / ("tessel-local-sync-period-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const LocalJob job = job_with("{mode: low-communication}");
  const placement::Topology network = job_topology(job);
  const LocalPlan searched = plan_local_job(job, network, speed(), "");
  // Each pipeline inside one site and each stage's replicas across the sites, or the other way
  // round: whichever the search did not pick.
  const auto& sites = searched.topology.devices;
  std::vector<int> first_site, second_site;
  for (int d = 0; d < 4; ++d)
    (sites[d].site == sites[0].site ? first_site : second_site).push_back(d);
  ASSERT_EQ(first_site.size(), 2u);
  const bool pipelines_within_sites = sites[searched.placement.pipelines[0][0]].site ==
                                      sites[searched.placement.pipelines[0][1]].site;
  const std::vector<std::vector<int>> pipelines =
      pipelines_within_sites ? std::vector<std::vector<int>>{{first_site[0], second_site[0]},
                                                             {first_site[1], second_site[1]}}
                             : std::vector<std::vector<int>>{{first_site[0], first_site[1]},
                                                             {second_site[0], second_site[1]}};
  nlohmann::json placement = placement::placement_to_json(searched.placement);
  placement["pipelines"] = {{{"replica", 0}, {"devices", pipelines[0]}},
                            {{"replica", 1}, {"devices", pipelines[1]}}};
  placement["rank_map"] = nlohmann::json::array();
  for (int r = 0; r < 2; ++r) {
    for (int s = 0; s < 2; ++s) {
      placement["rank_map"].push_back(
          {{"rank", r * 2 + s}, {"replica", r}, {"stage", s}, {"device", pipelines[r][s]}});
      placement["stages"][s]["devices"][r] = pipelines[r][s];
      placement["stages"][s]["dp_ring"][r] = pipelines[r][s];
    }
  }
  const std::string file = (dir / "placement.json").string();
  std::ofstream(file) << placement.dump();
  const LocalPlan given = plan_local_job(job, network, speed(), file);
  fs::remove_all(dir);
  ASSERT_EQ(given.placement.pipelines, pipelines);
  const placement::SyncPeriodChoice expected = expected_choice(job, given);
  EXPECT_EQ(stage_reads(job, given).sync_every, expected.sync_every);
  EXPECT_EQ(given.data_parallel.sync_every_reason, placement::sync_every_reason(expected));
  // The other layout moves the data-parallel exchange to or from the slow links: its own H.
  EXPECT_NE(given.data_parallel.mode.sync_every, searched.data_parallel.mode.sync_every);
}

// A resumed run keeps the H of the run it resumes (its job.json); a given H stays as given.
TEST(LocalSyncPeriod, AResumedRunKeepsTheEarlierRunsH) {
  const fs::path dir =
      fs::temp_directory_path() / ("tessel-local-resume-h-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string earlier = (dir / "job.json").string();
  std::ofstream(earlier) << R"({"data_parallel": {"mode": "low-communication", "sync_every": 7}})";
  const std::optional<int> kept = sync_every_of_job_file(earlier);
  EXPECT_EQ(kept, 7);
  for (const char* bad : {R"({"data_parallel": {"sync_every": 0}})", R"({"data_parallel": {}})",
                          R"({"training": {}})", "not json"}) {
    std::ofstream(earlier) << bad;
    EXPECT_EQ(sync_every_of_job_file(earlier), std::nullopt) << bad;
  }
  EXPECT_EQ(sync_every_of_job_file((dir / "absent.json").string()), std::nullopt);
  fs::remove_all(dir);

  const LocalJob job = job_with("{mode: low-communication}");
  const LocalPlan plan = plan_local_job(job, job_topology(job), speed(), "", kept);
  EXPECT_EQ(stage_reads(job, plan).sync_every, 7);  // not on the ladder: no fresh choice gives it
  EXPECT_EQ(plan.timing.outer_sync.sync_every, 7);
  EXPECT_TRUE(plan.data_parallel.sync_every_kept);
  EXPECT_NE(plan.data_parallel.sync_every_reason.find("H=7: kept from the run being resumed"),
            std::string::npos)
      << plan.data_parallel.sync_every_reason;

  const LocalJob given = job_with("{mode: low-communication, sync_every: 20}");
  EXPECT_EQ(
      stage_reads(given, plan_local_job(given, job_topology(given), speed(), "", kept)).sync_every,
      20);
}

TEST(LocalSyncPeriod, BadValuesAreNamed) {
  EXPECT_NE(error_of("{mode: low-communication, sync_every: sometimes}")
                .find("job.yaml: data_parallel.sync_every"),
            std::string::npos);
  EXPECT_NE(error_of("{mode: low-communication, sync_every: 0}").find("data_parallel.sync_every"),
            std::string::npos);
  EXPECT_NE(error_of("{mode: low-communication, delta_bits: 6}")
                .find("data_parallel.delta_bits: must be 32, 8, 4 or auto, got 6"),
            std::string::npos);
  EXPECT_NE(error_of("{mode: low-communication, sync_every: 10, sync_overhead: 0.1}")
                .find("data_parallel.sync_overhead: is the planner's tolerance for H; it applies "
                      "only when sync_every is auto or left out, got sync_every 10"),
            std::string::npos);
  EXPECT_NE(
      error_of("{mode: low-communication, sync_overhead: 0}").find("data_parallel.sync_overhead"),
      std::string::npos);
  EXPECT_NE(
      error_of("{mode: low-communication, sync_overhead: 2}").find("data_parallel.sync_overhead"),
      std::string::npos);
  EXPECT_NE(error_of("{mode: synchronous, sync_every: auto}").find("data_parallel.sync_every"),
            std::string::npos);
}

// The plan and the job must agree on the mode: a plan made for another job is refused.
TEST(LocalSyncPeriod, APlanOfAnotherModeIsRefused) {
  const LocalJob job = job_with("{mode: low-communication}");
  LocalPlan plan;
  plan.layer_split = {2, 2};
  plan.device_of_rank = {0, 1, 2, 3};
  try {
    make_job_json(job, plan, paths(), 7);
    FAIL() << "wrote job.json from a synchronous plan";
  } catch (const LocalJobError& e) {
    EXPECT_NE(std::string(e.what()).find("the plan's data-parallel mode (synchronous) is not the "
                                         "job's"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessel::launcher
