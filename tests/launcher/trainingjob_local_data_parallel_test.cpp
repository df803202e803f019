// `tessel local` of a TrainingJob in the low-communication mode (spec.dataParallel): the example
// manifest gives the same job as the local job file it mirrors, for the stages (the mode's
// settings) and for the plan (the workload's mode the cost model prices); a manifest without
// the field runs synchronous.
#include <gtest/gtest.h>

#include <filesystem>
#include <tuple>

#include "noderuntime/launcher/trainingjob_local.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;

const std::string kSource = TESSEL_SOURCE_DIR;
const std::string kTwoSitesSlow = kSource + "/examples/local/two-sites-slow.yaml";

TEST(TrainingJobLocalDataParallel, TheExampleManifestIsTheExampleLocalJob) {
  const LocalJob from_manifest = load_job_file(
      kSource + "/examples/trainingjobs/fables-low-communication.yaml", kTwoSitesSlow);
  const LocalJob local =
      load_job_file(kSource + "/examples/local/fables-low-communication.yaml", "");
  EXPECT_EQ(from_manifest.name, local.name);
  EXPECT_EQ(fs::canonical(from_manifest.topology.file), fs::canonical(local.topology.file));
  EXPECT_EQ(from_manifest.stages, local.stages);
  EXPECT_EQ(from_manifest.replicas, local.replicas);
  const stage::LowCommunication &a = from_manifest.data_parallel, &b = local.data_parallel;
  EXPECT_TRUE(a.enabled);
  EXPECT_EQ(std::tie(a.enabled, a.sync_every, a.delta_bits, a.outer_learning_rate, a.outer_momentum,
                     a.nesterov, a.delayed, a.stagger, a.final_step),
            std::tie(b.enabled, b.sync_every, b.delta_bits, b.outer_learning_rate, b.outer_momentum,
                     b.nesterov, b.delayed, b.stagger, b.final_step));
  EXPECT_EQ(from_manifest.workload.data_parallel, local.workload.data_parallel);
  EXPECT_TRUE(from_manifest.workload.data_parallel.low_communication());
}

TEST(TrainingJobLocalDataParallel, AManifestWithoutTheFieldRunsSynchronous) {
  const LocalJob job = load_job_file(kSource + "/examples/trainingjobs/fables.yaml", kTwoSitesSlow);
  EXPECT_FALSE(job.data_parallel.enabled);
  EXPECT_FALSE(job.workload.data_parallel.low_communication());
}

}  // namespace
}  // namespace tessel::launcher
