// The link emulator's arithmetic, on virtual time points (no sleeping): the token bucket's
// rate and burst, the delay line as a pipe, the shape table. The shaping of real sockets is in
// timing/shaping_test.cpp (label timing); shapes from a placement topology in
// tests/stage/topology_links_test.cpp.
#include "noderuntime/transport/link_emulator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

using Clock = LinkPacer::Clock;
using Seconds = std::chrono::duration<double>;

const Clock::time_point t0 = Clock::time_point() + std::chrono::hours(1);

double seconds_after_t0(Clock::time_point t) { return Seconds(t - t0).count(); }

testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// Delivery time of the last piece of `bytes` handed over at t0, in burst-sized pieces.
double transfer_s(LinkPacer& pacer, size_t bytes) {
  Clock::time_point last = t0;
  for (size_t sent = 0; sent < bytes; sent += pacer.burst_bytes()) {
    last = pacer.delivery_time(std::min(pacer.burst_bytes(), bytes - sent), t0);
  }
  return seconds_after_t0(last);
}

TEST(LinkPacer, UnlimitedLinkDeliversAtOnce) {
  LinkPacer pacer(LinkShape{});
  EXPECT_EQ(pacer.delivery_time(kDefaultBurstBytes, t0), t0);
  EXPECT_EQ(pacer.delivery_time(1, t0 + std::chrono::seconds(1)), t0 + std::chrono::seconds(1));
}

TEST(LinkPacer, SixteenMiBAtFiftyMBPerSecondTakesBytesOverRate) {
  LinkPacer pacer(LinkShape{50e6, 0});
  const size_t bytes = 16 << 20;
  // The first burst leaves at once, the rest at the rate.
  EXPECT_NEAR(transfer_s(pacer, bytes), (bytes - kDefaultBurstBytes) / 50e6, 1e-6);
}

TEST(LinkPacer, LatencyIsPaidOncePerTransferNotPerPiece) {
  LinkPacer pacer(LinkShape{50e6, 0.2});
  const size_t bytes = 4 << 20;  // 64 pieces
  EXPECT_NEAR(transfer_s(pacer, bytes), 0.2 + (bytes - kDefaultBurstBytes) / 50e6, 1e-6);

  LinkPacer latency_only(LinkShape{0, 0.05});
  for (int piece = 0; piece < 100; ++piece) {
    ASSERT_EQ(latency_only.delivery_time(kDefaultBurstBytes, t0),
              t0 + std::chrono::milliseconds(50));
  }
}

TEST(LinkPacer, BucketRefillsWhileIdleButNeverBeyondTheBurst) {
  LinkPacer pacer(LinkShape{1e6, 0}, 1000);
  EXPECT_NEAR(seconds_after_t0(pacer.delivery_time(1000, t0)), 0.0, 1e-9);    // full bucket
  EXPECT_NEAR(seconds_after_t0(pacer.delivery_time(1000, t0)), 0.001, 1e-9);  // waits a refill
  // Idle for a second: one burst leaves at once, the next waits a full refill again.
  const auto later = t0 + std::chrono::seconds(1);
  EXPECT_NEAR(seconds_after_t0(pacer.delivery_time(1000, later)), 1.0, 1e-9);
  EXPECT_NEAR(seconds_after_t0(pacer.delivery_time(500, later)), 1.0005, 1e-9);
}

TEST(LinkPacer, PiecesLeaveInStreamOrder) {
  LinkPacer pacer(LinkShape{1e6, 0.01}, 1000);
  const auto first = pacer.delivery_time(1000, t0 + std::chrono::milliseconds(5));
  const auto second = pacer.delivery_time(10, t0);  // handed over "earlier": still after
  EXPECT_GE(second, first);
}

TEST(LinkPacer, RejectsBadShapesAndOversizedPieces) {
  EXPECT_THROW(LinkPacer(LinkShape{-1, 0}), TransportError);
  EXPECT_THROW(LinkPacer(LinkShape{0, -0.1}), TransportError);
  EXPECT_THROW(LinkPacer(LinkShape{1e6, 0}, 0), TransportError);
  LinkPacer pacer(LinkShape{1e6, 0}, 100);
  try {
    pacer.delivery_time(101, t0);
    FAIL() << "oversized piece accepted";
  } catch (const TransportError& e) {
    EXPECT_TRUE(Contains(e.what(), "piece of 101 bytes exceeds the burst of 100"));
  }
}

TEST(LinkEmulator, HoldsOneShapePerDirection) {
  LinkEmulator links(3);
  EXPECT_FALSE(links.shape(0, 1).shaped());
  links.set(0, 1, {100e6, 0.01});
  links.set(1, 0, {50e6, 0.02});
  EXPECT_EQ(links.shape(0, 1), (LinkShape{100e6, 0.01}));
  EXPECT_EQ(links.shape(1, 0), (LinkShape{50e6, 0.02}));
  EXPECT_FALSE(links.shape(0, 2).shaped());
  EXPECT_EQ(LinkEmulator::uniform(3, {1e6, 0}).shape(2, 1), (LinkShape{1e6, 0}));
}

TEST(LinkEmulator, NamesTheRankOrLinkAtFault) {
  LinkEmulator links(2);
  try {
    links.set(0, 2, {1e6, 0});
    FAIL();
  } catch (const TransportError& e) {
    EXPECT_TRUE(Contains(e.what(), "rank 2 out of range [0, 2)"));
  }
  try {
    links.set(1, 0, {1e6, -1});
    FAIL();
  } catch (const TransportError& e) {
    EXPECT_TRUE(Contains(e.what(), "link 1 -> 0: latency_s must be finite and >= 0"));
  }
  EXPECT_THROW(LinkEmulator(0), TransportError);
}

}  // namespace
}  // namespace tessel::transport
