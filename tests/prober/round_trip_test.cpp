// measure_round_trips against a real ProbeServer on loopback: one authenticated session of pings
// only, RTT fields set, no throughput, its bytes counted and bounded by round_trip_probe_bytes;
// a wrong secret and an absent peer are named.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "noderuntime/prober/probe_channel.h"
#include "noderuntime/prober/probe_client.h"
#include "noderuntime/prober/probe_error.h"
#include "noderuntime/prober/probe_server.h"
#include "noderuntime/transport/socket.h"

namespace tessel::prober {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kSecret = "tessel-round-trip-test-secret-0123";

std::unique_ptr<ProbeServer> start_server(const std::string& secret = kSecret) {
  ProbeServerOptions options;
  options.secret = secret;
  return std::make_unique<ProbeServer>(transport::TcpListener::bind("127.0.0.1", 0), options);
}

ProbeOptions check_options() {
  ProbeOptions options;
  options.secret = kSecret;
  options.self_name = "gpu-node-1";
  options.check_round_trips = 40;
  return options;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const ProbeError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProbeRoundTrips, PingsOnlyInOneSession) {
  auto server = start_server();
  const ProbeOptions options = check_options();
  const ProbeResult result =
      measure_round_trips({"gpu-node-2", "127.0.0.1", server->port()}, options);
  const api::LinkMeasurement& m = result.measurement;
  EXPECT_GT(m.rtt_p50_ms, 0);
  EXPECT_GE(m.rtt_p90_ms, m.rtt_p50_ms);
  EXPECT_LT(m.rtt_p50_ms, 100);
  EXPECT_EQ(m.small_gbps, 0);
  EXPECT_EQ(m.bulk_gbps, 0);
  EXPECT_EQ(m.measured_at.size(), 20u);
  // The pings (header + 8 bytes each) and the handshake, at most round_trip_probe_bytes (the
  // hello's name is short here).
  const uint64_t pings = options.check_round_trips * (kFrameHeaderBytes + kPingPayloadBytes);
  EXPECT_GT(result.bytes_sent, pings);
  EXPECT_LE(result.bytes_sent, round_trip_probe_bytes(options));
  EXPECT_LT(round_trip_probe_bytes(options), 8 * 1024u);
  EXPECT_LT(round_trip_probe_bytes(options), fixed_probe_bytes(options));
  const auto give_up = Clock::now() + 30s;
  while (server->sessions_completed() == 0 && Clock::now() < give_up) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(server->sessions_completed(), 1u);
  EXPECT_TRUE(server->recent_errors().empty());
}

TEST(ProbeRoundTrips, EmulatedLatencyIsMeasured) {
  auto server = start_server();
  ProbeOptions options = check_options();
  options.check_round_trips = 10;
  options.emulated_link.latency_s = 0.005;  // each ping is delayed 5 ms on its way out
  const ProbeResult result =
      measure_round_trips({"gpu-node-2", "127.0.0.1", server->port()}, options);
  EXPECT_GE(result.measurement.rtt_p50_ms, 5);
}

TEST(ProbeRoundTrips, AWrongSecretAndAnAbsentPeerAreNamed) {
  auto server = start_server("another-secret-entirely-0123456789");
  const std::string wrong = error_of([&] {
    measure_round_trips({"gpu-node-2", "127.0.0.1", server->port()}, check_options());
  });
  EXPECT_NE(wrong.find("prober peer gpu-node-2 (127.0.0.1:" + std::to_string(server->port()) +
                       "): authentication: "),
            std::string::npos)
      << wrong;
  const uint16_t port = server->port();
  server.reset();
  ProbeOptions options = check_options();
  options.connect_timeout = 2000ms;
  const std::string absent = error_of([&] {
    measure_round_trips({"gpu-node-gone", "127.0.0.1", port}, options);
  });
  EXPECT_NE(
      absent.find("prober peer gpu-node-gone (127.0.0.1:" + std::to_string(port) + "): connect: "),
      std::string::npos)
      << absent;
}

}  // namespace
}  // namespace tessel::prober
