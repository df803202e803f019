// measure_round_trips against a real ProbeServer on loopback: one authenticated session of pings
// only, RTT fields set, no throughput, its bytes counted and bounded by round_trip_probe_bytes;
// a wrong secret and an absent peer are named.
#include <gtest/gtest.h>

#include "tests/prober/prober_test_support.h"

namespace tessel::prober {
namespace {

using namespace std::chrono_literals;

const std::string kSecret = "tessel-round-trip-test-secret-0123";

ProbeOptions check_options() {
  ProbeOptions options = probe_options_with(kSecret);
  options.check_round_trips = 40;
  return options;
}

TEST(ProbeRoundTrips, PingsOnlyInOneSession) {
  auto server = start_probe_server(kSecret);
  const ProbeOptions options = check_options();
  const ProbeResult result = measure_round_trips(loopback_peer(server->port()), options);
  const api::LinkMeasurement& m = result.measurement;
  EXPECT_GT(m.rtt_p50_ms, 0);
  EXPECT_GE(m.rtt_p90_ms, m.rtt_p50_ms);  // no bound on loopback's speed on a loaded machine
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
  eventually([&] { return server->sessions_completed() != 0; });
  EXPECT_EQ(server->sessions_completed(), 1u);
  EXPECT_TRUE(server->recent_errors().empty());
}

TEST(ProbeRoundTrips, EmulatedLatencyIsMeasured) {
  auto server = start_probe_server(kSecret);
  ProbeOptions options = check_options();
  options.check_round_trips = 10;
  options.emulated_link.latency_s = 0.005;  // each ping is delayed 5 ms on its way out
  const ProbeResult result = measure_round_trips(loopback_peer(server->port()), options);
  EXPECT_GE(result.measurement.rtt_p50_ms, 5);
}

TEST(ProbeRoundTrips, AWrongSecretAndAnAbsentPeerAreNamed) {
  auto server = start_probe_server("another-secret-entirely-0123456789");
  const std::string wrong =
      error_of([&] { measure_round_trips(loopback_peer(server->port()), check_options()); });
  EXPECT_NE(wrong.find(loopback_peer_text(server->port()) + ": authentication: "),
            std::string::npos)
      << wrong;
  const uint16_t port = server->port();
  server.reset();
  ProbeOptions options = check_options();
  options.connect_timeout = 2000ms;
  const std::string absent =
      error_of([&] { measure_round_trips(loopback_peer(port, "gpu-node-gone"), options); });
  EXPECT_NE(absent.find(loopback_peer_text(port, "gpu-node-gone") + ": connect: "),
            std::string::npos)
      << absent;
}

}  // namespace
}  // namespace tessel::prober
