// The bulk phase over several TCP streams (protocol version 2), on loopback: connections join the
// session by its ticket and are served beside it, the measurement reports the streams and the
// one-stream rate and stays within its byte budget; a connection with another ticket, one beyond
// the joins offered and one whose session has ended are refused; probers of protocol versions 1
// and 2 measure each other over one stream. How many streams fill a long fat link, and what they
// reach there, is tests/wan/prober's (the WAN emulator).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/prober/probe_handshake.h"
#include "noderuntime/transport/stream_plan.h"
#include "tests/prober/prober_test_support.h"

namespace tessel::prober {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kSecret = "tessel-probe-streams-secret-0123";

ProbeOptions quick_options() { return short_probe_options(kSecret, 20, 4, 200ms); }

std::unique_ptr<ProbeServer> start_server(int max_joins = ProbeServerOptions{}.max_joins) {
  ProbeServerOptions options;
  options.secret = kSecret;
  options.io_timeout = 60'000ms;  // a held session outlives any slow test machine
  options.max_joins = max_joins;
  return std::make_unique<ProbeServer>(transport::TcpListener::bind("127.0.0.1", 0), options);
}

// A session opened by hand (the offer tells its ticket), held until the test says bye.
struct HeldSession {
  ProbeChannel channel;
  SessionOffer offer;
};
HeldSession hold_session(const ProbeServer& server, const HelloOptions& hello = {}) {
  ProbeChannel channel = loopback_channel(server.port(), "holder");
  const SessionOffer offer = authenticate_to_server(channel, kSecret, "gpu-node-3", hello);
  return {std::move(channel), offer};
}

// A connection joining the session of `ticket`: its offer, or the error it got.
std::string join_error(const ProbeServer& server, const SessionTicket& ticket) {
  return error_of([&] {
    ProbeChannel channel = loopback_channel(server.port(), "joiner");
    authenticate_to_server(channel, kSecret, "gpu-node-3", {kProtocolVersion, ticket});
  });
}

void ping(ProbeChannel& channel) {
  std::vector<std::byte> ping(kPingPayloadBytes, std::byte{7}), pong;
  channel.send(FrameType::kPing, ping);
  channel.receive_expected(FrameType::kPong, pong, kPingPayloadBytes);
  EXPECT_EQ(pong, ping);
}

TEST(ProbeBulkStreams, JoinedConnectionsCarryTheBulkPhaseAndAreCounted) {
  auto server = start_server();
  ProbeOptions options = quick_options();
  options.bulk_streams = 4;
  const ProbeResult result = measure_peer(loopback_peer(server->port()), options);
  const api::LinkMeasurement& m = result.measurement;
  EXPECT_EQ(m.streams, 4);
  EXPECT_GT(m.stream_gbps, 0);
  EXPECT_GT(m.bulk_gbps, 0);
  EXPECT_LE(result.bytes_sent, options.max_bytes);
  // The joined connections sent their handshakes and data besides the session's own.
  EXPECT_GT(result.bytes_sent, fixed_probe_bytes(options) + 4 * options.bulk_message_bytes);
  EXPECT_EQ(server->sessions_completed(), 1u);
  EXPECT_EQ(server->joins_completed(), 4u);
  EXPECT_EQ(server->busy_refusals(), 0u);
  EXPECT_TRUE(server->recent_errors().empty()) << server->recent_errors().front();

  // It fits the annotation, streams and all.
  api::NodeLinks links;
  links.peers["gpu-node-2"] = m;
  const api::NodeLinks parsed = api::parse_node_links(api::format_node_links(links), "gpu-node-1");
  EXPECT_EQ(parsed.peers.at("gpu-node-2").streams, 4);
  EXPECT_EQ(parsed.peers.at("gpu-node-2").stream_gbps, api::significant(m.stream_gbps));
}

TEST(ProbeBulkStreams, TheStreamsStayWithinTheByteBudget) {
  auto server = start_server();
  ProbeOptions options = quick_options();
  options.bulk_streams = 4;
  options.bulk_duration = 60'000ms;  // the budget, not the duration, ends both bulk phases
  const uint64_t message = kFrameHeaderBytes + options.bulk_message_bytes;
  options.max_bytes = fixed_probe_bytes(options) + 20 * message;
  const ProbeResult result = measure_peer(loopback_peer(server->port()), options);
  EXPECT_EQ(result.measurement.streams, 4);
  EXPECT_LE(result.bytes_sent, options.max_bytes);
  EXPECT_EQ(server->joins_completed(), 4u);
}

TEST(ProbeBulkStreams, ABudgetTooSmallForEveryStreamTakesFewer) {
  ProbeOptions options = quick_options();
  options.bulk_streams = 8;
  const uint64_t message = kFrameHeaderBytes + options.bulk_message_bytes;
  // The one-stream phase and each joined stream need one message and a handshake's bytes.
  EXPECT_EQ(plan_bulk_streams(options, 1.0, 16, 100 * message).streams, 8);
  // A joined stream's handshake, sync and bye take well under 16 KiB.
  EXPECT_EQ(plan_bulk_streams(options, 1.0, 16, 4 * message + 16 * 1024).streams, 3);
  EXPECT_EQ(plan_bulk_streams(options, 1.0, 16, 4 * message).streams, 2);
  EXPECT_EQ(plan_bulk_streams(options, 1.0, 16, message).streams, 1);
  EXPECT_EQ(plan_bulk_streams(options, 1.0, 5, 100 * message).streams, 5);  // what the peer offers
  EXPECT_EQ(plan_bulk_streams(options, 1.0, 0, 100 * message).streams, 1);  // a version 1 peer
  options.emulated_link.bytes_per_s = 1e6;  // each connection would be shaped by itself
  EXPECT_EQ(plan_bulk_streams(options, 1.0, 16, 100 * message).streams, 1);
}

TEST(ProbeBulkStreams, ChosenStreamsFollowTheTransportsRuleForTheRoundTrip) {
  ProbeOptions options = quick_options();
  const uint64_t budget = 1ull << 40;
  options.link_capacity_gbps = 10;
  // 10 Gbit/s x 0.1 ms = 125 kB: one stream fills it.
  EXPECT_EQ(plan_bulk_streams(options, 0.1, 16, budget).streams, 1);
  const transport::SocketBufferLimits limits = transport::read_socket_buffer_limits();
  for (double rtt_ms : {20.0, 150.0}) {
    for (double gbps : {1.0, 10.0}) {
      options.link_capacity_gbps = gbps;
      const transport::StreamPlan plan = plan_bulk_streams(options, rtt_ms, 16, budget);
      const transport::StreamPlan expected =
          transport::plan_link_streams(gbps * 1e9 / 8, rtt_ms / 1e3, 0, limits);
      EXPECT_EQ(plan.streams, expected.streams) << rtt_ms << " ms, " << gbps << " Gbit/s";
      EXPECT_EQ(plan.buffer_bytes, expected.buffer_bytes) << rtt_ms << " ms, " << gbps << " Gbit/s";
      // A version 1 peer: one stream, with the buffers the transport gives one stream.
      EXPECT_EQ(plan_bulk_streams(options, rtt_ms, 0, budget).buffer_bytes,
                transport::plan_link_streams(gbps * 1e9 / 8, rtt_ms / 1e3, 1, limits).buffer_bytes);
    }
  }
}

TEST(ProbeBulkStreams, TheBulkPhaseLastsItsRoundTrips) {
  ProbeOptions options = quick_options();
  options.bulk_duration = 1000ms;
  options.bulk_round_trips = 20;
  EXPECT_EQ(bulk_duration_for(options, 0.2), 1000ms);
  EXPECT_EQ(bulk_duration_for(options, 150), 3000ms);
  EXPECT_EQ(bulk_duration_for(options, 1e6), kMaxBulkDuration);
}

TEST(ProbeBulkStreams, OnlyTheSessionsTicketJoinsAndOnlyAsManyAsOffered) {
  auto server = start_server(2);
  HeldSession held = hold_session(*server);
  EXPECT_EQ(held.offer.version, kProtocolVersion);
  EXPECT_EQ(held.offer.joins, 2);
  const std::string who = "joiner: ";

  SessionTicket other = held.offer.ticket;
  other[0] ^= std::byte{1};
  EXPECT_EQ(join_error(*server, other), who + "busy: measuring another peer's link");

  std::vector<ProbeChannel> joined;
  for (int k = 0; k < 2; ++k) {
    ProbeChannel channel = loopback_channel(server->port(), "joiner");
    const SessionOffer offer = authenticate_to_server(channel, kSecret, "gpu-node-3",
                                                      {kProtocolVersion, held.offer.ticket});
    EXPECT_EQ(offer.ticket, held.offer.ticket);
    EXPECT_EQ(offer.joins, 0);
    joined.push_back(std::move(channel));
  }
  EXPECT_EQ(join_error(*server, held.offer.ticket), who + "busy: measuring another peer's link");
  EXPECT_EQ(server->busy_refusals(), 2u);
  for (ProbeChannel& channel : joined) ping(channel);
  ping(held.channel);

  // The session's end cuts the joined connections still open: their next read fails.
  held.channel.send(FrameType::kBye);
  ASSERT_TRUE(eventually([&] { return server->sessions_completed() == 1; }));
  for (ProbeChannel& channel : joined) {
    EXPECT_NE(error_of([&] { ping(channel); }), "(no error)");
  }
  EXPECT_EQ(server->joins_completed(), 0u);
  EXPECT_TRUE(server->recent_errors().empty()) << server->recent_errors().front();

  // Its ticket joins nothing once it has ended.
  EXPECT_EQ(join_error(*server, held.offer.ticket),
            who + "refused: no session to join: the session it joins has ended");
}

TEST(ProbeBulkStreams, AServerOfferingNoJoinsRefusesThemAsBusy) {
  auto server = start_server(0);
  HeldSession held = hold_session(*server);
  EXPECT_EQ(held.offer.joins, 0);
  EXPECT_EQ(join_error(*server, held.offer.ticket), "joiner: busy: measuring another peer's link");
  // And a probe that asks for streams measures one.
  held.channel.send(FrameType::kBye);
  ASSERT_TRUE(eventually([&] { return server->sessions_completed() == 1; }));
  ProbeOptions options = quick_options();
  options.bulk_streams = 4;
  EXPECT_EQ(measure_peer(loopback_peer(server->port()), options).measurement.streams, 1);
}

TEST(ProbeVersions, AVersionOneClientIsServedOverOneConnection) {
  auto server = start_server();
  HeldSession held = hold_session(*server, {kOldestProtocolVersion, {}});
  EXPECT_EQ(held.offer.version, kOldestProtocolVersion);
  EXPECT_EQ(held.offer.joins, 0);
  ping(held.channel);
  // No ticket was handed out: nothing joins a version 1 session.
  EXPECT_EQ(join_error(*server, SessionTicket{std::byte{1}}),
            "joiner: busy: measuring another peer's link");
  held.channel.send(FrameType::kBye);
  EXPECT_TRUE(eventually([&] { return server->sessions_completed() == 1; }));
}

// A prober of protocol version 1, as it was released: one session at a time, version 1 only,
// an empty accepted frame.
class VersionOneServer {
 public:
  VersionOneServer() : listener_(transport::TcpListener::bind("127.0.0.1", 0)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~VersionOneServer() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return listener_.port(); }
  int connections() const { return connections_.load(); }
  int completed() const { return completed_.load(); }

 private:
  void serve() {
    while (!stop_.load()) {
      transport::UniqueFd fd = transport::accept_until(listener_, Clock::now() + 100ms);
      if (!fd.valid()) continue;
      ++connections_;
      ProbeChannel channel(std::move(fd), "v1 server's client", 5000ms);
      try {
        const ProbeHello hello = read_hello(channel);
        if (hello.version != 1) {
          const std::string why = "protocol version " + std::to_string(hello.version) +
                                  " is not supported (this prober speaks 1)";
          channel.send(FrameType::kRefused, std::as_bytes(std::span(why.data(), why.size())));
          continue;
        }
        authenticate_client(channel, kSecret, hello, SessionOffer{});
        serve_probe_frames(channel, 1, Clock::now() + 60s, 60'000ms, stop_);
        ++completed_;
      } catch (const ProbeError&) {
      }
    }
  }

  transport::TcpListener listener_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0}, completed_{0};
  std::thread thread_;
};

TEST(ProbeVersions, AVersionTwoClientMeasuresAVersionOneProberOverOneStream) {
  VersionOneServer server;
  ProbeOptions options = quick_options();
  options.bulk_streams = 4;
  const ProbeResult result = measure_peer(loopback_peer(server.port()), options);
  EXPECT_EQ(result.measurement.streams, 1);
  EXPECT_EQ(result.measurement.stream_gbps, 0);
  EXPECT_GT(result.measurement.bulk_gbps, 0);
  EXPECT_EQ(server.connections(), 2);  // refused at version 2, measured at version 1
  EXPECT_EQ(server.completed(), 1);
  // A check too.
  measure_round_trips(loopback_peer(server.port()), options);
  EXPECT_EQ(server.connections(), 4);
  EXPECT_EQ(server.completed(), 2);
}

}  // namespace
}  // namespace tessel::prober
