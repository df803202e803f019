// The prober's measuring core on loopback: the measurement is sane and fits the annotation,
// options are checked, strangers and wrong secrets are refused before any measurement, hostile
// frames are refused by name, and a peer that vanishes or goes silent gives an error naming it.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "api/link_annotations.h"
#include "noderuntime/prober/probe_auth.h"
#include "tests/prober/prober_test_support.h"

namespace tessel::prober {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kSecret = "tessel-probe-test-secret-0123456789";

ProbeOptions quick_options() { return short_probe_options(kSecret, 50, 8, 200ms); }

// The server's first recorded session error, waiting for it (generous timeout).
std::string first_server_error(const ProbeServer& server) {
  const auto give_up = Clock::now() + 30s;
  while (Clock::now() < give_up) {
    const auto errors = server.recent_errors();
    if (!errors.empty()) return errors.front();
    std::this_thread::sleep_for(10ms);
  }
  return "(no server error)";
}

void send_raw(const ProbeChannel& channel, std::span<const std::byte> bytes) {
  transport::send_all(channel.fd(), bytes, Clock::now() + 5s);
}

TEST(ProbeFrame, HeaderRoundTripsAndBoundsEveryType) {
  const auto bytes = encode_frame_header({FrameType::kData, 4096});
  const FrameHeader header = decode_frame_header(bytes);
  EXPECT_EQ(header.type, FrameType::kData);
  EXPECT_EQ(header.length, 4096u);
  auto oversize = encode_frame_header({FrameType::kPing, 9});
  EXPECT_NE(error_of([&] {
              decode_frame_header(oversize);
            }).find("a ping frame of 9 bytes exceeds its limit of 8 bytes"),
            std::string::npos);
}

TEST(ProbeAuth, ProofsDependOnSecretRoleAndNonces) {
  const Nonce a = random_nonce(), b = random_nonce();
  EXPECT_NE(a, b);
  const Mac proof = probe_proof(kSecret, ProofRole::kClient, a, b);
  EXPECT_TRUE(proofs_equal(proof, probe_proof(kSecret, ProofRole::kClient, a, b)));
  EXPECT_FALSE(proofs_equal(proof, probe_proof(kSecret, ProofRole::kServer, a, b)));
  EXPECT_FALSE(proofs_equal(proof, probe_proof(kSecret, ProofRole::kClient, b, a)));
  EXPECT_FALSE(proofs_equal(proof, probe_proof(kSecret + "x", ProofRole::kClient, a, b)));
}

TEST(ProbeMeasurement, LoopbackIsSaneAndFitsTheAnnotation) {
  auto server = start_probe_server(kSecret);
  const ProbeOptions options = quick_options();
  const ProbeResult result = measure_peer(loopback_peer(server->port()), options);
  const api::LinkMeasurement& m = result.measurement;
  EXPECT_GT(m.rtt_p50_ms, 0);
  EXPECT_GE(m.rtt_p90_ms, m.rtt_p50_ms);
  // How fast loopback is depends on the machine and its load: measured, never bounded here
  // (bench/prober; the accuracy against shaped links is prober/accuracy's, label prober-accuracy).
  EXPECT_GT(m.small_gbps, 0);
  EXPECT_GT(m.bulk_gbps, 0);
  EXPECT_EQ(m.measured_at.size(), 20u);  // 2026-11-26T00:12:03Z
  EXPECT_EQ(m.measured_at.back(), 'Z');
  EXPECT_GT(result.bytes_sent, fixed_probe_bytes(options) - 512);  // the hello's name is short
  EXPECT_LE(result.bytes_sent, options.max_bytes);
  api::NodeLinks links;
  links.peers["gpu-node-2"] = m;
  const api::NodeLinks parsed = api::parse_node_links(api::format_node_links(links), "gpu-node-1");
  EXPECT_EQ(parsed.peers.size(), 1u);
  eventually([&] { return server->sessions_completed() != 0; });
  EXPECT_EQ(server->sessions_completed(), 1u);
  EXPECT_TRUE(server->recent_errors().empty());
}

TEST(ProbeMeasurement, BulkPhaseStopsAtTheByteBudget) {
  auto server = start_probe_server(kSecret);
  ProbeOptions options = quick_options();
  options.bulk_duration = 60'000ms;  // the budget, not the duration, ends the bulk phase
  const uint64_t bulk_message = kFrameHeaderBytes + options.bulk_message_bytes;
  options.max_bytes = fixed_probe_bytes(options) + 3 * bulk_message + bulk_message / 2;
  const ProbeResult result = measure_peer(loopback_peer(server->port()), options);
  EXPECT_GT(result.measurement.bulk_gbps, 0);
  EXPECT_LE(result.bytes_sent, options.max_bytes);
  // Three bulk messages fit the budget, a fourth does not.
  EXPECT_GT(result.bytes_sent, options.max_bytes - bulk_message);
}

TEST(ProbeOptionsCheck, BadOptionsNameTheFieldValueAndLimit) {
  ProbeOptions options = quick_options();
  options.secret = "short";
  EXPECT_EQ(error_of([&] { check_probe_options(options); }),
            "prober option secret: the shared secret is 5 bytes; it must be 16 to 4096 bytes");
  options = quick_options();
  options.bulk_message_bytes = 0;
  EXPECT_EQ(error_of([&] { check_probe_options(options); }),
            "prober option bulk_message_bytes = 0: must be 1 to 16777216");
  options = quick_options();
  options.round_trips = 0;
  EXPECT_NE(error_of([&] { check_probe_options(options); }).find("round_trips = 0"),
            std::string::npos);
  options = quick_options();
  options.max_bytes = 1000;
  EXPECT_NE(
      error_of([&] { check_probe_options(options); }).find("max_bytes = 1000: must be at least"),
      std::string::npos);
  options = quick_options();
  options.bulk_duration = 0ms;
  EXPECT_NE(error_of([&] { check_probe_options(options); }).find("bulk_duration = 0 ms"),
            std::string::npos);
  ProbeServerOptions server_options;
  server_options.secret = "";
  EXPECT_NE(error_of([&] {
              check_probe_server_options(server_options);
            }).find("prober server secret: the shared secret is 0 bytes"),
            std::string::npos);
}

TEST(ProbeAuthentication, WrongSecretIsRefusedBeforeAnyMeasurement) {
  auto server = start_probe_server("a-different-secret-of-the-server");
  const std::string error =
      error_of([&] { measure_peer(loopback_peer(server->port()), quick_options()); });
  EXPECT_NE(error.find("prober peer gpu-node-2 (127.0.0.1:"), std::string::npos) << error;
  EXPECT_NE(error.find("authentication: authentication failed: the peer did not prove it knows "
                       "the shared secret"),
            std::string::npos)
      << error;
  // The server saw the client hang up instead of answering its challenge.
  const std::string server_error = first_server_error(*server);
  EXPECT_NE(server_error.find("connection closed"), std::string::npos) << server_error;
  EXPECT_EQ(server->sessions_completed(), 0u);
}

TEST(ProbeAuthentication, StrangerWithAWrongProofIsRefusedAndServedNothing) {
  auto server = start_probe_server(kSecret);
  ProbeChannel channel = loopback_channel(server->port(), "test client");
  std::vector<std::byte> hello(4 + kNonceBytes + 8, std::byte{0});
  hello[0] = std::byte{1};  // version 1
  std::memcpy(hello.data() + 4 + kNonceBytes, "stranger", 8);
  channel.send(FrameType::kHello, hello);
  std::vector<std::byte> payload;
  channel.receive_expected(FrameType::kChallenge, payload, kNonceBytes + kMacBytes);
  channel.send(FrameType::kResponse, Mac{});  // it does not know the secret
  EXPECT_EQ(error_of([&] { channel.receive(payload); }),
            "test client: refused: authentication failed: wrong proof of the shared secret");
  const std::string error = first_server_error(*server);
  EXPECT_NE(error.find("(says it is 'stranger'): authentication failed"), std::string::npos)
      << error;
  // The connection is over: a ping gets no pong.
  EXPECT_NE(error_of([&] {
              channel.send(FrameType::kPing, std::vector<std::byte>(8));
              channel.receive(payload);
            }),
            "(no error)");
  EXPECT_EQ(server->sessions_completed(), 0u);
}

struct HostileCase {
  const char* name;
  std::vector<std::byte> bytes;
  const char* expected;  // in the server's error
};

std::vector<std::byte> header_bytes(uint8_t type, uint32_t length, uint8_t reserved = 0,
                                    const char* magic = "TPRB") {
  std::vector<std::byte> bytes(kFrameHeaderBytes);
  std::memcpy(bytes.data(), magic, 4);
  bytes[4] = std::byte{type};
  bytes[5] = std::byte{reserved};
  for (int i = 0; i < 4; ++i) bytes[8 + i] = static_cast<std::byte>(length >> (8 * i));
  return bytes;
}

TEST(ProbeHostileFrames, TheServerRefusesEachByName) {
  std::vector<std::byte> old_version = header_bytes(1, 4 + kNonceBytes + 1);
  old_version.resize(old_version.size() + 4 + kNonceBytes + 1, std::byte{'x'});
  old_version[kFrameHeaderBytes] = std::byte{7};  // version 7
  old_version[kFrameHeaderBytes + 1] = std::byte{0};
  old_version[kFrameHeaderBytes + 2] = std::byte{0};
  old_version[kFrameHeaderBytes + 3] = std::byte{0};
  std::vector<std::byte> early_ping = header_bytes(6, 8);
  early_ping.resize(early_ping.size() + 8, std::byte{0});
  std::vector<std::byte> short_hello = header_bytes(1, 3);
  short_hello.resize(short_hello.size() + 3, std::byte{0});
  const std::vector<HostileCase> cases = {
      {"http", header_bytes(1, 0, 0, "GET "), "bad magic (not the tessel probe protocol)"},
      {"unknown type", header_bytes(99, 0), "unknown frame type 99"},
      {"type zero", header_bytes(0, 0), "unknown frame type 0"},
      {"reserved bytes", header_bytes(1, 40, 1), "reserved bytes are not zero"},
      {"huge hello", header_bytes(1, 1u << 30),
       "a hello frame of 1073741824 bytes exceeds its limit of 564 bytes"},
      {"huge data", header_bytes(8, 0xffffffffu),
       "a data frame of 4294967295 bytes exceeds its limit of 16777216 bytes"},
      {"ping before hello", early_ping, "expected a hello frame, got ping"},
      {"short hello", short_hello, "a hello frame of 3 bytes; it must be at least 37"},
      {"other version", old_version, "protocol version 7 is not supported"},
  };
  for (const HostileCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto server = start_probe_server(kSecret);
    ProbeChannel channel = loopback_channel(server->port(), "test client");
    send_raw(channel, c.bytes);
    const std::string error = first_server_error(*server);
    EXPECT_NE(error.find("prober client 127.0.0.1:"), std::string::npos) << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << error;
    EXPECT_EQ(server->sessions_completed(), 0u);
  }
}

TEST(ProbeHostileFrames, TheClientRefusesAnOversizeChallenge) {
  auto listener = transport::TcpListener::bind("127.0.0.1", 0);
  const uint16_t port = listener.port();
  std::thread fake([&] {
    transport::UniqueFd fd = transport::accept_until(listener, Clock::now() + 30s);
    if (!fd.valid()) return;
    // A version 2 hello: version, nonce, ticket, "gpu-node-1".
    std::vector<std::byte> hello(kFrameHeaderBytes + 4 + kNonceBytes + kTicketBytes + 10);
    transport::recv_all(fd.get(), hello, Clock::now() + 30s);
    transport::send_all(fd.get(), header_bytes(2, 1u << 24), Clock::now() + 30s);
    std::this_thread::sleep_for(200ms);
  });
  const std::string error =
      error_of([&] { measure_peer(loopback_peer(port, "gpu-node-9"), quick_options()); });
  fake.join();
  EXPECT_EQ(error,
            loopback_peer_text(port, "gpu-node-9") +
                ": authentication: frame header: a challenge frame of 16777216 bytes exceeds "
                "its limit of 64 bytes");
}

TEST(ProbeFailures, APeerThatVanishesMidMeasurementIsNamed) {
  auto server = start_probe_server(kSecret);
  ProbeOptions options = quick_options();
  options.bulk_duration = 30'000ms;  // still sending when the peer goes
  options.max_bytes = 1ull << 40;
  options.io_timeout = 3000ms;
  std::string error;
  std::thread client([&] {
    error = error_of(
        [&] { measure_peer(loopback_peer(server->port(), "gpu-node-vanishing"), options); });
  });
  std::this_thread::sleep_for(500ms);
  server->stop();  // cuts the session: the peer's prober is gone
  client.join();
  EXPECT_NE(error.find("prober peer gpu-node-vanishing (127.0.0.1:"), std::string::npos) << error;
  EXPECT_NE(error.find("throughput: "), std::string::npos) << error;
}

TEST(ProbeFailures, ASilentPeerTimesOut) {
  // Connections complete in the kernel's backlog, but nothing ever answers.
  auto listener = transport::TcpListener::bind("127.0.0.1", 0);
  ProbeOptions options = quick_options();
  options.io_timeout = 300ms;
  const std::string error =
      error_of([&] { measure_peer(loopback_peer(listener.port(), "gpu-node-silent"), options); });
  EXPECT_NE(error.find("prober peer gpu-node-silent"), std::string::npos) << error;
  EXPECT_NE(error.find("authentication: "), std::string::npos) << error;
  EXPECT_NE(error.find("timed out receiving"), std::string::npos) << error;
}

TEST(ProbeFailures, NoProberListeningIsNamed) {
  std::uint16_t port;
  {
    auto listener = transport::TcpListener::bind("127.0.0.1", 0);
    port = listener.port();
  }
  ProbeOptions options = quick_options();
  options.connect_timeout = 300ms;
  const std::string error =
      error_of([&] { measure_peer(loopback_peer(port, "gpu-node-gone"), options); });
  EXPECT_NE(error.find(loopback_peer_text(port, "gpu-node-gone") + ": connect: "),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace tessel::prober
