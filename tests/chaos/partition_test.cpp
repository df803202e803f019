// A network partition of ONE link between two stages (issue 14): every node of the fleet lives in
// a network namespace of the WAN emulator (tests/support/wan), so the stage pods talk over real
// routed links, and one more namespace is the hub's site, where a forwarder made inside it
// carries the stage pods' rendezvous and progress to the stage Service on this machine's
// loopback. After a checkpoint, both directions between the node of the stage-0 rank and the node
// of its stage-1 peer drop every packet (no reset: silence, as a cut cable or a black-holing
// router gives) for longer than the job's ioTimeoutSeconds, then heal; every other link,
// the hub's included, keeps working. Both ranks give the link up on its timeout, naming each
// other; the attempt fails, and the job restarts from its last checkpoint. Where namespaces
// cannot be made (not root, no /dev/net/tun, no `ip`) the case skips with the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "tests/chaos/chaos_fixture.h"
#include "tests/support/wan/wan_emulator.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
namespace fs = std::filesystem;

constexpr int kSteps = 120;
constexpr int64_t kFaultStep = 2 * kCheckpointInterval + 3;

// Keeps every line that the files at `paths` held while it ran (polled every 50 ms): a pod's
// directory is emptied when the next attempt's pod of the same name starts, and the lines a rank
// wrote before it failed are wanted after that.
class LogCapture {
 public:
  explicit LogCapture(std::vector<fs::path> paths) : paths_(std::move(paths)) {
    thread_ = std::jthread([this](std::stop_token stop) {
      while (!stop.stop_requested()) {
        poll();
        std::this_thread::sleep_for(milliseconds(50));
      }
      poll();
    });
  }
  // The lines of paths[i] seen so far, in the order first seen.
  std::vector<std::string> lines(size_t i) {
    std::lock_guard lock(mutex_);
    return lines_[i];
  }

 private:
  void poll() {
    for (size_t i = 0; i < paths_.size(); ++i) {
      std::ifstream in(paths_[i]);
      std::lock_guard lock(mutex_);
      for (std::string line; std::getline(in, line);)
        if (seen_[i].insert(line).second) lines_[i].push_back(line);
    }
  }

  std::vector<fs::path> paths_;
  std::mutex mutex_;
  std::map<size_t, std::set<std::string>> seen_;
  std::map<size_t, std::vector<std::string>> lines_;
  std::jthread thread_;
};

class PartitionE2e : public ChaosE2e {
 protected:
  void SetUp() override {
    wan::WanConfig config;
    config.namespaces = 2 * static_cast<size_t>(nodes_per_member()) + 1;  // the nodes, the hub
    try {
      wan_ = wan::WanEmulator::start(config);
    } catch (const wan::WanUnavailable& e) {
      GTEST_SKIP() << "WAN emulator unavailable, no partition can be made here: " << e.what();
    }
    hub_site_ = wan_->size() - 1;
    int listener = -1;
    wan_->call_in(hub_site_, [&] { listener = listening_socket(wan_->address(hub_site_)); });
    hub_forwarder_ = std::make_unique<StageServiceProxy>(listener);
    hub_forwarder_->set_upstream([this] { return stage_service_port(); });
    ChaosE2e::SetUp();
  }

  void TearDown() override {
    if (!wan_) return;  // skipped before anything was started
    ChaosE2e::TearDown();
    hub_forwarder_.reset();
    wan_.reset();
  }

  // Node n of the fleet (member-major, as GpuFleet lists them) in namespace n.
  FleetOptions fleet_options() const override {
    FleetOptions options = ChaosE2e::fleet_options();
    for (size_t n = 0; n < hub_site_; ++n)
      options.node_networks.emplace_back(wan_->namespace_name(n), wan_->address(n));
    return options;
  }

  // The serving certificate names the advertised address; the test reaches the operator's
  // HTTPS endpoints (health, webhooks) on this machine's loopback, which it must name too.
  std::vector<std::string> more_hub_values() const override {
    std::vector<std::string> values = ChaosE2e::more_hub_values();
    values.push_back("certificate.extraIPs=[\"127.0.0.1\"]");
    return values;
  }

  std::string stage_service_address() const override {
    return wan_->address(hub_site_) + ":" + std::to_string(hub_forwarder_->port());
  }

  // The WAN namespace of the fleet's node `node`.
  size_t namespace_of(const std::string& node) const {
    const std::vector<GpuNode>& nodes = fleet_->nodes();
    for (size_t n = 0; n < nodes.size(); ++n)
      if (nodes[n].name == node) return n;
    ADD_FAILURE() << "no node " << node << " in the fleet";
    return 0;
  }

  // The Running stage pod of `job` for `stage` (replica 0) and its address (status.podIP).
  struct PlacedPod {
    StagePod pod;
    std::string ip;
  };
  PlacedPod stage_pod(const std::string& job, int stage) {
    for (int m = 0; m < federation_->member_count(); ++m)
      for (const json& pod : pods_in(m, std::string(kJobLabel) + "=" + job + ",tessel.dev/stage=" +
                                            std::to_string(stage) + ",tessel.dev/replica=0")) {
        if (pod.value("/status/phase"_json_pointer, std::string()) != "Running") continue;
        const json labels = pod["metadata"]["labels"];
        return {{m, pod["metadata"].value("name", ""), pod["spec"].value("nodeName", ""),
                 std::stoi(labels.value("tessel.dev/rank", "-1"))},
                pod.value("/status/podIP"_json_pointer, std::string())};
      }
    ADD_FAILURE() << "no Running pod of " << job << " for stage " << stage;
    return {};
  }

  void set_pair(size_t a, size_t b, double loss) {
    wan::LinkSettings link = wan_->link(a, b);
    link.loss = loss;
    wan_->set_link(a, b, link);
    wan_->set_link(b, a, link);
  }

  std::unique_ptr<wan::WanEmulator> wan_;
  size_t hub_site_ = 0;
  std::unique_ptr<StageServiceProxy> hub_forwarder_;
};

// Lines of `lines` that say the link to `peer_rank` at `peer_ip` timed out.
std::vector<std::string> timeouts_naming(const std::vector<std::string>& lines, int peer_rank,
                                         const std::string& peer_ip) {
  const std::string peer = "rank " + std::to_string(peer_rank) + " (" + peer_ip + ":";
  std::vector<std::string> found;
  for (const std::string& line : lines)
    if (line.find(peer) != std::string::npos &&
        (line.find("no data for") != std::string::npos ||
         line.find("no progress sending for") != std::string::npos))
      found.push_back(line);
  return found;
}

TEST_F(PartitionE2e, ALinkBetweenTwoStagesPartitionedFailsBothEndsAndTheJobResumes) {
  // 2 stages x 1 replica: the partitioned link is the only one between the two ranks, so what
  // each sees is that link's silence and nothing else.
  apply_chaos_job("partition", kSteps, 3,
                  [](json& job) { job["spec"]["parallelism"]["replicas"] = 1; });
  watch("partition");
  const JobSample before = wait_for_step("partition", kFaultStep);
  const PlacedPod first = stage_pod("partition", 0);
  const PlacedPod second = stage_pod("partition", 1);
  ASSERT_FALSE(first.pod.name.empty() || second.pod.name.empty());
  const size_t a = namespace_of(first.pod.node), b = namespace_of(second.pod.node);
  ASSERT_NE(a, b) << "both stages on node " << first.pod.node;
  // The pods live on their nodes' addresses: their traffic crosses the emulator.
  EXPECT_EQ(first.ip, wan_->address(a)) << first.pod.name;
  EXPECT_EQ(second.ip, wan_->address(b)) << second.pod.name;

  auto log_of = [&](const StagePod& pod) {
    return fs::path(
               fleet_->kubelet(pod.member).pod_directory(federation_->namespace_name(), pod.name)) /
           "stage.log";
  };
  LogCapture logs({log_of(first.pod), log_of(second.pod)});
  const wan::ForwarderStats stats_before = wan_->stats();

  const auto silence = milliseconds(static_cast<int>(kChaosIoTimeoutSeconds * 1000) + 2000);
  const auto fault = steady_clock::now();
  set_pair(a, b, 1.0);
  std::this_thread::sleep_for(silence);
  set_pair(a, b, 0.0);
  EXPECT_GT(wan_->stats().dropped_loss, stats_before.dropped_loss)
      << "nothing was dropped on the partitioned link";

  const std::string fault_text =
      "the link between rank " + std::to_string(first.pod.rank) + " (stage 0, node " +
      first.pod.node + ") and rank " + std::to_string(second.pod.rank) + " (stage 1, node " +
      second.pod.node + ") partitioned both ways for " + std::to_string(silence.count()) +
      " ms (WAN emulator, loss 1: no reset), every other link up; ioTimeoutSeconds " +
      std::to_string(static_cast<int>(kChaosIoTimeoutSeconds));
  // Both ranks have given the link up by the time the job has restarted.
  const ChaosResult row = finish_restart_case("partition", fault_text, "partition", fault,
                                              before.attempt(), kCheckpointInterval);

  const std::vector<std::string> first_gave_up =
      timeouts_naming(logs.lines(0), second.pod.rank, second.ip);
  const std::vector<std::string> second_gave_up =
      timeouts_naming(logs.lines(1), first.pod.rank, first.ip);
  for (const std::string& line : first_gave_up) std::cout << "partition, stage 0: " << line << "\n";
  for (const std::string& line : second_gave_up)
    std::cout << "partition, stage 1: " << line << "\n";
  auto all = [](const std::vector<std::string>& lines) {
    std::ostringstream out;
    for (const std::string& line : lines) out << "\n  " << line;
    return out.str();
  };
  EXPECT_FALSE(first_gave_up.empty())
      << "rank " << first.pod.rank << " did not time out on its link to rank " << second.pod.rank
      << "; its log:" << all(logs.lines(0));
  EXPECT_FALSE(second_gave_up.empty())
      << "rank " << second.pod.rank << " did not time out on its link to rank " << first.pod.rank
      << "; its log:" << all(logs.lines(1));
  EXPECT_EQ(row.outcome, "recovered");
}

}  // namespace
}  // namespace tessel::testing
