#include "tests/support/wan/link_shaper.h"

#include <algorithm>

namespace tessel::wan {

LinkShaper::LinkShaper(const LinkSettings& settings, int mtu, std::uint64_t seed)
    : settings_(settings), random_(seed), lost_(settings.loss) {
  delay_ = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(settings.delay_ms));
  if (settings.rate_mbit > 0) {
    bytes_per_ns_ = settings.rate_mbit * 1e6 / 8 / 1e9;
    bucket_bytes_ =
        std::max(bytes_per_ns_ * std::chrono::nanoseconds(kBucketDepth).count(), 2.0 * mtu);
    queue_limit_bytes_ =
        std::max(kMinQueueBytes, static_cast<std::size_t>(bytes_per_ns_ * settings.queue_ms * 1e6));
    tokens_ = bucket_bytes_;
  }
}

void LinkShaper::drain(Clock::time_point now) {
  while (!queue_.empty() && queue_.front().first <= now) {
    queue_bytes_ -= queue_.front().second;
    queue_.pop_front();
  }
}

std::size_t LinkShaper::queued_bytes(Clock::time_point now) {
  drain(now);
  return queue_bytes_;
}

Admission LinkShaper::admit(std::size_t bytes, Clock::time_point now) {
  Clock::time_point departure = now;
  if (bytes_per_ns_ > 0) {
    drain(now);
    // An empty queue takes any packet: an offloaded super-packet may exceed a slow link's limit.
    if (queue_bytes_ > 0 && queue_bytes_ + bytes > queue_limit_bytes_) {
      return {Fate::kDroppedQueueFull, {}};
    }
    // The bucket refills from the last departure (or now, when it has been idle since) and
    // the packet leaves once it holds `bytes` tokens: a packet larger than the bucket leaves
    // when the bucket is full and the rest has trickled in, as a serializing line would.
    const Clock::time_point start = std::max(now, last_departure_);
    const double refill =
        bytes_per_ns_ *
        static_cast<double>(std::chrono::nanoseconds(start - last_departure_).count());
    const double tokens = std::min(bucket_bytes_, tokens_ + refill);
    if (tokens >= static_cast<double>(bytes)) {
      departure = start;
      tokens_ = tokens - static_cast<double>(bytes);
    } else {
      departure = start + std::chrono::nanoseconds(static_cast<std::int64_t>(
                              (static_cast<double>(bytes) - tokens) / bytes_per_ns_));
      tokens_ = 0;
    }
    last_departure_ = departure;
    if (departure > now) {
      queue_.emplace_back(departure, bytes);
      queue_bytes_ += bytes;
    }
  }
  // Lost on the line, after it used its share of the rate.
  if (settings_.loss > 0 && lost_(random_)) return {Fate::kDroppedLoss, {}};
  return {Fate::kDelivered, departure + delay_};
}

}  // namespace tessel::wan
