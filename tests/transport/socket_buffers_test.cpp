// set_socket_buffers (socket.h): the buffers of a planned stream, and the window it may
// advertise clamped to the same size, so a link's streams keep at most their planned share of
// the bandwidth-delay product in flight.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "noderuntime/transport/socket.h"

namespace tessel::transport {
namespace {

int socket_option(int fd, int level, int name) {
  int value = 0;
  socklen_t length = sizeof value;
  EXPECT_EQ(getsockopt(fd, level, name, &value, &length), 0) << name;
  return value;
}

TEST(SocketBuffers, TheWindowIsClampedToTheBufferSize) {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_GE(fd.get(), 0);
  const int default_clamp = socket_option(fd.get(), IPPROTO_TCP, TCP_WINDOW_CLAMP);
  constexpr int kBytes = 96 * 1024;  // under any net.core.wmem_max / rmem_max
  set_socket_buffers(fd.get(), kBytes);
  EXPECT_EQ(socket_option(fd.get(), IPPROTO_TCP, TCP_WINDOW_CLAMP), kBytes)
      << "before: " << default_clamp;
  // Linux doubles a buffer request for its own bookkeeping.
  EXPECT_EQ(socket_option(fd.get(), SOL_SOCKET, SO_RCVBUF), 2 * kBytes);
  EXPECT_EQ(socket_option(fd.get(), SOL_SOCKET, SO_SNDBUF), 2 * kBytes);
}

}  // namespace
}  // namespace tessel::transport
