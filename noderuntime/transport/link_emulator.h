// The link emulator: makes one machine stand in for a geo-distributed cluster by shaping every
// directional link between two ranks to a bandwidth and a latency, in the sending path.
//
// LinkPacer is the arithmetic of one link. The byte stream is cut into pieces of at most the
// burst size (64 KiB by default); a token bucket (rate = bandwidth, depth = burst) releases
// each piece, and the piece reaches the far end `latency` after its release. Release times
// depend only on the bucket, never on when earlier pieces arrive, so the delay line is a pipe:
// many pieces are in flight at once and latency is paid once per transfer, not per piece.
// The TCP sender writes each piece to the socket at its delivery time.
//
// LinkEmulator is the table of shapes for every (from, to) pair (the stage runtime derives it from
// the placement topology: noderuntime/stage/topology_links.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

namespace tessel::transport {

struct LinkShape {
  double bytes_per_s = 0;  // 0: unlimited
  double latency_s = 0;

  bool shaped() const { return bytes_per_s > 0 || latency_s > 0; }
  bool operator==(const LinkShape&) const = default;
};

constexpr size_t kDefaultBurstBytes = 64 * 1024;

class LinkPacer {
 public:
  using Clock = std::chrono::steady_clock;

  // Throws TransportError for a negative or non-finite rate or latency, or a zero burst.
  LinkPacer(LinkShape shape, size_t burst_bytes = kDefaultBurstBytes);

  // The time a piece of `bytes` (at most the burst) that is ready to leave at `ready` reaches
  // the far end. Pieces are presented in stream order; a piece never leaves before the one
  // presented before it.
  Clock::time_point delivery_time(size_t bytes, Clock::time_point ready);

  const LinkShape& shape() const { return shape_; }
  size_t burst_bytes() const { return burst_bytes_; }

 private:
  LinkShape shape_;
  size_t burst_bytes_;
  double tokens_;                   // bytes in the bucket at last_release_
  Clock::time_point last_release_;  // release time of the latest piece
};

class LinkEmulator {
 public:
  // Every link between `ranks` ranks unlimited.
  explicit LinkEmulator(int ranks);

  // Every link the same shape.
  static LinkEmulator uniform(int ranks, LinkShape shape);

  int ranks() const { return ranks_; }
  // Throw TransportError for a rank out of range or an invalid shape.
  void set(int from, int to, LinkShape shape);
  const LinkShape& shape(int from, int to) const;

 private:
  size_t index(int from, int to) const;

  int ranks_;
  std::vector<LinkShape> shapes_;  // ranks_ x ranks_, row = from
};

}  // namespace tessel::transport
