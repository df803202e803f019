#include "noderuntime/transport/link_emulator.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

void check_shape(const LinkShape& shape, const std::string& what) {
  if (!std::isfinite(shape.bytes_per_s) || shape.bytes_per_s < 0) {
    throw TransportError(what + ": bytes_per_s must be finite and >= 0 (0 = unlimited), got " +
                         std::to_string(shape.bytes_per_s));
  }
  if (!std::isfinite(shape.latency_s) || shape.latency_s < 0) {
    throw TransportError(what + ": latency_s must be finite and >= 0, got " +
                         std::to_string(shape.latency_s));
  }
}

}  // namespace

LinkPacer::LinkPacer(LinkShape shape, size_t burst_bytes)
    : shape_(shape), burst_bytes_(burst_bytes), tokens_(static_cast<double>(burst_bytes)) {
  check_shape(shape, "link shape");
  if (burst_bytes == 0) throw TransportError("link shape: burst must be at least one byte");
}

LinkPacer::Clock::time_point LinkPacer::delivery_time(size_t bytes, Clock::time_point ready) {
  if (bytes > burst_bytes_) {
    throw TransportError("link pacer: piece of " + std::to_string(bytes) +
                         " bytes exceeds the burst of " + std::to_string(burst_bytes_));
  }
  using Seconds = std::chrono::duration<double>;
  const Clock::time_point start = std::max(ready, last_release_);
  Clock::time_point release = start;
  if (shape_.bytes_per_s > 0) {
    const double rate = shape_.bytes_per_s;
    const double refill = Seconds(start - last_release_).count() * rate;
    const double tokens = std::min(static_cast<double>(burst_bytes_), tokens_ + refill);
    const double need = static_cast<double>(bytes);
    if (tokens >= need) {
      tokens_ = tokens - need;
    } else {
      release += std::chrono::duration_cast<Clock::duration>(Seconds((need - tokens) / rate));
      tokens_ = 0;
    }
  }
  last_release_ = release;
  return release + std::chrono::duration_cast<Clock::duration>(Seconds(shape_.latency_s));
}

LinkEmulator::LinkEmulator(int ranks) : ranks_(ranks) {
  if (ranks < 1) {
    throw TransportError("link emulator: ranks must be >= 1, got " + std::to_string(ranks));
  }
  shapes_.resize(static_cast<size_t>(ranks) * static_cast<size_t>(ranks));
}

LinkEmulator LinkEmulator::uniform(int ranks, LinkShape shape) {
  check_shape(shape, "link emulator: uniform shape");
  LinkEmulator links(ranks);
  std::fill(links.shapes_.begin(), links.shapes_.end(), shape);
  return links;
}

void LinkEmulator::set(int from, int to, LinkShape shape) {
  check_shape(shape, "link " + std::to_string(from) + " -> " + std::to_string(to));
  shapes_[index(from, to)] = shape;
}

const LinkShape& LinkEmulator::shape(int from, int to) const { return shapes_[index(from, to)]; }

size_t LinkEmulator::index(int from, int to) const {
  for (int r : {from, to}) {
    if (r < 0 || r >= ranks_) {
      throw TransportError("link emulator: rank " + std::to_string(r) + " out of range [0, " +
                           std::to_string(ranks_) + ")");
    }
  }
  return static_cast<size_t>(from) * static_cast<size_t>(ranks_) + static_cast<size_t>(to);
}

}  // namespace tessel::transport
