// Hierarchical all-reduce: the sum of an fp32 buffer over a data-parallel group whose members
// are partitioned into islands (the GPUs of one node or one cluster, which NCCL reaches), in
// three phases:
//   1. reduce-scatter inside every island: each island member ends with its island's sum of the
//      shards it owns;
//   2. all-reduce of every shard across the islands, over a ring made of the shard's owner in
//      every island (one member per island, in island order);
//   3. all-gather inside every island: every member ends with every shard's total.
// The traffic between islands is the buffer once per island (split among its members), not once
// per member, and every member carries a share of it, so the slow links carry as little as a flat
// ring over the same group would across them, in parallel rings.
//
// Two small interfaces stand for the two levels, so the TCP ring can serve both (tests, CPU
// stages) and NCCL the inner one on GPUs (nccl_communicator.h):
//   IslandCollective      reduce_scatter / all_gather / all_reduce inside one island;
//   CrossIslandAllReduce  the all-reduce of one shard over a ring of one member per island.
// Buffers are in the memory of the inner level (host memory for the TCP stand-in, device memory
// for NCCL); a cross-island implementation moves them where it needs them.
//
// Shards: the buffer is cut into S shards, S = the size of the largest island; shard k covers
// elements [k * count / S ...) like the ring's segments (sizes differ by at most one element, the
// first count % S shards one longer; empty when count < S). Member j of an island of size s owns
// the contiguous shards [floor(j * S / s), floor((j + 1) * S / s)): in an island of the largest
// size, member j owns shard j; in a smaller island some members own several shards (an island of
// one member owns them all), so every member owns at least one and the shards a member owns
// are one contiguous block, which the inner level reduce-scatters and all-gathers in one call
// each. The cross-island ring of shard k lists, island by island, the member of that island
// that owns shard k (no two shards share a ring, since the largest island gives each its own
// owner; a member of a smaller island takes part in one ring per shard it owns). Empty shards
// skip the cross phase. With one island the whole operation is the inner all_reduce.
//
// Determinism: each element's total is computed once, by the cross-island all-reduce of its
// shard, from the island sums of its owners (each computed once by the inner reduce-scatter),
// and then copied bit for bit: the cross-island all-reduce gives its members the same bits (the
// TCP ring sums every segment in one fixed ring order), and the all-gather copies them to the
// rest of each island. So every member ends with bit-identical results; with the TCP ring at
// both levels the same inputs also give the same bits run after run.
//
// Ordering: every member of the group calls hierarchical_all_reduce for the same buffers in the
// same order (like any collective). A member's cross-island all-reduces are all started before
// any is waited on, in ascending shard order, so rings of different shards run side by side.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "noderuntime/transport/communicator.h"
#include "noderuntime/transport/request.h"

namespace tessel::transport {

// The collectives inside one island, over its members in a fixed order (position 0..size-1).
// Every member issues the same calls in the same order. A call may do its work before it returns
// (the TCP stand-in does) or later (NCCL, on its stream); its failures are thrown as
// TransportError either from the call or from the returned Request's wait(). The buffer must stay
// valid and untouched until the request completes.
class IslandCollective {
 public:
  virtual ~IslandCollective() = default;
  virtual int size() const = 0;
  virtual int position() const = 0;
  // `bounds` has size() + 1 non-decreasing element offsets from 0; block j is
  // [bounds[j], bounds[j + 1]). Sums data[0, bounds.back()) over the island: member j ends with
  // the island's sum in block j; the other blocks of its buffer are left unspecified.
  virtual Request reduce_scatter(float* data, std::span<const size_t> bounds) = 0;
  // Member j's block j is copied, bit for bit, into block j of every member.
  virtual Request all_gather(float* data, std::span<const size_t> bounds) = 0;
  // Sums `count` elements in place over the island; every member ends with the same bits.
  virtual Request all_reduce(float* data, size_t count) = 0;
};

// The all-reduce of one shard across islands.
class CrossIslandAllReduce {
 public:
  virtual ~CrossIslandAllReduce() = default;
  // Sums `count` elements at `data` in place over `ring` (global ranks, one member of each
  // island, in island order, this rank among them); every member of the ring ends with the same
  // bits. The members of a ring issue its calls in the same order.
  virtual Request all_reduce(float* data, size_t count, const std::vector<int>& ring) = 0;
};

// Throws TransportError (prefixed by `where`) unless `bounds` has `members` + 1 non-decreasing
// offsets starting at 0, naming the offset at fault.
void check_bounds(std::span<const size_t> bounds, int members, const std::string& where);
// `parts` + 1 offsets cutting `count` elements into `parts` near-equal parts, the first
// count % parts one element longer (parts >= 1).
std::vector<size_t> even_bounds(size_t count, size_t parts);

// The TCP stand-in for an island: ring reduce-scatter and all-gather over any Communicator's
// point-to-point calls (host buffers), and the communicator's own all-reduce for all_reduce.
// Both run on the calling thread and return a completed Request, or throw TransportError naming
// the island and the peer. Messages: tag all-reduce, step = this object's call sequence number,
// micro-batch = island_group_id(island), chunk = the ring step; the same island may be used by
// one CommunicatorIslandCollective per member at a time.
class CommunicatorIslandCollective final : public IslandCollective {
 public:
  // Throws TransportError for an island invalid for `comm` (see check_group).
  CommunicatorIslandCollective(Communicator& comm, std::vector<int> island);
  int size() const override { return static_cast<int>(island_.size()); }
  int position() const override { return position_; }
  Request reduce_scatter(float* data, std::span<const size_t> bounds) override;
  Request all_gather(float* data, std::span<const size_t> bounds) override;
  Request all_reduce(float* data, size_t count) override;

 private:
  std::string where(const char* operation) const;

  Communicator& comm_;
  std::vector<int> island_;
  int position_ = 0;
  uint64_t sequence_ = 0;
};

// The id that keys an island's reduce-scatter and all-gather messages: different from
// ring_group_id of any group (no group lists rank -1), so they never meet the communicator's
// own all-reduces of the same members.
uint32_t island_group_id(const std::vector<int>& island);

// The cross-island all-reduce over a Communicator's iall_reduce (the TCP ring), host buffers.
class CommunicatorCrossAllReduce final : public CrossIslandAllReduce {
 public:
  explicit CommunicatorCrossAllReduce(Communicator& comm) : comm_(comm) {}
  Request all_reduce(float* data, size_t count, const std::vector<int>& ring) override {
    return comm_.iall_reduce(data, count, DType::kF32, ring);
  }

 private:
  Communicator& comm_;
};

// A data-parallel group split into islands, seen from one member: validated once, then used for
// every buffer.
class HierarchicalGroup {
 public:
  // `group` lists the data-parallel group's global ranks; `islands` partitions them. Throws
  // TransportError naming the fault: no island, an empty island, a rank in two islands (or twice
  // in one), a group member in no island, an island member not in the group, a negative rank,
  // or `rank` not in the group.
  HierarchicalGroup(std::vector<int> group, std::vector<std::vector<int>> islands, int rank);

  int rank() const { return rank_; }
  int island() const { return island_; }      // index of this rank's island
  int position() const { return position_; }  // this rank's index in its island
  const std::vector<int>& island_members() const { return islands_[island_]; }
  const std::vector<std::vector<int>>& islands() const { return islands_; }
  int shards() const { return shards_; }  // S, the largest island's size
  // The shards member `position` of island `island` owns: [first, second).
  std::pair<int, int> owned_shards(int island, int position) const;
  // The member of island `island` (its index there) that owns shard k.
  int owner(int island, int shard) const;
  // The cross-island ring of shard k: the owner's global rank in every island, in island order.
  std::vector<int> ring(int shard) const;

  struct CrossStep {
    size_t begin = 0, end = 0;  // elements
    std::vector<int> ring;
  };
  struct Plan {
    std::vector<size_t> inner_bounds;  // island size + 1 offsets: member j's owned shards
    std::vector<CrossStep> cross;      // this member's cross-island all-reduces, in order
  };
  // This member's plan for a buffer of `count` elements.
  Plan plan(size_t count) const;

 private:
  std::vector<int> group_;
  std::vector<std::vector<int>> islands_;
  int rank_ = 0, island_ = 0, position_ = 0, shards_ = 1;
};

// Sums `count` elements at `data` in place over the group (see the header comment); blocks until
// done. `inner` must be this member's island (its size and position are checked against
// `group`). Throws TransportError naming the phase, the island or ring, and the peer's error; the
// buffer is not in use by any operation once it returns or throws.
void hierarchical_all_reduce(float* data, size_t count, const HierarchicalGroup& group,
                             IslandCollective& inner, CrossIslandAllReduce& cross);

}  // namespace tessel::transport
