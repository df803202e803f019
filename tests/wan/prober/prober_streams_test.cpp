// The prober's bulk phase over the WAN emulator (issue 20), where the kernel's TCP sees a real
// 150 ms round trip at 1 Gbit/s: one stream moves about its window per round trip, a small part
// of the link; the streams the prober chooses for the link (the transport's rule,
// stream_plan.h) measure the link itself, which is what the planner prices and what the
// transport's streams reach. Needs root, /dev/net/tun and `ip`: elsewhere it skips, naming what
// is missing. Timing-bound by the emulated link only (bulk phases of 50 round trips).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "noderuntime/prober/probe_client.h"
#include "noderuntime/prober/probe_server.h"
#include "noderuntime/transport/stream_plan.h"
#include "tests/support/wan/wan_emulator.h"

namespace tessel::prober {
namespace {

using namespace std::chrono_literals;

const std::string kSecret = "tessel-wan-prober-secret-0123456";

TEST(WanProber, StreamsChosenForALongFatLinkMeasureTheLinkNotOneWindow) {
  wan::WanConfig config;
  config.namespaces = 2;
  config.default_link.delay_ms = 75;
  config.default_link.rate_mbit = 1000;
  config.offload = true;
  std::unique_ptr<wan::WanEmulator> emulator;
  try {
    emulator = wan::WanEmulator::start(config);
  } catch (const wan::WanUnavailable& e) {
    GTEST_SKIP() << "WAN emulator unavailable: " << e.what();
  }
  std::optional<transport::TcpListener> listener;
  emulator->call_in(1, [&] { listener.emplace(transport::TcpListener::bind(emulator->address(1), 0)); });
  ProbeServerOptions server_options;
  server_options.secret = kSecret;
  server_options.io_timeout = 30s;
  ProbeServer server(std::move(*listener), server_options);

  ProbeOptions options;
  options.secret = kSecret;
  options.self_name = "member-a/gpu-node-1";
  options.round_trips = 10;
  options.small_messages = 2;
  options.bulk_message_bytes = 1 << 20;
  options.bulk_round_trips = 50;  // 7.5 s, of which the second half is counted
  options.link_capacity_gbps = 1;
  options.max_bytes = 4ull << 30;
  options.io_timeout = 30s;
  std::optional<ProbeResult> result;
  emulator->call_in(0, [&] {
    result = measure_peer({"member-b/gpu-node-2", emulator->address(1), server.port()}, options);
  });
  const api::LinkMeasurement& m = result->measurement;
  const double rtt_s = m.rtt_p50_ms / 1e3;
  const transport::StreamPlan plan = transport::plan_link_streams(
      1e9 / 8, rtt_s, 0, transport::read_socket_buffer_limits());
  std::printf(
      "150 ms, 1 Gbit/s: rtt %.1f ms; one stream %.3f Gbit/s (a window of %.2f MB per round "
      "trip); %d streams %.3f Gbit/s (%.0f%% of the link, %.1fx one stream); %.0f MB sent\n",
      m.rtt_p50_ms, m.stream_gbps, m.stream_gbps * 1e9 / 8 * rtt_s / 1e6, m.streams, m.bulk_gbps,
      100 * m.bulk_gbps, m.bulk_gbps / m.stream_gbps, result->bytes_sent / 1e6);
  EXPECT_NEAR(m.rtt_p50_ms, 150, 5);
  EXPECT_GT(plan.streams, 1) << describe(plan);
  EXPECT_EQ(m.streams, plan.streams) << describe(plan);
  // One stream is bound by its window: well under the link.
  EXPECT_LT(m.stream_gbps, 0.5);
  // The streams fill the link.
  EXPECT_GE(m.bulk_gbps, 0.8);
  EXPECT_LE(m.bulk_gbps, 1.0);
  EXPECT_EQ(server.joins_completed(), static_cast<size_t>(m.streams));
  EXPECT_TRUE(server.recent_errors().empty()) << server.recent_errors().front();
}

}  // namespace
}  // namespace tessel::prober
