// The transport over the WAN emulator (issue 20), where the kernel's TCP sees a real 150 ms
// round trip: the connecting rank measures it while connecting, chooses the streams that fill
// a 1 Gbit/s link within the socket buffer limit (the same rule as the planner's,
// placement/tcp_link_rate.h), tells the other end, sizes both ends' buffers and says so; data
// striped over those streams arrives intact. Functional only: the throughput is measured by
// bench/transport/wan_transport_bench, not asserted here. Needs root, /dev/net/tun and `ip`:
// elsewhere every case skips, naming what is missing.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/transport/stream_plan.h"
#include "noderuntime/transport/tcp_communicator.h"
#include "tests/support/wan/network_namespace.h"
#include "tests/support/wan/wan_emulator.h"

namespace tessel::transport {
namespace {

constexpr double kLinkBytesPerS = 1e9 / 8;

TEST(WanTransport, ALongFatLinkGetsTheStreamsItsMeasuredRoundTripNeeds) {
  wan::WanConfig config;
  config.namespaces = 2;
  config.default_link.delay_ms = 75;
  config.default_link.rate_mbit = 1000;
  std::unique_ptr<wan::WanEmulator> emulator;
  try {
    emulator = wan::WanEmulator::start(config);
  } catch (const wan::WanUnavailable& e) {
    GTEST_SKIP() << "WAN emulator unavailable: " << e.what();
  }
  std::vector<TcpListener> listeners;
  std::vector<PeerAddress> peers;
  for (int r = 0; r < 2; ++r) {
    emulator->call_in(r, [&] { listeners.push_back(TcpListener::bind(emulator->address(r), 0)); });
    peers.push_back({emulator->address(r), listeners.back().port(), "ns " + std::to_string(r)});
  }
  std::mutex mu;
  std::vector<std::string> lines;
  std::vector<int> streams(2);
  std::vector<std::string> errors(2);
  const size_t count = 8 << 20;  // 32 MiB of f32
  std::vector<std::vector<float>> data(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        emulator->call_in(r, [&] {
          TcpOptions options;
          options.job_id = 20;
          options.rank = r;
          options.peers = peers;
          options.link_capacity = {kLinkBytesPerS, kLinkBytesPerS};
          options.io_timeout = std::chrono::seconds(60);
          // Lines about the streams only (a one-stream plan would otherwise log this note).
          options.slow_start_after_idle = false;
          options.log = [&](const std::string& line) {
            std::lock_guard lock(mu);
            lines.push_back(line);
          };
          TcpCommunicator comm(options, listeners[r]);
          streams[r] = comm.streams_to(1 - r);
          data[r].assign(count, static_cast<float>(r + 1));
          comm.all_reduce(data[r].data(), count, DType::kF32, {0, 1});
        });
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(errors, std::vector<std::string>(2)) << errors[0] << "\n" << errors[1];

  // Rank 1 connected: its plan comes from the RTT it measured, 150 ms plus the forwarder's
  // wake-ups; the same count for anything up to 160 ms, or the check names the spread.
  const SocketBufferLimits limits = read_socket_buffer_limits();
  const int low = plan_link_streams(kLinkBytesPerS, 0.150, 0, limits).streams;
  const int high = plan_link_streams(kLinkBytesPerS, 0.160, 0, limits).streams;
  EXPECT_GE(streams[1], low);
  EXPECT_LE(streams[1], high);
  EXPECT_EQ(streams[0], streams[1]);  // told in the hello
  if (static_cast<double>(std::min(limits.wmem_max, limits.rmem_max)) < kLinkBytesPerS * 0.150) {
    EXPECT_GT(streams[1], 1) << "one window does not cover the BDP, yet one stream";
  }
  ASSERT_EQ(lines.size(), streams[1] > 1 ? 2u : 0u);
  for (const std::string& line : lines) {
    if (line.find("rank 1: link to rank 0") == std::string::npos) continue;
    EXPECT_NE(line.find("measured RTT 15"), std::string::npos) << line;
    EXPECT_NE(line.find(std::to_string(streams[1]) + " streams"), std::string::npos) << line;
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(data[r], std::vector<float>(count, 3.f)) << "rank " << r;
  }
}

}  // namespace
}  // namespace tessel::transport
