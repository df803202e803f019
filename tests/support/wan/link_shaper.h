// What one directed link does to each packet, as a router ahead of a line would: a token
// bucket at the link's rate with a queue in front (a packet that finds the queue full is
// dropped), then the line drops it with the link's loss probability, else it arrives one
// delay after it left the bucket. Pure: the caller passes the time, and keeps the packets.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>

#include "tests/support/wan/link_settings.h"

namespace tessel::wan {

using Clock = std::chrono::steady_clock;

// The smallest queue a rate-limited link gets, whatever its queue_ms: a few full-size packets,
// so that a low rate still takes a burst of them.
inline constexpr std::size_t kMinQueueBytes = 64 * 1024;
// The bucket's depth: this much time at the rate (at least two packets of the MTU), the burst a
// link lets through at once after idling.
inline constexpr std::chrono::microseconds kBucketDepth{1000};

enum class Fate { kDelivered, kDroppedQueueFull, kDroppedLoss };

struct Admission {
  Fate fate = Fate::kDelivered;
  Clock::time_point arrival;  // when it reaches the far end (kDelivered only)
};

class LinkShaper {
 public:
  LinkShaper(const LinkSettings& settings, int mtu, std::uint64_t seed);

  // A packet of `bytes` offered to the link at `now` (calls come in time order).
  Admission admit(std::size_t bytes, Clock::time_point now);

  // Bytes waiting in the queue at `now` (offered, not yet through the bucket).
  std::size_t queued_bytes(Clock::time_point now);
  std::size_t queue_limit_bytes() const { return queue_limit_bytes_; }
  std::size_t bucket_bytes() const { return static_cast<std::size_t>(bucket_bytes_); }

 private:
  void drain(Clock::time_point now);

  LinkSettings settings_;
  double bytes_per_ns_ = 0;  // 0: unlimited
  double bucket_bytes_ = 0;
  std::size_t queue_limit_bytes_ = 0;
  Clock::duration delay_{};
  // The bucket after the last scheduled departure: its time and the tokens left then.
  Clock::time_point last_departure_{};
  double tokens_ = 0;
  // The queue: packets offered but not yet departed (departure time, bytes), and their sum.
  std::deque<std::pair<Clock::time_point, std::size_t>> queue_;
  std::size_t queue_bytes_ = 0;
  std::mt19937_64 random_;
  std::bernoulli_distribution lost_;
};

}  // namespace tessel::wan
