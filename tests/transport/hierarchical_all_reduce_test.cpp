// The hierarchical all-reduce with the TCP ring standing in for both levels (real sockets, one
// thread per rank): exact sums of integer-valued floats and bit-identical results on every member
// for 2 islands of 2, islands of sizes 1/2/3, one island (the inner all-reduce alone) and islands
// of one (the cross-island ring alone), counts from 0 to over a million; the shard rule; every
// invalid layout named; a member that vanishes fails every other member with an error naming a
// peer, and nothing hangs.
#include "noderuntime/transport/hierarchical_all_reduce.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>

#include "local_mesh.h"

namespace tessel::transport {
namespace {

using namespace std::chrono_literals;
using testing::Comms;
using testing::connect_local;
using testing::Contains;
using testing::integer_input;
using testing::on_every_rank;
using testing::random_input;
using testing::same_bits;

using Islands = std::vector<std::vector<int>>;

std::vector<int> flatten(const Islands& islands) {
  std::vector<int> out;
  for (const auto& island : islands) out.insert(out.end(), island.begin(), island.end());
  return out;
}

// Counts the calls of each level, passing them on.
struct CountingInner final : IslandCollective {
  explicit CountingInner(IslandCollective& inner) : inner(inner) {}
  int size() const override { return inner.size(); }
  int position() const override { return inner.position(); }
  Request reduce_scatter(float* data, std::span<const size_t> bounds) override {
    ++reduce_scatters;
    return inner.reduce_scatter(data, bounds);
  }
  Request all_gather(float* data, std::span<const size_t> bounds) override {
    ++all_gathers;
    return inner.all_gather(data, bounds);
  }
  Request all_reduce(float* data, size_t count) override {
    ++all_reduces;
    return inner.all_reduce(data, count);
  }
  IslandCollective& inner;
  int reduce_scatters = 0, all_gathers = 0, all_reduces = 0;
};

struct CountingCross final : CrossIslandAllReduce {
  explicit CountingCross(CrossIslandAllReduce& cross) : cross(cross) {}
  Request all_reduce(float* data, size_t count, const std::vector<int>& ring) override {
    rings.push_back(ring);
    return cross.all_reduce(data, count, ring);
  }
  CrossIslandAllReduce& cross;
  std::vector<std::vector<int>> rings;
};

struct Calls {
  int reduce_scatters = 0, all_gathers = 0, all_reduces = 0;
  std::vector<std::vector<int>> rings;
};

// Runs the hierarchical all-reduce of input(rank, count) on every member; returns each rank's
// result (indexed by global rank) and, when `calls` is given, what each rank called.
std::vector<std::vector<float>> reduce_on_all(Comms& comms, const Islands& islands, size_t count,
                                              std::vector<float> (*input)(int, size_t),
                                              std::vector<Calls>* calls = nullptr) {
  const std::vector<int> group = flatten(islands);
  std::vector<std::vector<float>> results(comms.size());
  if (calls) calls->assign(comms.size(), {});
  for (int r : group) results[r] = input(r, count);
  on_every_rank(static_cast<int>(comms.size()), [&](int r) {
    if (std::find(group.begin(), group.end(), r) == group.end()) return;
    const HierarchicalGroup layout(group, islands, r);
    CommunicatorIslandCollective tcp_inner(*comms[r], layout.island_members());
    CommunicatorCrossAllReduce tcp_cross(*comms[r]);
    CountingInner inner(tcp_inner);
    CountingCross cross(tcp_cross);
    hierarchical_all_reduce(results[r].data(), count, layout, inner, cross);
    if (calls)
      (*calls)[r] = {inner.reduce_scatters, inner.all_gathers, inner.all_reduces, cross.rings};
  });
  return results;
}

std::vector<float> serial_sum(const std::vector<int>& group, size_t count,
                              std::vector<float> (*input)(int, size_t)) {
  std::vector<float> sum(count, 0.f);
  for (int r : group) {
    const auto in = input(r, count);
    for (size_t i = 0; i < count; ++i) sum[i] += in[i];
  }
  return sum;
}

// 0, 1, fewer than the shards, primes, and over a million elements (4 MB per rank).
const std::vector<size_t> kCounts = {0, 1, 2, 3, 5, 101, 65537, 1'000'003};

void expect_exact_sums(const Islands& islands, int world) {
  Comms comms = connect_local(world);
  for (size_t count : kCounts) {
    const auto results = reduce_on_all(comms, islands, count, integer_input);
    const auto expected = serial_sum(flatten(islands), count, integer_input);
    for (int r : flatten(islands)) {
      ASSERT_TRUE(same_bits(results[r], expected)) << "count " << count << " rank " << r;
    }
  }
}

TEST(HierarchicalAllReduce, TwoIslandsOfTwoGiveTheExactSumOnEveryMember) {
  expect_exact_sums({{0, 1}, {2, 3}}, 4);
}

TEST(HierarchicalAllReduce, IslandsOfSizesOneTwoAndThreeGiveTheExactSumOnEveryMember) {
  // Global ranks in no particular order inside and across islands.
  expect_exact_sums({{4}, {0, 5}, {3, 1, 2}}, 6);
}

TEST(HierarchicalAllReduce, OneIslandIsTheInnerAllReduceAlone) {
  const Islands islands = {{2, 0, 1}};
  Comms comms = connect_local(3);
  for (size_t count : {size_t{1}, size_t{101}, size_t{65537}}) {
    std::vector<Calls> calls;
    const auto results = reduce_on_all(comms, islands, count, integer_input, &calls);
    const auto expected = serial_sum({0, 1, 2}, count, integer_input);
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(same_bits(results[r], expected)) << "count " << count << " rank " << r;
      EXPECT_EQ(calls[r].all_reduces, 1);
      EXPECT_EQ(calls[r].reduce_scatters, 0);
      EXPECT_EQ(calls[r].all_gathers, 0);
      EXPECT_TRUE(calls[r].rings.empty());
    }
  }
}

TEST(HierarchicalAllReduce, IslandsOfOneAreTheCrossIslandRingAlone) {
  const Islands islands = {{1}, {0}, {2}};
  Comms comms = connect_local(3);
  std::vector<Calls> calls;
  const auto results = reduce_on_all(comms, islands, 1001, integer_input, &calls);
  const auto expected = serial_sum({0, 1, 2}, 1001, integer_input);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(same_bits(results[r], expected)) << r;
    // One shard, so one cross-island all-reduce over the whole buffer, in island order.
    EXPECT_EQ(calls[r].rings, (std::vector<std::vector<int>>{{1, 0, 2}})) << r;
  }
}

TEST(HierarchicalAllReduce, UnequalIslandsCrossOverOneRingPerShard) {
  const Islands islands = {{4}, {0, 5}, {3, 1, 2}};
  Comms comms = connect_local(6);
  std::vector<Calls> calls;
  const auto results = reduce_on_all(comms, islands, 99, integer_input, &calls);
  const auto expected = serial_sum(flatten(islands), 99, integer_input);
  for (int r = 0; r < 6; ++r) ASSERT_TRUE(same_bits(results[r], expected)) << r;
  // 3 shards (the largest island's size). Island [0, 5]: member 0 owns shard 0, member 5 owns
  // shards 1 and 2; island [4] owns all three; island [3, 1, 2]: member j owns shard j.
  EXPECT_EQ(calls[4].rings, (std::vector<std::vector<int>>{{4, 0, 3}, {4, 5, 1}, {4, 5, 2}}));
  EXPECT_EQ(calls[0].rings, (std::vector<std::vector<int>>{{4, 0, 3}}));
  EXPECT_EQ(calls[5].rings, (std::vector<std::vector<int>>{{4, 5, 1}, {4, 5, 2}}));
  EXPECT_EQ(calls[3].rings, (std::vector<std::vector<int>>{{4, 0, 3}}));
  EXPECT_EQ(calls[1].rings, (std::vector<std::vector<int>>{{4, 5, 1}}));
  EXPECT_EQ(calls[2].rings, (std::vector<std::vector<int>>{{4, 5, 2}}));
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(calls[r].reduce_scatters, 1) << r;
    EXPECT_EQ(calls[r].all_gathers, 1) << r;
    EXPECT_EQ(calls[r].all_reduces, 0) << r;
  }
}

TEST(HierarchicalAllReduce, RandomInputsEndWithTheSameBitsOnEveryMemberRunAfterRun) {
  const Islands islands = {{4}, {0, 5}, {3, 1, 2}};
  const size_t count = 100'003;
  Comms comms = connect_local(6);
  const auto first = reduce_on_all(comms, islands, count, random_input);
  const auto second = reduce_on_all(comms, islands, count, random_input);
  std::vector<double> serial(count, 0.0);
  for (int r = 0; r < 6; ++r) {
    const auto in = random_input(r, count);
    for (size_t i = 0; i < count; ++i) serial[i] += in[i];
  }
  for (int r = 0; r < 6; ++r) {
    ASSERT_TRUE(same_bits(first[r], first[0])) << "rank " << r << " differs from rank 0";
    ASSERT_TRUE(same_bits(second[r], first[0])) << "rank " << r << " differs between runs";
  }
  for (size_t i = 0; i < count; ++i) {
    ASSERT_NEAR(first[0][i], serial[i], 1e-5 * (1 + std::fabs(serial[i]))) << i;
  }
}

TEST(HierarchicalAllReduce, ShardRuleAndPlans) {
  const HierarchicalGroup g({0, 1, 2, 3, 4, 5}, {{4}, {0, 5}, {3, 1, 2}}, 5);
  EXPECT_EQ(g.shards(), 3);
  EXPECT_EQ(g.island(), 1);
  EXPECT_EQ(g.position(), 1);
  EXPECT_EQ(g.owned_shards(0, 0), std::make_pair(0, 3));
  EXPECT_EQ(g.owned_shards(1, 0), std::make_pair(0, 1));
  EXPECT_EQ(g.owned_shards(1, 1), std::make_pair(1, 3));
  for (int j = 0; j < 3; ++j) EXPECT_EQ(g.owned_shards(2, j), std::make_pair(j, j + 1));
  EXPECT_EQ(g.ring(0), (std::vector<int>{4, 0, 3}));
  EXPECT_EQ(g.ring(2), (std::vector<int>{4, 5, 2}));
  // 10 elements in 3 shards: [0, 4), [4, 7), [7, 10); rank 5 owns shards 1 and 2.
  const auto plan = g.plan(10);
  EXPECT_EQ(plan.inner_bounds, (std::vector<size_t>{0, 4, 10}));
  ASSERT_EQ(plan.cross.size(), 2u);
  EXPECT_EQ(plan.cross[0].begin, 4u);
  EXPECT_EQ(plan.cross[0].end, 7u);
  EXPECT_EQ(plan.cross[1].begin, 7u);
  EXPECT_EQ(plan.cross[1].end, 10u);
  // Fewer elements than shards: empty shards are skipped.
  const auto tiny = g.plan(1);
  EXPECT_EQ(tiny.inner_bounds, (std::vector<size_t>{0, 1, 1}));
  EXPECT_TRUE(tiny.cross.empty());  // rank 5 owns only empty shards
  // Islands of two and four: 4 shards; rank 0 owns shards 0 and 1, one ring each.
  const HierarchicalGroup h({0, 1, 2, 3, 4, 5}, {{0, 1}, {2, 3, 4, 5}}, 0);
  const auto two = h.plan(8);
  EXPECT_EQ(two.inner_bounds, (std::vector<size_t>{0, 4, 8}));
  ASSERT_EQ(two.cross.size(), 2u);
  EXPECT_EQ(two.cross[0].ring, (std::vector<int>{0, 2}));
  EXPECT_EQ(two.cross[1].ring, (std::vector<int>{0, 3}));
  EXPECT_EQ(two.cross[1].begin, 2u);
  EXPECT_EQ(two.cross[1].end, 4u);
  const HierarchicalGroup ones({0, 1}, {{0}, {1}}, 1);
  const auto whole = ones.plan(10);
  ASSERT_EQ(whole.cross.size(), 1u);
  EXPECT_EQ(whole.cross[0].begin, 0u);
  EXPECT_EQ(whole.cross[0].end, 10u);
  EXPECT_EQ(even_bounds(10, 3), (std::vector<size_t>{0, 4, 7, 10}));
  EXPECT_EQ(even_bounds(2, 3), (std::vector<size_t>{0, 1, 2, 2}));
}

std::string layout_error(const std::vector<int>& group, const Islands& islands, int rank) {
  try {
    HierarchicalGroup g(group, islands, rank);
  } catch (const TransportError& e) {
    return e.what();
  }
  return "";
}

TEST(HierarchicalAllReduce, RejectsBadLayoutsNamingTheFault) {
  EXPECT_TRUE(Contains(layout_error({0, 1}, {}, 0), "no islands"));
  EXPECT_TRUE(Contains(layout_error({0, 1}, {{0, 1}, {}}, 0), "island 1 is empty"));
  EXPECT_TRUE(
      Contains(layout_error({0, 1, 2}, {{0, 1}, {1, 2}}, 0), "rank 1 is in island 0 and island 1"));
  EXPECT_TRUE(Contains(layout_error({0, 1}, {{0, 1, 0}}, 0), "rank 0 is listed twice in island 0"));
  EXPECT_TRUE(Contains(layout_error({0, 1, 2}, {{0}, {1}}, 0), "group member 2 is in no island"));
  EXPECT_TRUE(Contains(layout_error({0, 1}, {{0}, {1, 7}}, 0),
                       "island 1 [1, 7]: rank 7 is not in the group"));
  EXPECT_TRUE(Contains(layout_error({0, 1, 1}, {{0}, {1}}, 0), "group lists rank 1 twice"));
  EXPECT_TRUE(Contains(layout_error({0, -1}, {{0}, {-1}}, 0), "group rank -1 is negative"));
  EXPECT_TRUE(
      Contains(layout_error({0, 1}, {{0}, {1}}, 3), "rank 3 (this rank) is not in the group"));
  EXPECT_TRUE(Contains(layout_error({0, 1}, {{0}, {1}}, 3),
                       "hierarchical all-reduce: group [0, 1], islands [[0], [1]]: "));
}

TEST(HierarchicalAllReduce, RejectsAnInnerCollectiveOfAnotherIsland) {
  Comms comms = connect_local(3);
  const HierarchicalGroup layout({0, 1, 2}, {{0}, {1, 2}}, 0);
  CommunicatorIslandCollective wrong(*comms[0], {0, 1});  // not rank 0's island
  CommunicatorCrossAllReduce cross(*comms[0]);
  std::vector<float> data(4);
  try {
    hierarchical_all_reduce(data.data(), data.size(), layout, wrong, cross);
    ADD_FAILURE() << "no error";
  } catch (const TransportError& e) {
    EXPECT_TRUE(Contains(e.what(), "the inner collective has 2 members")) << e.what();
    EXPECT_TRUE(Contains(e.what(), "island 0 [0] has 1")) << e.what();
  }
}

TEST(HierarchicalAllReduce, TheIslandCollectiveRejectsBadBounds) {
  Comms comms = connect_local(2);
  CommunicatorIslandCollective island(*comms[0], {0, 1});
  std::vector<float> data(8);
  const auto error = [&](std::vector<size_t> bounds) -> std::string {
    try {
      island.reduce_scatter(data.data(), bounds).wait();
    } catch (const TransportError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(Contains(error({0, 4}), "bounds has 2 offsets, need 3 (members + 1)"));
  EXPECT_TRUE(Contains(error({1, 4, 8}), "bounds[0] is 1, must be 0"));
  EXPECT_TRUE(Contains(error({0, 5, 4}), "bounds[2] = 4 is below bounds[1] = 5"));
  EXPECT_TRUE(Contains(error({0, 5, 4}), "reduce-scatter in island [0, 1] at rank 0"));
  try {
    CommunicatorIslandCollective outside(*comms[0], {1});
    ADD_FAILURE() << "no error";
  } catch (const TransportError& e) {
    EXPECT_TRUE(Contains(e.what(),
                         "island collective: all-reduce group [1]: does not include "
                         "this rank (0)"))
        << e.what();
  }
}

// Rank 3 vanishes (closes its connections) instead of taking part. Each member that fails closes
// its own communicator, as a stage process that exits would, so the failure reaches every member
// as a closed connection (or, at worst, the io timeout); nothing waits forever.
TEST(HierarchicalAllReduce, AMemberThatVanishesFailsEveryOtherMemberNamingAPeer) {
  const Islands islands = {{0, 1}, {2, 3}};
  Comms comms = connect_local(4, [](TcpOptions& o) { o.io_timeout = 5s; });
  std::vector<std::string> errors(4);
  on_every_rank(4, [&](int r) {
    if (r == 3) {
      comms[3]->close();
      return;
    }
    std::vector<float> data = integer_input(r, 10'007);
    try {
      const HierarchicalGroup layout({0, 1, 2, 3}, islands, r);
      CommunicatorIslandCollective inner(*comms[r], layout.island_members());
      CommunicatorCrossAllReduce cross(*comms[r]);
      hierarchical_all_reduce(data.data(), data.size(), layout, inner, cross);
    } catch (const TransportError& e) {
      errors[r] = e.what();
    }
    comms[r]->close();
  });
  // Rank 2 shares its island with rank 3: its reduce-scatter fails on the closed connection.
  EXPECT_TRUE(Contains(errors[2],
                       "hierarchical all-reduce at rank 2: reduce-scatter in island 1 "
                       "[2, 3]"))
      << errors[2];
  EXPECT_TRUE(Contains(errors[2], "rank 3 (127.0.0.1:")) << errors[2];
  EXPECT_TRUE(Contains(errors[2], "test rank 3)")) << errors[2];
  // Ranks 0 and 1 fail across islands, on rank 2 (gone after its failure) or rank 3.
  for (int r : {0, 1}) {
    EXPECT_TRUE(Contains(errors[r], "hierarchical all-reduce at rank " + std::to_string(r)))
        << errors[r];
    EXPECT_TRUE(Contains(errors[r], "(127.0.0.1:")) << errors[r];
    const bool names_a_peer = Contains(errors[r], "test rank 2)") ||
                              Contains(errors[r], "test rank 3)") ||
                              Contains(errors[r], "test rank " + std::to_string(1 - r) + ")");
    EXPECT_TRUE(names_a_peer) << errors[r];
  }
}

// Rank 3 stays connected but silent, and members that fail stay silent too (a hung process rather
// than an exiting one): every other member still fails, after the io timeout, naming the peer it
// waited for.
TEST(HierarchicalAllReduce, ASilentMemberFailsEveryOtherMemberAfterTheTimeoutNamingThePeer) {
  const Islands islands = {{0, 1}, {2, 3}};
  Comms comms = connect_local(4, [](TcpOptions& o) { o.io_timeout = 3s; });
  std::vector<std::string> errors(4);
  on_every_rank(4, [&](int r) {
    if (r == 3) return;
    std::vector<float> data = integer_input(r, 10'007);
    try {
      const HierarchicalGroup layout({0, 1, 2, 3}, islands, r);
      CommunicatorIslandCollective inner(*comms[r], layout.island_members());
      CommunicatorCrossAllReduce cross(*comms[r]);
      hierarchical_all_reduce(data.data(), data.size(), layout, inner, cross);
    } catch (const TransportError& e) {
      errors[r] = e.what();
    }
  });
  EXPECT_TRUE(Contains(errors[2], "reduce-scatter in island 1 [2, 3]")) << errors[2];
  EXPECT_TRUE(Contains(errors[2], "test rank 3): no data for 3")) << errors[2];
  // Rank 0's shard goes over ring [0, 2] (rank 2 failed inside its island); rank 1's over [1, 3].
  EXPECT_TRUE(Contains(errors[0], "over ring [0, 2]")) << errors[0];
  EXPECT_TRUE(Contains(errors[0], "test rank 2): no data for 3")) << errors[0];
  EXPECT_TRUE(Contains(errors[1], "over ring [1, 3]")) << errors[1];
  EXPECT_TRUE(Contains(errors[1], "test rank 3): no data for 3")) << errors[1];
}

}  // namespace
}  // namespace tessel::transport
