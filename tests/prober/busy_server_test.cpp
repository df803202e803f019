// One probe session at a time, and a busy server says so at once: a client that connects while
// another peer's session is in progress gets ProbeBusy (not the timeout it got while it sat in
// the backlog), is served once that session ends; probes back to back never find the server
// busy with the one before; the server still stops promptly.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/prober/probe_handshake.h"
#include "tests/prober/prober_test_support.h"

namespace tessel::prober {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kSecret = "tessel-probe-busy-test-secret-0123";

std::unique_ptr<ProbeServer> start_server() {
  // The held session outlives any slow test machine.
  return start_probe_server(kSecret, 60'000ms);
}

ProbeOptions quick_options() {
  ProbeOptions options = probe_options_with(kSecret);
  options.round_trips = 20;
  options.check_round_trips = 5;
  options.small_messages = 4;
  options.bulk_message_bytes = 1024 * 1024;
  options.bulk_duration = 100ms;
  // Were the second client left in the backlog, it would fail at this timeout: a ProbeError
  // that is not ProbeBusy.
  options.io_timeout = 5000ms;
  return options;
}

// Another peer's session, authenticated and held open until the test says bye.
ProbeChannel hold_session(const ProbeServer& server) {
  ProbeChannel channel = loopback_channel(server.port(), "holder");
  authenticate_to_server(channel, kSecret, "gpu-node-3");
  return channel;
}

// The error `action` throws: its type and message.
struct Thrown {
  bool busy = false;
  std::string what = "(no error)";
};

Thrown thrown_by(const std::function<void()>& action) {
  try {
    action();
  } catch (const ProbeBusy& e) {
    return {true, e.what()};
  } catch (const ProbeError& e) {
    return {false, e.what()};
  }
  return {};
}

TEST(ProbeServerBusy, ASecondClientDuringASessionIsToldBusyThenServedWhenItEnds) {
  auto server = start_server();
  ProbeChannel holder = hold_session(*server);
  const ProbePeer peer = loopback_peer(server->port());
  const std::string who = loopback_peer_text(peer.port);

  const Thrown full = thrown_by([&] { measure_peer(peer, quick_options()); });
  EXPECT_TRUE(full.busy) << full.what;
  EXPECT_EQ(full.what, who + ": authentication: busy: measuring another peer's link");
  const Thrown check = thrown_by([&] { measure_round_trips(peer, quick_options()); });
  EXPECT_TRUE(check.busy) << check.what;
  EXPECT_EQ(check.what, who + ": authentication: busy: measuring another peer's link");
  EXPECT_EQ(server->busy_refusals(), 2u);
  EXPECT_TRUE(server->recent_errors().empty()) << server->recent_errors().front();

  // The held session was not disturbed: it still measures, then ends.
  std::vector<std::byte> ping(kPingPayloadBytes, std::byte{7}), pong;
  holder.send(FrameType::kPing, ping);
  holder.receive_expected(FrameType::kPong, pong, kPingPayloadBytes);
  EXPECT_EQ(pong, ping);
  holder.send(FrameType::kBye);
  ASSERT_TRUE(eventually([&] { return server->sessions_completed() == 1; }))
      << "the held session never completed";

  // The server is free again: the next client is served.
  const ProbeResult result = measure_peer(peer, quick_options());
  EXPECT_GT(result.measurement.bulk_gbps, 0);
  // A probe returns once the server has ended its session (counted it and freed itself).
  EXPECT_EQ(server->sessions_completed(), 2u);
  EXPECT_EQ(server->busy_refusals(), 2u);
  EXPECT_TRUE(server->recent_errors().empty()) << server->recent_errors().front();
}

TEST(ProbeServerBusy, ProbesBackToBackNeverFindThePeerBusyWithThePreviousOne) {
  auto server = start_server();
  const ProbePeer peer = loopback_peer(server->port());
  for (size_t i = 1; i <= 20; ++i) {
    SCOPED_TRACE(i);
    const Thrown error = thrown_by([&] {
      if (i % 5 == 0) {
        measure_peer(peer, quick_options());
      } else {
        measure_round_trips(peer, quick_options());
      }
    });
    ASSERT_EQ(error.what, "(no error)");
    EXPECT_EQ(server->sessions_completed(), i);
  }
  EXPECT_EQ(server->busy_refusals(), 0u);
}

TEST(ProbeServerBusy, ASessionThatFailsFreesTheServerAndIsKeptAsAnError) {
  auto server = start_server();
  {
    ProbeChannel holder = hold_session(*server);
    EXPECT_TRUE(thrown_by([&] {
                  measure_round_trips(loopback_peer(server->port()), quick_options());
                }).busy);
  }  // the holder hangs up without a bye: a failed session, not a completed one
  ASSERT_TRUE(eventually([&] { return !server->recent_errors().empty(); }));
  EXPECT_NE(server->recent_errors().front().find("connection closed"), std::string::npos)
      << server->recent_errors().front();
  // Freed: a check is served (the slot may take a moment to free after the error is kept).
  ASSERT_TRUE(eventually([&] {
    return !thrown_by([&] {
              measure_round_trips(loopback_peer(server->port()), quick_options());
            }).busy;
  }));
  EXPECT_TRUE(eventually([&] { return server->sessions_completed() == 1; }));
  EXPECT_EQ(server->recent_errors().size(), 1u);
}

TEST(ProbeServerBusy, ARefusedClientThatNeverHangsUpDoesNotHoldUpStop) {
  auto server = start_server();
  ProbeChannel holder = hold_session(*server);
  // A client that reads the refusal but keeps its end open: the server lingers for it.
  ProbeChannel lingering = loopback_channel(server->port(), "lingering");
  std::vector<std::byte> payload;
  try {
    lingering.receive(payload);
    ADD_FAILURE() << "no refusal";
  } catch (const ProbeRefused& e) {
    EXPECT_EQ(e.reason(), kBusyRefusal);
  }
  server->stop();  // returns (a hang here fails the test by its timeout)
  // The held session was cut: its peer sees the connection close.
  EXPECT_FALSE(thrown_by([&] {
                 holder.send(FrameType::kPing, std::vector<std::byte>(kPingPayloadBytes));
                 holder.receive(payload);
               }).busy);
  EXPECT_EQ(server->sessions_completed(), 0u);
}

TEST(ProbeServerBusy, OtherRefusalsAreNotBusy) {
  // A server that refuses every hello with another reason.
  auto listener = transport::TcpListener::bind("127.0.0.1", 0);
  const uint16_t port = listener.port();
  std::thread fake([&] {
    transport::UniqueFd fd = transport::accept_until(listener, Clock::now() + kTestTimeout);
    if (!fd.valid()) return;
    ProbeChannel channel(std::move(fd), "fake server", 5000ms);
    std::vector<std::byte> hello;
    channel.receive(hello);
    const std::string why = "busy elsewhere";  // not the busy refusal, though it starts alike
    channel.send(FrameType::kRefused, std::as_bytes(std::span(why.data(), why.size())));
    try {
      channel.receive(hello);  // until the client hangs up
    } catch (const ProbeError&) {
    }
  });
  const Thrown refused =
      thrown_by([&] { measure_peer(loopback_peer(port, "gpu-node-9"), quick_options()); });
  fake.join();
  EXPECT_FALSE(refused.busy) << refused.what;
  EXPECT_EQ(refused.what,
            loopback_peer_text(port, "gpu-node-9") + ": authentication: refused: busy elsewhere");
}

}  // namespace
}  // namespace tessel::prober
