// The link emulator on real sockets, timed on the wall clock (label `timing`, run alone): a
// shaped link never delivers faster than its emulated rate and latency allow. Every bound is a
// lower bound taken from the emulator's own arithmetic (LinkPacer on virtual time), never from
// the machine's speed: a loaded machine only makes transfers slower, so it cannot break them.
// That a transfer is not slower than its shape (latency paid once, not per piece; a link out of
// a rank unslowed by another) would be an upper bound, which a loaded machine can break: it is
// not asserted here. The arithmetic behind it (latency once per transfer, each link its own
// shape in the table) is checked on virtual time in ../link_emulator_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "../local_mesh.h"
#include "noderuntime/transport/link_emulator.h"

namespace tessel::transport {
namespace {

using testing::Comms;
using testing::connect_local;
using testing::f32_info;

// The clock's rounding between the sender's wake-up and the test's reading.
constexpr double kClockSlackS = 1e-3;

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

// The emulator's delivery time of the last piece of `bytes` handed over at once on a fresh link
// of `shape`: the earliest the far end can have the whole message.
double emulated_s(LinkShape shape, size_t bytes) {
  LinkPacer pacer(shape);
  const auto t0 = LinkPacer::Clock::time_point() + std::chrono::hours(1);
  auto last = t0;
  for (size_t sent = 0; sent < bytes; sent += pacer.burst_bytes()) {
    last = pacer.delivery_time(std::min(pacer.burst_bytes(), bytes - sent), t0);
  }
  return std::chrono::duration<double>(last - t0).count();
}

TEST(Shaping, SixteenMiBAtFiftyMBPerSecondIsNeverFasterThanTheRate) {
  const LinkShape shape{50e6, 0};
  Comms comms = connect_local(2, [&](TcpOptions& o) { o.links = LinkEmulator::uniform(2, shape); });
  const size_t bytes = 16 << 20;
  const double floor = emulated_s(shape, bytes);  // 0.334 s: all but the first burst at the rate
  EXPECT_GE(transfer_s(comms, 0, 1, bytes, 0), floor - kClockSlackS);
  // The other direction is its own link, shaped the same.
  EXPECT_GE(transfer_s(comms, 1, 0, bytes, 1), floor - kClockSlackS);
}

TEST(Shaping, LatencyDelaysEveryTransfer) {
  const LinkShape shape{50e6, 0.1};
  Comms comms = connect_local(2, [&](TcpOptions& o) { o.links = LinkEmulator::uniform(2, shape); });
  // A small message: at least the latency.
  EXPECT_GE(transfer_s(comms, 0, 1, 64, 0), emulated_s(shape, 64) - kClockSlackS);  // 0.1 s
  // 4 MiB in 64 pieces: at least bytes / rate + one latency (0.18 s).
  EXPECT_GE(transfer_s(comms, 0, 1, 4 << 20, 1), emulated_s(shape, 4 << 20) - kClockSlackS);
}

TEST(Shaping, TwoLinksShapedDifferentlyEachHoldTheirOwnRate) {
  const LinkShape fast{40e6, 0}, slow{20e6, 0};
  Comms comms = connect_local(3, [&](TcpOptions& o) {
    LinkEmulator links(3);
    links.set(0, 1, fast);
    links.set(0, 2, slow);
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
  EXPECT_GE(to_1, emulated_s(fast, bytes) - kClockSlackS);  // 0.21 s
  EXPECT_GE(to_2, emulated_s(slow, bytes) - kClockSlackS);  // 0.42 s: the slow link's own rate
}

}  // namespace
}  // namespace tessel::transport
