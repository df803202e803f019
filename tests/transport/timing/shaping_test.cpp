// The link emulator on real sockets: a shaped link moves bytes at its rate (16 MiB at 50 MB/s
// in 0.34 s +- 10 %), latency delays a small message by about the latency and a long transfer
// by it only once, and two links shaped differently out of one rank keep their own rates.
#include <gtest/gtest.h>

#include <chrono>

#include "local_mesh.h"

namespace tessel::transport {
namespace {

using testing::Comms;
using testing::connect_local;
using testing::f32_info;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Seconds from posting the send on `from` until the receive on `to` completes.
double transfer_s(Comms& comms, int from, int to, size_t bytes, uint64_t step) {
  std::vector<float> sent(bytes / sizeof(float), 1.f), got(sent.size());
  const TensorInfo info = f32_info(Tag::kActivation, step, 0, sent.size());
  Request recv = comms[to]->irecv(from, info, std::as_writable_bytes(std::span(got)));
  const auto start = std::chrono::steady_clock::now();
  Request send = comms[from]->isend(to, info, std::as_bytes(std::span(sent)));
  recv.wait();
  const double seconds = seconds_since(start);
  send.wait();
  EXPECT_EQ(got, sent);
  return seconds;
}

TEST(Shaping, SixteenMiBAtFiftyMBPerSecondTakesAThirdOfASecond) {
  Comms comms = connect_local(2, [](TcpOptions& o) {
    o.links = LinkEmulator::uniform(2, {50e6, 0});
  });
  const double expected = (16 << 20) / 50e6;  // 0.336 s
  EXPECT_NEAR(transfer_s(comms, 0, 1, 16 << 20, 0), expected, 0.1 * expected);
  // The other direction is its own link, shaped the same.
  EXPECT_NEAR(transfer_s(comms, 1, 0, 16 << 20, 1), expected, 0.1 * expected);
}

TEST(Shaping, LatencyIsAddedOncePerTransfer) {
  Comms comms = connect_local(2, [](TcpOptions& o) {
    o.links = LinkEmulator::uniform(2, {50e6, 0.1});
  });
  // A small message: about the latency.
  const double small = transfer_s(comms, 0, 1, 64, 0);
  EXPECT_GE(small, 0.1);
  EXPECT_LT(small, 0.15);
  // 4 MiB in 64 pieces: bytes / rate + one latency (0.18 s), nowhere near 64 latencies. The
  // upper margin is wider than the rate test's: the whole transfer is short, so a loaded
  // machine's scheduling delays weigh more.
  const double expected = (4 << 20) / 50e6 + 0.1;
  const double took = transfer_s(comms, 0, 1, 4 << 20, 1);
  EXPECT_GE(took, expected - 0.01);
  EXPECT_LT(took, 1.25 * expected);
}

TEST(Shaping, TwoLinksShapedDifferentlyKeepTheirOwnRates) {
  Comms comms = connect_local(3, [](TcpOptions& o) {
    LinkEmulator links(3);
    links.set(0, 1, {40e6, 0});
    links.set(0, 2, {20e6, 0});
    o.links = links;
  });
  const size_t bytes = 8 << 20;
  double to_1 = 0, to_2 = 0;
  testing::on_every_rank(2, [&](int which) {
    if (which == 0) {
      to_1 = transfer_s(comms, 0, 1, bytes, 0);
    } else {
      to_2 = transfer_s(comms, 0, 2, bytes, 0);
    }
  });
  EXPECT_NEAR(to_1, bytes / 40e6, 0.1 * bytes / 40e6);  // 0.21 s, unslowed by the other
  EXPECT_NEAR(to_2, bytes / 20e6, 0.1 * bytes / 20e6);  // 0.42 s
}

}  // namespace
}  // namespace tessel::transport
