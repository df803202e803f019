// The WAN emulator's per-link shaping, with the time passed in: delay, the token bucket's rate
// and depth, the queue limit, and loss.
#include "tests/support/wan/link_shaper.h"

#include <gtest/gtest.h>

namespace tessel::wan {
namespace {

using namespace std::chrono_literals;

const Clock::time_point kStart = Clock::time_point{} + 1h;

LinkSettings settings(double delay_ms, double rate_mbit, double loss = 0, double queue_ms = 100) {
  LinkSettings link;
  link.delay_ms = delay_ms;
  link.rate_mbit = rate_mbit;
  link.loss = loss;
  link.queue_ms = queue_ms;
  return link;
}

TEST(LinkShaper, AnUnlimitedLinkDelaysEveryPacketByItsDelay) {
  LinkShaper link(settings(75, 0), 1500, 1);
  for (int i = 0; i < 1000; ++i) {
    const Clock::time_point now = kStart + i * 1us;
    const Admission a = link.admit(1500, now);
    ASSERT_EQ(a.fate, Fate::kDelivered);
    EXPECT_EQ(a.arrival, now + 75ms);
  }
  EXPECT_EQ(link.queued_bytes(kStart + 1ms), 0u);
}

TEST(LinkShaper, ABacklogLeavesAtTheRateAfterTheBucketsBurst) {
  // 100 Mbit/s: 12.5 bytes per microsecond; the bucket holds 1 ms of it, 12500 bytes.
  LinkShaper link(settings(10, 100), 1500, 1);
  EXPECT_EQ(link.bucket_bytes(), 12500u);
  Clock::time_point last;
  const int packets = 400;  // 600 kB offered at once: 12500 bytes at once, the rest at the rate
  for (int i = 0; i < packets; ++i) {
    const Admission a = link.admit(1500, kStart);
    ASSERT_EQ(a.fate, Fate::kDelivered) << "packet " << i;
    EXPECT_GE(a.arrival, kStart + 10ms);
    if (i > 0) {
      EXPECT_GE(a.arrival, last);  // in order
    }
    last = a.arrival;
  }
  const double expected_us = (packets * 1500.0 - 12500.0) / 12.5;  // 47000 us
  const double last_us = std::chrono::duration<double, std::micro>(last - kStart - 10ms).count();
  EXPECT_NEAR(last_us, expected_us, 120.0);  // one packet's time at the rate
}

TEST(LinkShaper, APacketThatFindsTheQueueFullIsDropped) {
  // 8 Mbit/s (1 byte/us) with a 100 ms queue: 100000 bytes may wait, beyond that drops.
  LinkShaper link(settings(0, 8, 0, 100), 1500, 1);
  EXPECT_EQ(link.queue_limit_bytes(), 100000u);
  int delivered = 0, dropped = 0;
  for (int i = 0; i < 200; ++i) {
    const Admission a = link.admit(1000, kStart);
    (a.fate == Fate::kDelivered ? delivered : dropped) += 1;
    if (a.fate != Fate::kDelivered) {
      EXPECT_EQ(a.fate, Fate::kDroppedQueueFull);
    }
  }
  // The bucket's 3000 bytes (two MTUs: 1 ms is only 1000 bytes) go at once, 100 more wait.
  EXPECT_EQ(delivered, 103);
  EXPECT_EQ(dropped, 97);
  // 50 ms later 50000 bytes have left: 50 more packets fit.
  EXPECT_EQ(link.queued_bytes(kStart + 50ms), 50000u);
  int later = 0;
  for (int i = 0; i < 60; ++i) later += link.admit(1000, kStart + 50ms).fate == Fate::kDelivered;
  EXPECT_EQ(later, 50);
}

TEST(LinkShaper, AnIdleLinkSendsAPacketAtOnce) {
  LinkShaper link(settings(5, 10), 1500, 1);
  link.admit(1500, kStart);
  const Admission a = link.admit(1500, kStart + 1s);
  EXPECT_EQ(a.arrival, kStart + 1s + 5ms);
}

TEST(LinkShaper, LossDropsAboutThatFractionOfPackets) {
  LinkShaper link(settings(0, 0, 0.2), 1500, 7);
  int lost = 0;
  const int packets = 100000;
  for (int i = 0; i < packets; ++i) {
    const Admission a = link.admit(100, kStart + i * 1us);
    if (a.fate == Fate::kDroppedLoss) ++lost;
  }
  // sd = sqrt(n p (1-p)) = 126: five of them.
  EXPECT_NEAR(lost, 0.2 * packets, 632);
}

TEST(LinkShaper, LossOneDropsEveryPacketAsAPartitionDoes) {
  for (const double rate_mbit : {0.0, 100.0}) {
    LinkShaper link(settings(10, rate_mbit, 1), 1500, 3);
    for (int i = 0; i < 10000; ++i)
      ASSERT_EQ(link.admit(1500, kStart + i * 1ms).fate, Fate::kDroppedLoss)
          << "packet " << i << " at rate " << rate_mbit;
  }
}

}  // namespace
}  // namespace tessel::wan
