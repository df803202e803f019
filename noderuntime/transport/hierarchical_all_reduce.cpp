#include "noderuntime/transport/hierarchical_all_reduce.h"

#include <algorithm>
#include <exception>
#include <map>
#include <set>

#include "noderuntime/transport/ring_allreduce.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

std::string list_text(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::string islands_text(const std::vector<std::vector<int>>& islands) {
  std::string out = "[";
  for (size_t i = 0; i < islands.size(); ++i) out += (i ? ", " : "") + list_text(islands[i]);
  return out + "]";
}

// Waits for every request (each must be over before its buffer goes away) and rethrows the first
// failure.
void wait_all(std::vector<Request>& requests) {
  std::exception_ptr failure;
  for (Request& r : requests) {
    try {
      r.wait();
    } catch (const TransportError&) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// Waits for the requests still pending after a failure, ignoring their errors.
void drain(std::vector<Request>& requests) {
  for (Request& r : requests) {
    try {
      r.wait();
    } catch (const TransportError&) {
    }
  }
}

Request completed() {
  auto c = std::make_shared<Completion>();
  c->complete();
  return Request(c);
}

// One pass of blocks around an island's ring, as member `p` of `island` sees it: its
// neighbours, block j of the buffer (j modulo the island's size), and the key of step t's
// message of the pass numbered `sequence`.
struct IslandRing {
  IslandRing(const std::vector<int>& island, int p, uint64_t sequence, float* data,
             std::span<const size_t> bounds)
      : n(static_cast<int>(island.size())),
        p(p),
        left(island[(p + n - 1) % n]),
        right(island[(p + 1) % n]),
        sequence(sequence),
        id(island_group_id(island)),
        data(data),
        bounds(bounds) {}

  std::span<float> block(int j) const {
    const int b = ((j % n) + n) % n;
    return {data + bounds[b], bounds[b + 1] - bounds[b]};
  }
  TensorInfo message(int t, size_t elems) const {
    return TensorInfo{Tag::kAllReduce,          sequence,    id,
                      static_cast<uint32_t>(t), DType::kF32, {static_cast<int64_t>(elems)}};
  }

  const int n, p, left, right;
  const uint64_t sequence;
  const uint32_t id;
  float* const data;
  const std::span<const size_t> bounds;
};

}  // namespace

void check_bounds(std::span<const size_t> bounds, int members, const std::string& where) {
  if (bounds.size() != static_cast<size_t>(members) + 1) {
    throw TransportError(where + ": bounds has " + std::to_string(bounds.size()) +
                         " offsets, need " + std::to_string(members + 1) + " (members + 1)");
  }
  if (bounds[0] != 0) {
    throw TransportError(where + ": bounds[0] is " + std::to_string(bounds[0]) + ", must be 0");
  }
  for (size_t j = 1; j < bounds.size(); ++j) {
    if (bounds[j] < bounds[j - 1]) {
      throw TransportError(where + ": bounds[" + std::to_string(j) +
                           "] = " + std::to_string(bounds[j]) + " is below bounds[" +
                           std::to_string(j - 1) + "] = " + std::to_string(bounds[j - 1]));
    }
  }
}

std::vector<size_t> even_bounds(size_t count, size_t parts) {
  if (parts == 0) throw TransportError("even_bounds: parts must be at least 1");
  std::vector<size_t> bounds(parts + 1);
  for (size_t k = 0; k <= parts; ++k) bounds[k] = k * (count / parts) + std::min(k, count % parts);
  return bounds;
}

uint32_t island_group_id(const std::vector<int>& island) {
  std::vector<int> marked = island;
  marked.push_back(-1);
  return ring_group_id(marked);
}

// ---- CommunicatorIslandCollective ------------------------------------------------------------

CommunicatorIslandCollective::CommunicatorIslandCollective(Communicator& comm,
                                                           std::vector<int> island)
    : comm_(comm), island_(std::move(island)) {
  try {
    check_group(comm_, island_);
  } catch (const TransportError& e) {
    throw TransportError(std::string("island collective: ") + e.what());
  }
  position_ =
      static_cast<int>(std::find(island_.begin(), island_.end(), comm_.rank()) - island_.begin());
}

std::string CommunicatorIslandCollective::where(const char* operation) const {
  return std::string(operation) + " in island " + list_text(island_) + " at rank " +
         std::to_string(comm_.rank());
}

Request CommunicatorIslandCollective::reduce_scatter(float* data, std::span<const size_t> bounds) {
  const std::string at = where("reduce-scatter");
  check_bounds(bounds, size(), at);
  if (size() == 1) return completed();
  const IslandRing ring(island_, position_, sequence_++, data, bounds);
  const int n = ring.n, p = ring.p;
  size_t longest = 0;
  for (int j = 0; j < n; ++j) longest = std::max(longest, bounds[j + 1] - bounds[j]);
  std::vector<float> scratch(longest);
  // Step t sends block p - t - 1 and adds block p - t - 2 from the left, so that after n - 1
  // steps member p holds the island's sum of block p, summed in ring order from member p + 1.
  std::vector<Request> sends;
  Request recv;
  try {
    for (int t = 0; t + 1 < n; ++t) {
      const auto out = ring.block(p - t - 1);
      const auto mine = ring.block(p - t - 2);
      const auto in = std::span(scratch).first(mine.size());
      sends.push_back(comm_.isend(ring.right, ring.message(t, out.size()), std::as_bytes(out)));
      recv = comm_.irecv(ring.left, ring.message(t, in.size()), std::as_writable_bytes(in));
      recv.wait();
      for (size_t i = 0; i < mine.size(); ++i) mine[i] += in[i];
    }
    wait_all(sends);
  } catch (const TransportError& e) {
    std::vector<Request> pending = std::move(sends);
    pending.push_back(recv);
    drain(pending);
    throw TransportError(at + ": " + e.what());
  }
  return completed();
}

Request CommunicatorIslandCollective::all_gather(float* data, std::span<const size_t> bounds) {
  const std::string at = where("all-gather");
  check_bounds(bounds, size(), at);
  if (size() == 1) return completed();
  const IslandRing ring(island_, position_, sequence_++, data, bounds);
  const int n = ring.n, p = ring.p;
  // Step t sends block p - t (its own first, then what came from the left) and receives block
  // p - t - 1 straight into place: every block is a copy of its owner's, bit for bit.
  std::vector<Request> recvs, sends;
  try {
    for (int t = 0; t + 1 < n; ++t) {
      const auto in = ring.block(p - t - 1);
      recvs.push_back(
          comm_.irecv(ring.left, ring.message(t, in.size()), std::as_writable_bytes(in)));
    }
    for (int t = 0; t + 1 < n; ++t) {
      if (t > 0) recvs[t - 1].wait();
      const auto out = ring.block(p - t);
      sends.push_back(comm_.isend(ring.right, ring.message(t, out.size()), std::as_bytes(out)));
    }
    wait_all(recvs);
    wait_all(sends);
  } catch (const TransportError& e) {
    drain(recvs);
    drain(sends);
    throw TransportError(at + ": " + e.what());
  }
  return completed();
}

Request CommunicatorIslandCollective::all_reduce(float* data, size_t count) {
  return comm_.iall_reduce(data, count, DType::kF32, island_);
}

// ---- HierarchicalGroup -----------------------------------------------------------------------

HierarchicalGroup::HierarchicalGroup(std::vector<int> group, std::vector<std::vector<int>> islands,
                                     int rank)
    : group_(std::move(group)), islands_(std::move(islands)), rank_(rank) {
  const std::string where = "hierarchical all-reduce: group " + list_text(group_) + ", islands " +
                            islands_text(islands_) + ": ";
  if (islands_.empty()) throw TransportError(where + "no islands");
  std::set<int> members;
  for (int r : group_) {
    if (r < 0) throw TransportError(where + "group rank " + std::to_string(r) + " is negative");
    if (!members.insert(r).second) {
      throw TransportError(where + "group lists rank " + std::to_string(r) + " twice");
    }
  }
  std::map<int, size_t> island_of;
  for (size_t i = 0; i < islands_.size(); ++i) {
    const std::string island = "island " + std::to_string(i) + " " + list_text(islands_[i]);
    if (islands_[i].empty())
      throw TransportError(where + "island " + std::to_string(i) + " is empty");
    for (int r : islands_[i]) {
      if (!members.count(r)) {
        throw TransportError(where + island + ": rank " + std::to_string(r) +
                             " is not in the group");
      }
      const auto [it, fresh] = island_of.emplace(r, i);
      if (!fresh) {
        throw TransportError(where + "rank " + std::to_string(r) +
                             (it->second == i ? " is listed twice in " + island
                                              : " is in island " + std::to_string(it->second) +
                                                    " and island " + std::to_string(i)));
      }
    }
  }
  for (int r : group_) {
    if (!island_of.count(r)) {
      throw TransportError(where + "group member " + std::to_string(r) + " is in no island");
    }
  }
  const auto mine = island_of.find(rank_);
  if (mine == island_of.end()) {
    throw TransportError(where + "rank " + std::to_string(rank_) +
                         " (this rank) is not in the group");
  }
  island_ = static_cast<int>(mine->second);
  const auto& members_here = islands_[island_];
  position_ = static_cast<int>(std::find(members_here.begin(), members_here.end(), rank_) -
                               members_here.begin());
  for (const auto& island : islands_) shards_ = std::max(shards_, static_cast<int>(island.size()));
}

std::pair<int, int> HierarchicalGroup::owned_shards(int island, int position) const {
  const long s = static_cast<long>(islands_.at(island).size());
  const long S = shards_;
  return {static_cast<int>(position * S / s), static_cast<int>((position + 1) * S / s)};
}

int HierarchicalGroup::owner(int island, int shard) const {
  const int s = static_cast<int>(islands_.at(island).size());
  for (int j = 0; j < s; ++j) {
    const auto [first, last] = owned_shards(island, j);
    if (shard >= first && shard < last) return j;
  }
  throw TransportError("hierarchical all-reduce: shard " + std::to_string(shard) +
                       " out of range [0, " + std::to_string(shards_) + ")");
}

std::vector<int> HierarchicalGroup::ring(int shard) const {
  std::vector<int> out;
  for (size_t i = 0; i < islands_.size(); ++i) {
    out.push_back(islands_[i][owner(static_cast<int>(i), shard)]);
  }
  return out;
}

HierarchicalGroup::Plan HierarchicalGroup::plan(size_t count) const {
  Plan plan;
  const std::vector<size_t> shard_bounds = even_bounds(count, static_cast<size_t>(shards_));
  const int s = static_cast<int>(island_members().size());
  for (int j = 0; j < s; ++j)
    plan.inner_bounds.push_back(shard_bounds[owned_shards(island_, j).first]);
  plan.inner_bounds.push_back(count);
  const auto [first, last] = owned_shards(island_, position_);
  for (int k = first; k < last; ++k) {
    const size_t begin = shard_bounds[k], end = shard_bounds[k + 1];
    std::vector<int> shard_ring = ring(k);
    if (shard_ring.size() == 1 || begin == end) continue;
    plan.cross.push_back({begin, end, std::move(shard_ring)});
  }
  return plan;
}

// ---- hierarchical_all_reduce -----------------------------------------------------------------

void hierarchical_all_reduce(float* data, size_t count, const HierarchicalGroup& group,
                             IslandCollective& inner, CrossIslandAllReduce& cross) {
  const std::string island =
      "island " + std::to_string(group.island()) + " " + list_text(group.island_members());
  const std::string where =
      "hierarchical all-reduce at rank " + std::to_string(group.rank()) + ": ";
  const int island_size = static_cast<int>(group.island_members().size());
  if (inner.size() != island_size || inner.position() != group.position()) {
    throw TransportError(where + "the inner collective has " + std::to_string(inner.size()) +
                         " members with this rank at position " + std::to_string(inner.position()) +
                         ", but " + island + " has " + std::to_string(island_size) +
                         " with it at position " + std::to_string(group.position()));
  }
  const auto phase = [&](const std::string& what, const auto& body) {
    try {
      body();
    } catch (const TransportError& e) {
      throw TransportError(where + what + ": " + e.what());
    }
  };

  if (group.islands().size() == 1) {
    phase("all-reduce in " + island, [&] { inner.all_reduce(data, count).wait(); });
    return;
  }
  const HierarchicalGroup::Plan plan = group.plan(count);
  phase("reduce-scatter in " + island,
        [&] { inner.reduce_scatter(data, plan.inner_bounds).wait(); });

  std::vector<Request> started;
  std::string failed_step;
  try {
    for (const auto& step : plan.cross) {
      failed_step = "all-reduce across islands of elements [" + std::to_string(step.begin) + ", " +
                    std::to_string(step.end) + ") over ring " + list_text(step.ring);
      started.push_back(cross.all_reduce(data + step.begin, step.end - step.begin, step.ring));
    }
    for (size_t i = 0; i < started.size(); ++i) {
      const auto& step = plan.cross[i];
      failed_step = "all-reduce across islands of elements [" + std::to_string(step.begin) + ", " +
                    std::to_string(step.end) + ") over ring " + list_text(step.ring);
      started[i].wait();
    }
  } catch (const TransportError& e) {
    drain(started);
    throw TransportError(where + failed_step + ": " + e.what());
  }

  phase("all-gather in " + island, [&] { inner.all_gather(data, plan.inner_bounds).wait(); });
}

}  // namespace tessel::transport
