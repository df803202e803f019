// tests/held_port.h, the port held for a server that binds it later: refused until the server
// listens, taken by a server that sets SO_REUSEADDR (as TcpListener, gRPC and asio do), and
// closed to any other socket that asks for it by number.
#include "tests/held_port.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <set>
#include <vector>

#include "noderuntime/transport/socket.h"

namespace tessel::transport {
namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// errno of a plain socket's bind (0 on success) or connect to 127.0.0.1:port.
int bind_errno(uint16_t port) {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  const sockaddr_in address = loopback(port);
  return ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 ? 0
                                                                                            : errno;
}
int connect_errno(uint16_t port) {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  const sockaddr_in address = loopback(port);
  return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0
             ? 0
             : errno;
}

TEST(HeldPort, RefusedUntilAServerListensThenTheServersAndNobodyElses) {
  const testing::HeldPort held;
  ASSERT_NE(held.port(), 0);
  EXPECT_EQ(held.address(), "127.0.0.1:" + std::to_string(held.port()));
  EXPECT_EQ(connect_errno(held.port()), ECONNREFUSED);
  EXPECT_EQ(bind_errno(held.port()), EADDRINUSE);  // another socket asking for it by number

  const TcpListener server = TcpListener::bind("127.0.0.1", held.port());
  EXPECT_EQ(server.port(), held.port());
  EXPECT_EQ(connect_errno(held.port()), 0);
  EXPECT_EQ(bind_errno(held.port()), EADDRINUSE);
}

// Held ports set SO_REUSEADDR themselves and none listens, so address reuse alone would let two
// of them share a port: bind(0) must still hand each its own.
TEST(HeldPort, PortZeroHandsOutNoPortThatIsHeld) {
  std::vector<std::unique_ptr<testing::HeldPort>> held;
  std::set<uint16_t> ports;
  for (int i = 0; i < 200; ++i) {
    held.push_back(std::make_unique<testing::HeldPort>());
    EXPECT_TRUE(ports.insert(held.back()->port()).second) << held.back()->port();
  }
}

}  // namespace
}  // namespace tessel::transport
