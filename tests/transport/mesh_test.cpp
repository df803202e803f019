// Mesh start-up in one process (a thread per rank, real sockets on 127.0.0.1): 2 to 5 ranks,
// each connection joining the right pair; rejected handshakes, missing ranks, unreachable
// peers and stray connections; invalid options.
#include "noderuntime/transport/mesh.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <thread>

#include "local_mesh.h"

namespace tessel::transport {
namespace {

using namespace std::chrono_literals;
using testing::Comms;
using testing::connect_local;
using testing::Contains;
using testing::kJob;

// The message connect_local throws, or "" when every rank connected.
std::string connect_error(int ranks, const std::function<void(TcpOptions&)>& customize) {
  try {
    connect_local(ranks, customize);
  } catch (const TransportError& e) {
    return e.what();
  }
  return "";
}

TEST(Mesh, ConnectsTwoToFiveRanksAndEveryPairTalks) {
  for (int n = 2; n <= 5; ++n) {
    Comms comms = connect_local(n);
    testing::on_every_rank(n, [&](int r) {
      Communicator& c = *comms[r];
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.size(), n);
      std::vector<int32_t> mine(1, r);
      std::vector<int32_t> got(n, -1);
      std::vector<Request> requests;
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        const TensorInfo info{Tag::kControl, 0, 0, 0, DType::kI32, {1}};
        requests.push_back(c.isend(p, info, std::as_bytes(std::span(mine))));
        requests.push_back(c.irecv(p, info, std::as_writable_bytes(std::span(got).subspan(p, 1))));
      }
      for (auto& q : requests) q.wait();
      for (int p = 0; p < n; ++p) {
        if (p != r) {
          EXPECT_EQ(got[p], p) << "rank " << r << " from " << p;
        }
      }
    });
  }
}

TEST(Mesh, RejectsAnotherJobNamingBothSides) {
  const std::string error = connect_error(2, [](TcpOptions& o) {
    if (o.rank == 1) o.job_id = kJob + 1;
    o.connect_timeout = 400ms;
  });
  // The connecting rank hears the listener's reason; the listener gives up naming who is
  // missing and the rejection it saw.
  EXPECT_TRUE(Contains(error, "rank 0 (127.0.0.1:"));
  EXPECT_TRUE(Contains(error, "handshake rejected: job id " + std::to_string(kJob + 1) +
                                  " is not this job's " + std::to_string(kJob)));
  EXPECT_TRUE(Contains(error, "waiting for rank 1 (127.0.0.1:"));
  EXPECT_TRUE(Contains(error, "test rank 1) to connect (last rejected connection: job id"));
}

TEST(Mesh, RejectsAWrongWorldSize) {
  const std::string error = connect_error(2, [](TcpOptions& o) {
    if (o.rank == 1) o.peers.push_back({"127.0.0.1", 1, "extra"});
    o.connect_timeout = 400ms;
  });
  EXPECT_TRUE(Contains(error, "handshake rejected: world size 3 is not this job's 2"));
}

TEST(Mesh, TimesOutNamingTheMissingRanks) {
  testing::LocalAddresses addresses = testing::bind_local(3);
  std::array<std::string, 2> errors;
  testing::on_every_rank(2, [&](int r) {  // rank 2 never starts
    TcpOptions o = testing::local_options(addresses.peers, r);
    o.connect_timeout = 300ms;
    try {
      TcpCommunicator c(o, addresses.listeners[r]);
    } catch (const TransportError& e) {
      errors[r] = e.what();
    }
  });
  const std::string missing =
      "rank 2 (127.0.0.1:" + std::to_string(addresses.peers[2].port) + ", test rank 2)";
  EXPECT_TRUE(Contains(errors[0], "waiting for " + missing + " to connect")) << errors[0];
  EXPECT_TRUE(Contains(errors[1], "waiting for " + missing + " to connect")) << errors[1];
}

TEST(Mesh, ConnectorNamesTheUnreachablePeer) {
  testing::LocalAddresses addresses = testing::bind_local(2);
  addresses.listeners[0] = TcpListener::bind("127.0.0.1", 0);  // nobody on the old port now
  TcpOptions o = testing::local_options(addresses.peers, 1);
  o.connect_timeout = 200ms;
  try {
    TcpCommunicator c(o, addresses.listeners[1]);
    FAIL() << "connected to nobody";
  } catch (const TransportError& e) {
    EXPECT_TRUE(Contains(e.what(), "rank 0 (127.0.0.1:" + std::to_string(addresses.peers[0].port) +
                                       ", test rank 0): 127.0.0.1:"));
    EXPECT_TRUE(Contains(e.what(), "could not connect before the deadline: Connection refused"));
  }
}

TEST(Mesh, StrayConnectionsDoNotBreakStartUp) {
  testing::LocalAddresses addresses = testing::bind_local(2);
  // Something that is not a tessel rank connects first and says garbage, then hangs up.
  UniqueFd stray =
      connect_until("127.0.0.1", addresses.peers[0].port, std::chrono::steady_clock::now() + 1s);
  const std::array<std::byte, 32> garbage{};
  send_all(stray.get(), garbage, std::chrono::steady_clock::now() + 1s);
  shutdown(stray.get(), SHUT_WR);
  Comms comms(2);
  testing::on_every_rank(2, [&](int r) {
    comms[r] = std::make_unique<TcpCommunicator>(testing::local_options(addresses.peers, r),
                                                 addresses.listeners[r]);
  });
  std::array<int32_t, 1> value{41}, got{};
  const TensorInfo info{Tag::kControl, 0, 0, 0, DType::kI32, {1}};
  comms[1]->send(0, info, std::as_bytes(std::span(value)));
  comms[0]->recv(1, info, std::as_writable_bytes(std::span(got)));
  EXPECT_EQ(got[0], 41);
}

TEST(Mesh, RejectsInvalidOptions) {
  testing::LocalAddresses addresses = testing::bind_local(2);
  const auto error = [&](const std::function<void(TcpOptions&)>& change) -> std::string {
    TcpOptions o = testing::local_options(addresses.peers, 0);
    change(o);
    try {
      TcpCommunicator c(o, addresses.listeners[0]);
    } catch (const TransportError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(Contains(error([](TcpOptions& o) { o.rank = 2; }), "rank 2 out of range [0, 2)"));
  EXPECT_TRUE(Contains(error([](TcpOptions& o) { o.peers.clear(); }), "peers is empty"));
  EXPECT_TRUE(Contains(error([](TcpOptions& o) { o.links = LinkEmulator(3); }),
                       "links has 3 ranks, peers has 2"));
  EXPECT_TRUE(
      Contains(error([](TcpOptions& o) { o.io_timeout = 0ms; }), "io_timeout must be positive"));
  EXPECT_TRUE(Contains(error([](TcpOptions& o) { o.ring.window = 0; }),
                       "tcp communicator: ring options: need chunk_bytes >= 4"));
  EXPECT_TRUE(Contains(error([](TcpOptions& o) { o.peers[0].port = 1; }),
                       "rank 0 (127.0.0.1:1, test rank 0) is this rank's address, but the "
                       "listener is on port"));
}

}  // namespace
}  // namespace tessel::transport
