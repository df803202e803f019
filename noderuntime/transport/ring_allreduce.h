// Ring all-reduce over any Communicator's point-to-point calls: the sum of an fp32 buffer over
// a group of ranks, every member ending with the same bits.
//
// The group, in the caller's ring order (e.g. the placement's best ring), has n members; the
// buffer is cut into n segments (sizes differ by at most one element, some empty when
// count < n) and every segment into K chunks: as few as chunk_bytes allows, but at least
// min_chunks while chunks stay at least min_chunk_bytes, so mid-sized buffers pipeline too (the
// same K on every member, since it depends on count, n and the options only).
// Reduce-scatter: in step t = 0..n-2 the member at ring position p sends segment (p - t) to its
// right neighbour and adds segment (p - t - 1), received from its left, into its own buffer;
// after n-1 steps it holds the full sum of segment (p + 1). All-gather: steps t = n-1..2n-3 send
// segment (p - t) on and copy the received segment (p - t - 1) in. The schedule is pipelined
// per chunk: chunk k of step t+1 goes out as soon as chunk k of step t is reduced, while up to
// `window` receives are posted ahead, so the links stay busy and a step's latency overlaps the
// next chunks.
//
// Determinism: segment j is summed once, in ring order starting at position j
// ((x_j + x_j+1) + x_j+2) + ..., by the members in turn, then copied bit for bit to all, so
// the same inputs and ring give bit-identical results on every member, run after run.
//
// Message keys: tag all-reduce, step = the collective's sequence number within its group,
// micro-batch = ring_group_id(ring), chunk = the exchange's index (t * K + k); so concurrent
// collectives of different groups or sequence numbers never take each other's messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "noderuntime/transport/communicator.h"

namespace tessel::transport {

// Must be the same on every member.
struct RingOptions {
  size_t chunk_bytes = 1 << 20;       // the largest message
  size_t min_chunk_bytes = 64 << 10;  // no smaller chunks just to reach min_chunks
  int min_chunks = 4;                 // chunks per segment worth pipelining
  int window = 8;                     // receives posted ahead of the one being reduced
  // Buffers of at most this many bytes are summed in one round instead (direct_all_reduce.h):
  // one latency instead of 2 (n - 1).
  size_t direct_max_bytes = 4096;
};

// A 32-bit FNV-1a hash of the ring order: the same on every member, different for different
// groups (up to hash collisions between groups that share two members).
uint32_t ring_group_id(const std::vector<int>& ring);

// Throws TransportError when the ring is invalid for `comm` (a rank out of range, listed
// twice, or this rank missing), naming the rank; when the options are invalid; or when a send
// or receive fails.
void ring_all_reduce(Communicator& comm, std::span<float> data, const std::vector<int>& ring,
                     uint64_t sequence, const RingOptions& options = {});

// Checks a group for `comm`: ranks in range, none twice, this rank among them.
void check_group(const Communicator& comm, const std::vector<int>& ring);
// Throws TransportError naming the options out of range.
void check_ring_options(const RingOptions& options);

}  // namespace tessel::transport
