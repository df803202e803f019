// The WAN emulator against itself (issue 20): through its namespaces and TUN devices the
// kernel's own ping and TCP see the round trip, rate and loss it is set to. Ping RTT within
// 1 ms of 2 x the one-way delay at 0, 50 and 150 ms; one TCP stream near min(rate, window /
// RTT); a UDP burst at loss p arriving at about 1 - p; and the forwarder's own ceiling, printed.
// Needs root, /dev/net/tun and `ip`: elsewhere every case skips, naming what is missing.
// Timing-sensitive: ctest runs these alone (label wan-emulator).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "tests/wan/emulator/wan_measure.h"

namespace tessel::wan {
namespace {

using namespace std::chrono_literals;

WanConfig config_of(std::size_t namespaces, LinkSettings default_link = {}) {
  WanConfig config;
  config.namespaces = namespaces;
  config.default_link = default_link;
  return config;
}

LinkOverride pair(std::size_t a, std::size_t b, double delay_ms) {
  LinkOverride link;
  link.from = a;
  link.to = b;
  link.delay_ms = delay_ms;
  return link;
}

TEST(WanEmulator, PingRoundTripIsTwiceTheOneWayDelay) {
  // Namespace 0 reaches 1, 2 and 3 over links of 0, 25 and 75 ms each way.
  WanConfig config = config_of(4);
  config.links = {pair(0, 1, 0), pair(0, 2, 25), pair(0, 3, 75)};
  START_OR_SKIP(wan, config);
  for (std::size_t to : {1, 2, 3}) {
    const double expected = 2 * wan->link(0, to).delay_ms;
    const std::uint64_t forwarded_before = wan->stats().packets_out;
    const std::vector<double> rtts = ping_ms(*wan, 0, to, 10);
    EXPECT_GE(wan->stats().packets_out - forwarded_before, 20u) << "echoes and replies";
    const double p50 = median(rtts);
    std::printf("ping %s -> %s, set %.0f ms: median %.3f ms (min %.3f, max %.3f)\n",
                wan->address(0).c_str(), wan->address(to).c_str(), expected, p50,
                *std::min_element(rtts.begin(), rtts.end()),
                *std::max_element(rtts.begin(), rtts.end()));
    // Never early: the delay is the emulator's. How late is this machine's timer wake-ups, which
    // a loaded CI machine stretches (the median was 150.4-150.5 ms at 150 unloaded, docs/
    // benchmarks.md, and 151.3 once under CI's load): bounded only against a gross error, a
    // delay applied twice or not at all.
    const double fastest = *std::min_element(rtts.begin(), rtts.end());
    EXPECT_GE(fastest, expected) << "RTT set to " << expected << " ms";
    EXPECT_LT(fastest, expected + std::max(10.0, 0.2 * expected))
        << "RTT set to " << expected << " ms";
  }
}

// One stream's throughput against min(rate, window / RTT), the window being the largest the
// receiver advertised (what the kernel made of the requested buffers: about 1.25x the request,
// as the granted buffer is twice it). The band is wide: it checks the emulator's limits, not this
// machine.
void expect_stream_near_model(const WanEmulator& wan, int buffer_bytes, Seconds measure) {
  const LinkSettings& link = wan.link(0, 1);
  const StreamResult r = tcp_stream(wan, 0, 1, buffer_bytes, 2s, measure);
  const double rtt_s = 2 * link.delay_ms / 1e3;
  const double window_mbit = r.peer_window * 8 / 1e6 / rtt_s;
  // Payload is 1448 of each 1500 bytes the link carries (IP and TCP headers with timestamps).
  const double rate_mbit = link.rate_mbit * 1448 / 1500;
  const double model = std::min(rate_mbit, window_mbit);
  std::printf(
      "tcp stream, rate %.0f Mbit/s, RTT %.0f ms, SO_SNDBUF/SO_RCVBUF %d requested: granted "
      "%d/%d, peer window %u bytes -> model min(%.1f, %.1f) = %.1f Mbit/s; measured %.1f "
      "Mbit/s (%.2fx), %llu bytes\n",
      link.rate_mbit, 2 * link.delay_ms, buffer_bytes, r.sndbuf_granted, r.rcvbuf_granted,
      r.peer_window, rate_mbit, window_mbit, model, r.mbit_per_s, r.mbit_per_s / model,
      static_cast<unsigned long long>(r.bytes));
  EXPECT_EQ(r.bytes, r.bytes_sent);
  EXPECT_GT(r.peer_window, 0u);
  EXPECT_GE(r.mbit_per_s, 0.5 * model);
  EXPECT_LE(r.mbit_per_s, 1.2 * model);
}

TEST(WanEmulator, AStreamWithAWideWindowRunsAtTheLinkRate) {
  // 100 Mbit/s, RTT 20 ms: a bandwidth-delay product of 250 kB under a 4 MiB window.
  LinkSettings link;
  link.delay_ms = 10;
  link.rate_mbit = 100;
  START_OR_SKIP(wan, config_of(2, link));
  expect_stream_near_model(*wan, 4 << 20, 3s);
}

TEST(WanEmulator, AStreamWithANarrowWindowRunsAtWindowPerRoundTrip) {
  // 1 Gbit/s, RTT 150 ms: 18.75 MB in flight would fill it; a 1 MiB window allows ~7%.
  LinkSettings link;
  link.delay_ms = 75;
  link.rate_mbit = 1000;
  START_OR_SKIP(wan, config_of(2, link));
  expect_stream_near_model(*wan, 1 << 20, 4s);
}

// With offload the kernels hand the forwarder TCP super-packets: the same limits hold (ping,
// rate, window per round trip), with far fewer packets forwarded.
WanConfig offloaded(LinkSettings link) {
  WanConfig config = config_of(2, link);
  config.offload = true;
  return config;
}

// The mean size of what the forwarder moved since `before`, in link bytes per packet.
double bytes_per_packet(const WanEmulator& wan, const ForwarderStats& before) {
  const ForwarderStats after = wan.stats();
  return static_cast<double>(after.bytes_out - before.bytes_out) /
         static_cast<double>(std::max<std::uint64_t>(1, after.packets_out - before.packets_out));
}

TEST(WanEmulator, WithOffloadAStreamWithAWideWindowRunsAtTheLinkRateInSuperPackets) {
  LinkSettings link;
  link.delay_ms = 10;
  link.rate_mbit = 100;
  START_OR_SKIP(wan, offloaded(link));
  const std::vector<double> rtts = ping_ms(*wan, 0, 1, 5);
  const double fastest = *std::min_element(rtts.begin(), rtts.end());
  EXPECT_GE(fastest, 20.0);
  EXPECT_LT(fastest, 30.0);
  const ForwarderStats before = wan->stats();
  expect_stream_near_model(*wan, 4 << 20, 3s);
  const double size = bytes_per_packet(*wan, before);
  std::printf("offload: %.0f link bytes per forwarded packet\n", size);
  // The kernel sizes its super-packets to about 1 ms of the stream's pacing rate (12.5 kB at
  // 100 Mbit/s); without offload no packet exceeds the MTU.
  EXPECT_GT(size, 2.0 * 1500);
}

TEST(WanEmulator, WithOffloadAStreamWithANarrowWindowRunsAtWindowPerRoundTrip) {
  LinkSettings link;
  link.delay_ms = 75;
  link.rate_mbit = 1000;
  START_OR_SKIP(wan, offloaded(link));
  const ForwarderStats before = wan->stats();
  expect_stream_near_model(*wan, 1 << 20, 4s);
  EXPECT_GT(bytes_per_packet(*wan, before), 2.0 * 1500);
}

// A stream that could go faster than the link (autotuned buffers, the sender's tcp_wmem raised
// to 64 MiB inside its namespace so that it can keep 1 Gbit/s x 150 ms in flight) is held to
// the link's rate; what it reaches is printed: it shows whether this machine's forwarder
// carries a 1 Gbit/s, 150 ms link.
TEST(WanEmulator, AFastStreamIsHeldToTheLinkRate) {
  LinkSettings link;
  link.delay_ms = 75;
  link.rate_mbit = 1000;
  START_OR_SKIP(wan, config_of(2, link));
  std::string output;
  ASSERT_EQ(wan->run_in(0, "sysctl -qw net.ipv4.tcp_wmem='4096 16384 67108864'", output), 0)
      << output;
  const StreamResult r = tcp_stream(*wan, 0, 1, 0, 2s, 6s);
  const double payload_rate = link.rate_mbit * 1448 / 1500;
  const ForwarderStats stats = wan->stats();
  std::printf(
      "autotuned stream through 1000 Mbit/s, RTT 150 ms: %.1f Mbit/s after 2 s (%.2fx the "
      "link's payload rate), largest peer window %u bytes; the link's queue dropped %llu packets\n",
      r.mbit_per_s, r.mbit_per_s / payload_rate, r.peer_window,
      static_cast<unsigned long long>(stats.dropped_queue));
  EXPECT_EQ(r.bytes, r.bytes_sent);
  // The bucket lets through at most its depth (1 ms of the rate) above the rate.
  EXPECT_LE(r.mbit_per_s, 1.02 * payload_rate);
}

TEST(WanEmulator, AUdpBurstArrivesAtOneMinusTheLoss) {
  // From namespace 0: no loss to 1, 10% to 2, 30% to 3 (all 5 ms each way).
  WanConfig config = config_of(4);
  config.default_link.delay_ms = 5;
  config.links = {pair(0, 1, 5), pair(0, 2, 5), pair(0, 3, 5)};
  config.links[1].loss = 0.1;
  config.links[2].loss = 0.3;
  START_OR_SKIP(wan, config);
  const int count = 10000;
  std::uint64_t lost_before = 0;
  for (std::size_t to : {1, 2, 3}) {
    const double loss = wan->link(0, to).loss;
    const int arrived = udp_burst(*wan, 0, to, count);
    const ForwarderStats stats = wan->stats();
    std::printf("udp burst of %d at loss %.2f: %d arrived (%.4f), the emulator drew %llu lost\n",
                count, loss, arrived, static_cast<double>(arrived) / count,
                static_cast<unsigned long long>(stats.dropped_loss - lost_before));
    // sd of the arrivals at p = 0.3: sqrt(10000 * 0.21) = 46, so 0.02 is over four of them.
    EXPECT_NEAR(static_cast<double>(arrived) / count, 1 - loss, 0.02);
    // The datagrams that did not arrive are those the emulator drew lost (allowing 0.5% lost
    // elsewhere, at a receiving socket starved of CPU).
    const std::uint64_t lost = stats.dropped_loss - lost_before;
    EXPECT_LE(arrived + lost, static_cast<std::uint64_t>(count));
    EXPECT_GE(arrived + lost, static_cast<std::uint64_t>(count - count / 200));
    EXPECT_EQ(stats.dropped_queue, 0u);
    lost_before = stats.dropped_loss;
  }
}

// How fast the forwarder itself is, with no delay, rate or loss: one TCP stream (Mbit/s) and a
// flood of small datagrams (packets/s through the forwarder). Printed for the benches, which it
// bounds on this machine; asserted only to have carried what was sent.
TEST(WanEmulator, ForwarderCeilingIsMeasured) {
  START_OR_SKIP(wan, config_of(2));
  const StreamResult stream = tcp_stream(*wan, 0, 1, 0, 1s, 3s);
  EXPECT_EQ(stream.bytes, stream.bytes_sent);
  const ForwarderStats before = wan->stats();
  const auto start = std::chrono::steady_clock::now();
  const int arrived = udp_burst(*wan, 0, 1, 200000, 64, 1000);
  const double seconds = Seconds(std::chrono::steady_clock::now() - start).count() - 0.2;
  const ForwarderStats after = wan->stats();
  const double pps = static_cast<double>(after.packets_out - before.packets_out) / seconds;
  std::printf(
      "forwarder ceiling: one TCP stream %.0f Mbit/s (autotuned buffers); 64-byte datagrams "
      "%.0f packets/s forwarded (%d of 200000 arrived)\n",
      stream.mbit_per_s, pps, arrived);
  ::testing::Test::RecordProperty("tcp_stream_mbit", std::to_string(stream.mbit_per_s));
  ::testing::Test::RecordProperty("forwarded_packets_per_s", std::to_string(pps));
  EXPECT_GT(arrived, 0);
  EXPECT_GE(after.packets_out - before.packets_out, static_cast<std::uint64_t>(arrived));
}

TEST(WanEmulator, StoppingRemovesTheNamespacesItMade) {
  START_OR_SKIP(wan, config_of(3));
  std::vector<std::string> names;
  for (std::size_t i = 0; i < wan->size(); ++i) {
    names.push_back(wan->namespace_name(i));
    EXPECT_TRUE(namespace_exists(names.back()));
    std::string output;
    EXPECT_EQ(wan->run_in(i, "ip -4 -o addr show dev twan0", output), 0);
    EXPECT_NE(output.find(wan->address(i) + "/24"), std::string::npos) << output;
  }
  wan->stop();
  for (const std::string& name : names) EXPECT_FALSE(namespace_exists(name)) << name;
}

TEST(WanEmulator, TheTunDeviceQueuesEnoughForAForwarderOffTheCpu) {
  // With Linux's default of 500 packets a loaded machine dropped thousands of packets per 64 MiB
  // all-reduce at 1 Gbit/s before they reached the emulated link (wan_emulator.cpp).
  START_OR_SKIP(wan, config_of(2));
  for (std::size_t i = 0; i < wan->size(); ++i) {
    std::string output;
    EXPECT_EQ(wan->run_in(i, "ip link show dev twan0", output), 0);
    EXPECT_NE(output.find("qlen 20000"), std::string::npos) << output;
  }
}

TEST(WanEmulator, TheForwarderRunsAtRealTimePriority) {
  // Off the CPU, the forwarder idles its links and then bursts into their queues
  // (packet_forwarder.h); where the system refuses the priority, say so rather than fail.
  START_OR_SKIP(wan, config_of(2));
  if (!wan->stats().realtime) {
    GTEST_SKIP() << "the system refuses SCHED_FIFO to the forwarder (no CAP_SYS_NICE or no "
                    "real-time budget): its benches run at normal priority here";
  }
  std::string output;
  // One real-time priority per thread ("-" for normal ones): the forwarder is the only one.
  ASSERT_EQ(run_shell("ps -L -o rtprio= -p " + std::to_string(::getpid()), output), 0) << output;
  std::istringstream lines(output);
  std::string priority;
  int realtime_threads = 0;
  while (lines >> priority) {
    if (priority == "-") continue;
    EXPECT_EQ(priority, std::to_string(kForwarderPriority)) << output;
    ++realtime_threads;
  }
  EXPECT_EQ(realtime_threads, 1) << output;
}

TEST(WanEmulator, ExistingNamespacesAreUsedAndKept) {
  START_OR_SKIP(made, config_of(2));  // two namespaces to lend, and a check that we may
  WanConfig config;
  config.netns = {made->namespace_name(0), made->namespace_name(1)};
  config.tun_name = "twan1";
  config.subnet = "10.251.0.0";
  config.default_link.delay_ms = 5;
  const auto wan = WanEmulator::start(config);
  EXPECT_NEAR(median(ping_ms(*wan, 0, 1, 5)), 10, 1.0);
  wan->stop();
  EXPECT_TRUE(namespace_exists(config.netns[0]));
  std::string output;
  EXPECT_NE(made->run_in(0, "ip link show twan1", output), 0) << "the device outlived its stop";
}

// The binary: lists its namespaces, forwards, and on SIGTERM removes them and exits 0.
TEST(WanEmulatorBinary, RunsUntilSigtermThenCleansUp) {
  try {
    check_wan_privileges();
  } catch (const WanUnavailable& e) {
    GTEST_SKIP() << "WAN emulator unavailable: " << e.what();
  }
  const std::string prefix = "twanbin" + std::to_string(::getpid()) + "-";
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(out[1], 1);
    ::execl(TESSEL_WAN_EMULATOR_BINARY, TESSEL_WAN_EMULATOR_BINARY, "--namespaces", "2",
            "--name-prefix", prefix.c_str(), "--delay-ms", "3", nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  char buffer[256];
  while (text.find("ready\n") == std::string::npos && readable(out[0], 10000ms)) {
    const ssize_t got = ::read(out[0], buffer, sizeof buffer);
    if (got <= 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  EXPECT_NE(text.find("namespace 0 " + prefix + "0 10.250.0.1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("namespace 1 " + prefix + "1 10.250.0.2\n"), std::string::npos) << text;
  ASSERT_NE(text.find("ready\n"), std::string::npos) << text;
  EXPECT_TRUE(namespace_exists(prefix + "1"));
  std::string output;
  EXPECT_EQ(run_shell("ip netns exec " + prefix + "0 true", output), 0) << output;
  ::kill(child, SIGTERM);
  int status = 0;
  ::waitpid(child, &status, 0);
  while (readable(out[0], 1000ms)) {
    const ssize_t got = ::read(out[0], buffer, sizeof buffer);
    if (got <= 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(out[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_NE(text.find("stopped by signal 15"), std::string::npos) << text;
  EXPECT_FALSE(namespace_exists(prefix + "0"));
  EXPECT_FALSE(namespace_exists(prefix + "1"));
}

// Without CAP_NET_ADMIN (dropped from the bounding set, as a non-root user lacks it) the binary
// refuses with exit status 77 and names the capability.
TEST(WanEmulatorBinary, RefusesWithoutTheCapabilityAndNamesIt) {
  std::string output;
  if (run_shell("setpriv --version", output) != 0) GTEST_SKIP() << "no setpriv here: " << output;
  const int status = run_shell("setpriv --inh-caps=-net_admin --bounding-set=-net_admin " +
                                   std::string(TESSEL_WAN_EMULATOR_BINARY) + " --namespaces 2",
                               output);
  EXPECT_EQ(status, 77) << output;
  EXPECT_NE(output.find("cannot run here: the WAN emulator needs CAP_NET_ADMIN"), std::string::npos)
      << output;
}

}  // namespace
}  // namespace tessel::wan
