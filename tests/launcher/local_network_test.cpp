// The launcher's network hooks (LocalRunOptions::network, issue 20): the ranks of each device run
// on the host given for it behind its command prefix, the launcher's servers on the server host,
// and with shape_links false job.json says links.shape false, which the stage runtime reads as
// "nothing shaped in user space". Loopback addresses other than 127.0.0.1 stand in for the
// hosts (Linux routes all of 127/8 to lo); the WAN emulator's namespaces are
// bench/transport/local_wan_bench's.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "launcher_process.h"
#include "noderuntime/launcher/job_file.h"
#include "noderuntime/launcher/launcher.h"
#include "noderuntime/launcher/progress_server.h"
#include "noderuntime/launcher/stage_processes.h"
#include "noderuntime/stage/job_spec.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Reaps until every process ended (or the timeout passes).
void wait_all(StageProcesses& processes) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!processes.all_reaped() && std::chrono::steady_clock::now() < deadline) {
    processes.reap();
    std::this_thread::sleep_for(10ms);
  }
}

class LocalNetworkTest : public testing::JobFolderTest {};

TEST_F(LocalNetworkTest, RanksRunOnTheirDevicesHostsBehindThePrefixWithLinksLeftToTheNetwork) {
  const LocalJob job = parse_local_job(testing::tiny_job_yaml(2, 2, 1), "job.yaml", dir_.string());
  LocalRunOptions options;
  options.output_dir = out();
  options.stage_binary = TESSEL_STAGE_BINARY;
  options.device = "cpu";
  options.out = nullptr;
  options.grace_s = 5;
  options.network.server_host = "127.0.0.4";
  options.network.shape_links = false;
  // The prefix says it ran, then execs the stage process in its own place.
  const std::vector<std::string> prefix = {"sh", "-c", "echo prefixed; exec \"$0\" \"$@\""};
  options.network.devices = {{"127.0.0.2", prefix}, {"127.0.0.3", prefix}};
  const LocalRunResult result = run_local_job(job, options);
  ASSERT_EQ(result.status, RunStatus::kDone) << result.message;

  const auto file = nlohmann::json::parse(std::ifstream(dir_ / "out" / "job.json"));
  const auto devices = file.at("links").at("devices").get<std::vector<int>>();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(file.at("ranks").at(rank).at("host"), devices[rank] == 0 ? "127.0.0.2" : "127.0.0.3")
        << file.dump(2);
    const std::string log =
        read_text(dir_ / "out" / "logs" / ("rank-" + std::to_string(rank) + ".log"));
    EXPECT_EQ(log.rfind("prefixed\n", 0), 0u) << log;
  }
  EXPECT_EQ(file.at("links").at("shape"), false);
  EXPECT_EQ(file.at("rendezvous").at("address").get<std::string>().rfind("127.0.0.4:", 0), 0u);
  EXPECT_EQ(file.at("progress").at("address").get<std::string>().rfind("127.0.0.4:", 0), 0u);
  const stage::JobSpec spec = stage::load_job_spec((dir_ / "out" / "job.json").string());
  EXPECT_FALSE(spec.shape_links);
  ASSERT_TRUE(spec.links.has_value());  // the bandwidths that size the streams
  EXPECT_GT(spec.links->shape(0, 1).bytes_per_s, 0);
  const std::string report = read_text(dir_ / "out" / "report.md");
  EXPECT_NE(report.find("the links left to the network between the processes' hosts"),
            std::string::npos);
  EXPECT_EQ(report.find("every link emulated"), std::string::npos);
}

TEST_F(LocalNetworkTest, DevicesThatAreNotOnePerTopologyDeviceAreRefusedBeforeAnythingStarts) {
  const LocalJob job = parse_local_job(testing::tiny_job_yaml(2, 2, 1), "job.yaml", dir_.string());
  LocalRunOptions options;
  options.output_dir = out();
  options.stage_binary = TESSEL_STAGE_BINARY;
  options.out = nullptr;
  options.err = nullptr;
  options.network.devices = {{"127.0.0.2", {}}};
  try {
    run_local_job(job, options);
    FAIL() << "one device entry for a topology of two was accepted";
  } catch (const LocalJobError& e) {
    EXPECT_NE(std::string(e.what()).find("network.devices: 1 entries for the 2 devices"),
              std::string::npos)
        << e.what();
  }
  options.network.devices = {{"127.0.0.2", {}}, {"", {}}};
  try {
    run_local_job(job, options);
    FAIL() << "an empty host was accepted";
  } catch (const LocalJobError& e) {
    EXPECT_NE(std::string(e.what()).find("network.devices[1].host: must not be empty"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / "out" / "job.json"));
}

TEST_F(LocalNetworkTest, TheDefaultJobJsonKeepsLoopbackAndUserSpaceShaping) {
  const LocalJob job = parse_local_job(testing::tiny_job_yaml(2, 2, 1), "job.yaml", dir_.string());
  LocalPlan plan;
  plan.layer_split = {1, 1};
  plan.device_of_rank = {0, 1};
  JobFilePaths paths;
  paths.topology = (dir_ / "topology.yaml").string();
  paths.rendezvous_address = "127.0.0.1:4000";
  paths.token_file = "token";
  const nlohmann::ordered_json plain = make_job_json(job, plan, paths, 7);
  EXPECT_EQ(plain.at("ranks").at(1).at("host"), "127.0.0.1");
  EXPECT_FALSE(plain.at("links").contains("shape"));

  paths.rank_hosts = {"10.0.0.1"};
  try {
    make_job_json(job, plan, paths, 7);
    FAIL() << "one rank host for two ranks was accepted";
  } catch (const LocalJobError& e) {
    EXPECT_NE(std::string(e.what()).find("1 rank hosts for 2 ranks"), std::string::npos)
        << e.what();
  }
}

TEST_F(LocalNetworkTest, JobJsonRefusesALinksShapeThatIsNotABoolean) {
  const LocalJob job = parse_local_job(testing::tiny_job_yaml(2, 2, 1), "job.yaml", dir_.string());
  LocalPlan plan;
  plan.layer_split = {1, 1};
  plan.device_of_rank = {0, 0};  // one device: the topology file is not read for its links
  JobFilePaths paths;
  paths.topology = "unused.yaml";
  paths.rendezvous_address = "127.0.0.1:4000";
  paths.token_file = "token";
  nlohmann::ordered_json file = make_job_json(job, plan, paths, 7);
  file["links"] = {{"default", {{"gbps", 1}}}, {"shape", "no"}};
  try {
    stage::parse_job_spec(file.dump(), "job.json");
    FAIL() << "links.shape \"no\" was accepted";
  } catch (const stage::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("links.shape"), std::string::npos) << e.what();
  }
  file["links"] = {{"default", {{"gbps", 1}}}, {"shape", false}};
  const stage::JobSpec spec = stage::parse_job_spec(file.dump(), "job.json");
  EXPECT_FALSE(spec.shape_links);
  EXPECT_DOUBLE_EQ(spec.links->shape(0, 1).bytes_per_s, 1e9 / 8);
}

TEST(StageProcessesPrefix, ThePrefixExecsTheStageProcessInItsOwnPlace) {
  const fs::path dir = fs::temp_directory_path() / ("tessel-prefix-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path script = dir / "fake-stage";
  std::ofstream(script) << "#!/bin/sh\necho \"stage $*\"\nexit 3\n";
  fs::permissions(script, fs::perms::owner_all);
  {
    StageProcesses processes(script.string(), "job.json", {"stage 0 replica 0"}, dir.string(),
                             {"--device", "cpu"}, {{"env", "TESSEL_PREFIXED=1"}});
    wait_all(processes);
    const StageChild& child = processes.children()[0];
    ASSERT_TRUE(child.exit.has_value());
    EXPECT_EQ(child.exit->describe(), "exited with status 3");  // the stage's own status
    EXPECT_EQ(read_text(child.log_path), "stage --job job.json --rank 0 --device cpu\n");
  }
  try {
    StageProcesses processes(script.string(), "job.json", {"stage 0 replica 0"}, dir.string(), {},
                             {{"tessel-no-such-prefix-program"}});
    FAIL() << "a prefix program that does not exist started";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 (stage 0 replica 0): cannot start "
                                         "tessel-no-such-prefix-program"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(StageProcesses(script.string(), "job.json", {"a", "b"}, dir.string(), {}, {{}}),
               std::invalid_argument);
  fs::remove_all(dir);
}

TEST(ProgressServerHost, ListensOnTheGivenHost) {
  ProgressServer server(1, 0, "127.0.0.5");
  EXPECT_EQ(server.address().rfind("127.0.0.5:", 0), 0u) << server.address();
  EXPECT_THROW(ProgressServer(1, 0, "192.0.2.1"), std::runtime_error);  // not this machine's
}

}  // namespace
}  // namespace tessel::launcher
