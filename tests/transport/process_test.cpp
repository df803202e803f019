// The transport across real processes: fork()ed children run ranks over 127.0.0.1 while the
// test process runs rank 0. Meshes of 2 to 5 processes exchanging messages and all-reducing, a
// peer killed in the middle of a receive, and a peer that stays silent.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "local_mesh.h"

namespace tessel::transport {
namespace {

using namespace std::chrono_literals;
using testing::Contains;
using testing::f32_info;
using testing::wait_error;

// Runs body in a child process; its exit status is body's result (1 if it throws). Fork
// before this process starts any thread of its own (the children must not inherit locks).
pid_t spawn(const std::function<int()>& body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  int code = 1;
  try {
    code = body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "child %d: %s\n", getpid(), e.what());
  }
  _exit(code);
}

int exit_status(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Rank r's contribution: r + 1 everywhere, so the sum over n ranks is n (n + 1) / 2.
std::vector<float> contribution(int rank, size_t count) {
  return std::vector<float>(count, static_cast<float>(rank + 1));
}

// Every rank sends its rank to its right neighbour and receives from its left, then all-reduces.
// Returns 0 when everything arrived as expected.
int exchange_and_reduce(Communicator& c) {
  const int n = c.size(), r = c.rank();
  std::vector<float> mine(5, static_cast<float>(r)), from_left(5);
  const TensorInfo info = f32_info(Tag::kActivation, 0, 0, 5);
  Request send = c.isend((r + 1) % n, info, std::as_bytes(std::span(mine)));
  c.recv((r + n - 1) % n, info, std::as_writable_bytes(std::span(from_left)));
  send.wait();
  if (from_left != std::vector<float>(5, static_cast<float>((r + n - 1) % n))) return 2;
  std::vector<int> group(n);
  for (int i = 0; i < n; ++i) group[i] = i;
  std::vector<float> data = contribution(r, 100001);
  c.all_reduce(data.data(), data.size(), DType::kF32, group);
  const auto expected = static_cast<float>(n * (n + 1) / 2);
  for (float v : data) {
    if (v != expected) return 3;
  }
  return 0;
}

TEST(Processes, TwoToFiveProcessesFormAMeshExchangeAndAllReduce) {
  for (int n = 2; n <= 5; ++n) {
    testing::LocalAddresses addresses = testing::bind_local(n);
    std::vector<pid_t> children;
    for (int r = 1; r < n; ++r) {
      children.push_back(spawn([&, r] {
        TcpCommunicator c(testing::local_options(addresses.peers, r), addresses.listeners[r]);
        return exchange_and_reduce(c);
      }));
    }
    {
      TcpCommunicator c(testing::local_options(addresses.peers, 0), addresses.listeners[0]);
      EXPECT_EQ(exchange_and_reduce(c), 0) << n << " processes";
    }
    for (size_t i = 0; i < children.size(); ++i) {
      EXPECT_EQ(exit_status(children[i]), 0) << n << " processes, rank " << i + 1;
    }
  }
}

TEST(Processes, APeerKilledInTheMiddleOfAReceiveIsNamedWithinTheTimeout) {
  testing::LocalAddresses addresses = testing::bind_local(2);
  const pid_t child = spawn([&] {
    TcpOptions o = testing::local_options(addresses.peers, 1);
    o.links = LinkEmulator::uniform(2, {4e6, 0});  // 16 MiB would take 4 s
    TcpCommunicator c(o, addresses.listeners[1]);
    std::vector<float> ready(1), big(4 << 20);
    c.send(0, f32_info(Tag::kControl, 0, 0, 1), std::as_bytes(std::span(ready)));
    c.send(0, f32_info(Tag::kActivation, 0, 0, big.size()), std::as_bytes(std::span(big)));
    return 0;
  });
  TcpCommunicator c(testing::local_options(addresses.peers, 0), addresses.listeners[0]);
  std::vector<float> ready(1), big(4 << 20);
  Request pending = c.irecv(1, f32_info(Tag::kActivation, 0, 0, big.size()),
                            std::as_writable_bytes(std::span(big)));
  c.recv(1, f32_info(Tag::kControl, 0, 0, 1), std::as_writable_bytes(std::span(ready)));
  // The big message is on its way now.
  kill(child, SIGKILL);
  const std::string error = wait_error(pending);
  EXPECT_EQ(exit_status(child), 128 + SIGKILL);
  EXPECT_TRUE(Contains(error, "rank 1 (127.0.0.1:" + std::to_string(addresses.peers[1].port) +
                                  ", test rank 1): connection closed"))
      << error;  // the close is noticed, not timed out ("no data for 10 s")
}

TEST(Processes, ASilentPeerProcessTimesOut) {
  testing::LocalAddresses addresses = testing::bind_local(2);
  int hold[2];
  ASSERT_EQ(pipe(hold), 0);
  const pid_t child = spawn([&] {
    close(hold[1]);
    TcpCommunicator c(testing::local_options(addresses.peers, 1), addresses.listeners[1]);
    char byte;
    return read(hold[0], &byte, 1) >= 0 ? 0 : 1;  // stays connected and silent until released
  });
  close(hold[0]);
  TcpOptions o = testing::local_options(addresses.peers, 0);
  o.io_timeout = 300ms;
  TcpCommunicator c(o, addresses.listeners[0]);
  std::vector<float> got(8);
  const std::string error = wait_error(
      c.irecv(1, f32_info(Tag::kGradient, 4, 2, 8), std::as_writable_bytes(std::span(got))));
  EXPECT_TRUE(Contains(error, "rank 1 (127.0.0.1:" + std::to_string(addresses.peers[1].port) +
                                  ", test rank 1): no data for 0.3 s"))
      << error;
  close(hold[1]);
  EXPECT_EQ(exit_status(child), 0);
}

}  // namespace
}  // namespace tessel::transport
