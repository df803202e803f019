#include "noderuntime/transport/ring_allreduce.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <string>

#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

std::string group_text(const std::vector<int>& ring) {
  std::string out = "[";
  for (size_t i = 0; i < ring.size(); ++i) out += (i ? ", " : "") + std::to_string(ring[i]);
  return out + "]";
}

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

// The element ranges of n segments of `count` elements, each cut into the same number of
// chunks.
class RingLayout {
 public:
  RingLayout(size_t count, int n, const RingOptions& options)
      : count_(count), n_(static_cast<size_t>(n)) {
    const size_t longest = ceil_div(count, n_);
    const size_t fewest = ceil_div(longest, options.chunk_bytes / sizeof(float));
    const size_t for_pipelining = std::min(static_cast<size_t>(options.min_chunks),
                                           longest * sizeof(float) / options.min_chunk_bytes);
    chunks_ = std::max({size_t{1}, fewest, for_pipelining});
    slot_elems_ = ceil_div(longest, chunks_);
  }
  size_t chunks() const { return chunks_; }
  size_t slot_elems() const { return slot_elems_; }  // the longest chunk
  // [begin, end) of chunk k of segment `seg`.
  std::pair<size_t, size_t> range(size_t seg, size_t k) const {
    const size_t begin = seg * (count_ / n_) + std::min(seg, count_ % n_);
    const size_t length = count_ / n_ + (seg < count_ % n_ ? 1 : 0);
    return {begin + length * k / chunks_, begin + length * (k + 1) / chunks_};
  }

 private:
  size_t count_, n_, chunks_, slot_elems_;
};

}  // namespace

uint32_t ring_group_id(const std::vector<int>& ring) {
  uint32_t hash = 2166136261u;
  for (int rank : ring) {
    for (int shift = 0; shift < 32; shift += 8) {
      hash ^= (static_cast<uint32_t>(rank) >> shift) & 0xFFu;
      hash *= 16777619u;
    }
  }
  return hash;
}

void check_group(const Communicator& comm, const std::vector<int>& ring) {
  const std::string where = "all-reduce group " + group_text(ring);
  bool has_self = false;
  for (size_t i = 0; i < ring.size(); ++i) {
    const int r = ring[i];
    if (r < 0 || r >= comm.size()) {
      throw TransportError(where + ": rank " + std::to_string(r) + " out of range [0, " +
                           std::to_string(comm.size()) + ")");
    }
    if (std::find(ring.begin(), ring.begin() + static_cast<long>(i), r) !=
        ring.begin() + static_cast<long>(i)) {
      throw TransportError(where + ": rank " + std::to_string(r) + " listed twice");
    }
    has_self = has_self || r == comm.rank();
  }
  if (!has_self) {
    throw TransportError(where + ": does not include this rank (" + std::to_string(comm.rank()) +
                         ")");
  }
}

void check_ring_options(const RingOptions& options) {
  if (options.chunk_bytes < sizeof(float) || options.min_chunk_bytes < sizeof(float) ||
      options.min_chunks < 1 || options.window < 1) {
    throw TransportError(
        "ring options: need chunk_bytes >= 4, min_chunk_bytes >= 4, min_chunks >= 1 and "
        "window >= 1, got " +
        std::to_string(options.chunk_bytes) + ", " + std::to_string(options.min_chunk_bytes) +
        ", " + std::to_string(options.min_chunks) + " and " + std::to_string(options.window));
  }
}

void ring_all_reduce(Communicator& comm, std::span<float> data, const std::vector<int>& ring,
                     uint64_t sequence, const RingOptions& options) {
  check_group(comm, ring);
  check_ring_options(options);
  const int n = static_cast<int>(ring.size());
  if (n == 1) return;
  const int p = static_cast<int>(std::find(ring.begin(), ring.end(), comm.rank()) - ring.begin());
  const int left = ring[(p + n - 1) % n];
  const int right = ring[(p + 1) % n];
  const RingLayout layout(data.size(), n, options);
  const size_t chunks = layout.chunks();
  const size_t steps = 2 * static_cast<size_t>(n - 1);
  const size_t exchanges = steps * chunks;
  if (exchanges > std::numeric_limits<uint32_t>::max()) {
    throw TransportError("all-reduce: " + std::to_string(data.size()) + " elements in chunks of " +
                         std::to_string(options.chunk_bytes) +
                         " bytes need too many messages; raise chunk_bytes");
  }
  const uint32_t group = ring_group_id(ring);
  const auto window = static_cast<size_t>(options.window);

  // Segment sent in step t is (p - t) mod n; the one received is (p - t - 1) mod n.
  const auto region = [&](size_t t, size_t k, int extra) {
    const long seg = ((p - static_cast<long>(t) - extra) % n + n) % n;
    const auto [begin, end] = layout.range(static_cast<size_t>(seg), k);
    return data.subspan(begin, end - begin);
  };
  const auto info = [&](size_t e, size_t elems) {
    TensorInfo message{Tag::kAllReduce, sequence, group, static_cast<uint32_t>(e), DType::kF32, {}};
    message.shape = {static_cast<int64_t>(elems)};
    return message;
  };

  std::vector<float> scratch(window * layout.slot_elems());
  const auto slot = [&](size_t e, size_t elems) {
    return std::span(scratch).subspan((e % window) * layout.slot_elems(), elems);
  };
  std::vector<Request> sends(exchanges);
  std::vector<Request> recvs(window);
  size_t sends_posted = 0, recvs_posted = 0;

  const auto post_send = [&](size_t e) {
    const auto out = region(e / chunks, e % chunks, 0);
    sends[e] = comm.isend(right, info(e, out.size()), std::as_bytes(out));
    sends_posted = e + 1;
  };
  const auto post_recv = [&](size_t e) {
    const auto in = slot(e, region(e / chunks, e % chunks, 1).size());
    recvs[e % window] = comm.irecv(left, info(e, in.size()), std::as_writable_bytes(in));
    recvs_posted = e + 1;
  };

  size_t e = 0;
  try {
    for (size_t k = 0; k < chunks; ++k) post_send(k);
    for (size_t r = 0; r < std::min(window, exchanges); ++r) post_recv(r);
    for (; e < exchanges; ++e) {
      const size_t t = e / chunks, k = e % chunks;
      recvs[e % window].wait();
      const auto mine = region(t, k, 1);
      const auto in = slot(e, mine.size());
      if (t < static_cast<size_t>(n - 1)) {
        for (size_t i = 0; i < mine.size(); ++i) mine[i] += in[i];
      } else {
        sends[(t + 1 - n) * chunks + k].wait();  // the region's last reader before this write
        std::copy(in.begin(), in.end(), mine.begin());
      }
      if (e + window < exchanges) post_recv(e + window);
      if (t + 1 < steps) post_send(e + chunks);
    }
    for (auto& s : sends) s.wait();
  } catch (const TransportError&) {
    // Pending operations still name `data` and `scratch`: let each finish or fail (a failed or
    // closed peer fails them, a silent one within the timeout) before the buffers go away.
    for (size_t r = e; r < recvs_posted; ++r) {
      try {
        recvs[r % window].wait();
      } catch (const TransportError&) {
      }
    }
    for (size_t s = 0; s < sends_posted; ++s) {
      try {
        sends[s].wait();
      } catch (const TransportError&) {
      }
    }
    throw;
  }
}

}  // namespace tessel::transport
