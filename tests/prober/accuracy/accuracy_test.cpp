// The prober's accuracy (issue 12's acceptance): over a veth pair into a network namespace,
// shaped with Linux tc tbf at 50, 200 and 1000 Mbit/s, the measured bulk throughput is within
// +-10% of the shaped rate; a latency added by the transport's link emulator is measured within
// +-1 ms. Timing-sensitive: ctest runs these alone (label prober-accuracy). The namespace cases
// skip, saying why, where namespaces cannot be made (no root, no `ip`, no tbf).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "tests/prober/prober_test_support.h"

namespace tessel::prober {
namespace {

using namespace std::chrono_literals;

const std::string kSecret = "tessel-probe-accuracy-secret-0123";

ProbeOptions accuracy_options() {
  ProbeOptions options = short_probe_options(kSecret, 100, 4, 2000ms);
  options.max_bytes = 2ull * 1024 * 1024 * 1024;
  return options;
}

TEST(ProbeAccuracy, EmulatedLatencyIsMeasuredWithinOneMillisecond) {
  for (double latency_ms : {2.0, 10.0, 25.0}) {
    SCOPED_TRACE("emulated one-way latency (ms) on the probe's path: " +
                 std::to_string(latency_ms));
    auto server = start_probe_server(kSecret);
    ProbeOptions options = accuracy_options();
    options.bulk_duration = 100ms;
    options.emulated_link.latency_s = latency_ms / 1e3;  // the pongs come back unshaped
    const api::LinkMeasurement m = measure_peer(loopback_peer(server->port()), options).measurement;
    EXPECT_NEAR(m.rtt_p50_ms, latency_ms, 1.0);
  }
}

TEST(ProbeAccuracy, EmulatedBandwidthIsMeasuredWithinTenPercent) {
  auto server = start_probe_server(kSecret);
  ProbeOptions options = accuracy_options();
  options.emulated_link.bytes_per_s = 200e6 / 8;  // 200 Mbit/s
  const api::LinkMeasurement m = measure_peer(loopback_peer(server->port()), options).measurement;
  EXPECT_NEAR(m.bulk_gbps, 0.2, 0.02);
}

// A veth pair from this namespace into a new one, its outgoing end shaped by tc tbf; removed at
// the end. The /30 subnet and the names derive from the process id, so parallel runs differ.
class ShapedVeth {
 public:
  // nullopt, with `why`, when this machine cannot make it.
  static std::optional<ShapedVeth> make(std::string& why) {
    ShapedVeth veth;
    const int pid = static_cast<int>(::getpid());
    veth.netns_ = "tprobe" + std::to_string(pid);
    veth.outer_ = "tpa" + std::to_string(pid);
    const std::string inner = "tpb" + std::to_string(pid);
    const std::string prefix = "10.213." + std::to_string((pid >> 6) & 255) + ".";
    const int base = (pid & 63) * 4;
    veth.outer_ip_ = prefix + std::to_string(base + 1);
    veth.inner_ip_ = prefix + std::to_string(base + 2);
    const std::string in_ns = "ip netns exec " + veth.netns_ + " ";
    for (const std::string& command : {
             "ip netns add " + veth.netns_,
             "ip link add " + veth.outer_ + " type veth peer name " + inner,
             "ip link set " + inner + " netns " + veth.netns_,
             "ip addr add " + veth.outer_ip_ + "/30 dev " + veth.outer_,
             "ip link set " + veth.outer_ + " up",
             in_ns + "ip addr add " + veth.inner_ip_ + "/30 dev " + inner,
             in_ns + "ip link set " + inner + " up",
             in_ns + "ip link set lo up",
         }) {
      if (!veth.run(command)) {
        why = "cannot make a network namespace with a veth pair here (`" + command +
              "` failed; needs root and iproute2)";
        return std::nullopt;
      }
    }
    return veth;
  }

  ShapedVeth(ShapedVeth&& other) noexcept
      : netns_(std::move(other.netns_)),
        outer_(std::move(other.outer_)),
        outer_ip_(other.outer_ip_),
        inner_ip_(other.inner_ip_) {
    other.netns_.clear();
  }
  ~ShapedVeth() {
    if (netns_.empty()) return;
    run("ip link del " + outer_);  // takes its peer with it
    run("ip netns del " + netns_);
  }

  // Shapes what this namespace sends into the pair to `mbit` Mbit/s. The bucket holds a few
  // milliseconds of the rate (at least 64 KiB, a GSO packet) so it adds little to 2 s of data.
  bool shape(int mbit) {
    const int burst_bytes = std::max(64 * 1024, mbit * 1000 * 1000 / 8 / 250);
    return run("tc qdisc replace dev " + outer_ + " root tbf rate " + std::to_string(mbit) +
               "mbit burst " + std::to_string(burst_bytes) + " latency 200ms");
  }

  // A listener inside the namespace (a thread enters it, binds, and leaves it behind; the
  // socket stays in the namespace).
  transport::TcpListener listen_inside() {
    std::optional<transport::TcpListener> listener;
    std::string error;
    std::thread inside([&] {
      const int ns = ::open(("/var/run/netns/" + netns_).c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
        error = "cannot enter network namespace " + netns_;
      } else {
        listener.emplace(transport::TcpListener::bind(inner_ip_, 0));
      }
      if (ns >= 0) ::close(ns);
    });
    inside.join();
    if (!listener) throw std::runtime_error(error);
    return std::move(*listener);
  }

  const std::string& inner_ip() const { return inner_ip_; }

 private:
  ShapedVeth() = default;
  static bool run(const std::string& command) {
    return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
  }

  std::string netns_, outer_, outer_ip_, inner_ip_;
};

TEST(ProbeAccuracy, TbfShapedBulkThroughputIsMeasuredWithinTenPercent) {
  std::string why;
  std::optional<ShapedVeth> veth = ShapedVeth::make(why);
  if (!veth) GTEST_SKIP() << why;
  auto server = start_probe_server(veth->listen_inside(), kSecret);
  for (int mbit : {50, 200, 1000}) {
    SCOPED_TRACE("tc tbf rate (Mbit/s): " + std::to_string(mbit));
    if (!veth->shape(mbit)) GTEST_SKIP() << "tc tbf is not available here (`tc qdisc` failed)";
    const ProbeResult result =
        measure_peer({"gpu-node-2", veth->inner_ip(), server->port()}, accuracy_options());
    const api::LinkMeasurement& m = result.measurement;
    std::printf(
        "tbf %d Mbit/s: bulk %.4f Gbit/s, small %.4f Gbit/s, rtt p50 %.3f ms, %llu bytes "
        "sent\n",
        mbit, m.bulk_gbps, m.small_gbps, m.rtt_p50_ms,
        static_cast<unsigned long long>(result.bytes_sent));
    EXPECT_NEAR(m.bulk_gbps, mbit / 1e3, 0.1 * mbit / 1e3);
  }
}

}  // namespace
}  // namespace tessel::prober
