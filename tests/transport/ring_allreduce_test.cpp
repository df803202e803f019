// The ring all-reduce over TcpCommunicators in one process: exact sums against a serial sum
// for n = 2..5 and counts around n (odd, smaller than n, empty), many chunks per segment,
// bit-identical results on every rank and run, any ring order, subgroups side by side,
// several collectives in flight, bad groups, and a member that leaves.
#include "noderuntime/transport/ring_allreduce.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "local_mesh.h"

namespace tessel::transport {
namespace {

using namespace std::chrono_literals;
using testing::Comms;
using testing::connect_local;
using testing::Contains;
using testing::integer_input;
using testing::iota_group;
using testing::on_every_rank;
using testing::random_input;
using testing::same_bits;

// Every buffer goes round the ring, however small (direct_all_reduce_test.cpp has the rest).
void ring_only(TcpOptions& options) { options.ring.direct_max_bytes = 0; }

// All-reduces input(rank, count) on every member of `group` and returns each rank's result.
std::vector<std::vector<float>> reduce_on_all(Comms& comms, const std::vector<int>& group,
                                              size_t count,
                                              std::vector<float> (*input)(int, size_t)) {
  std::vector<std::vector<float>> results(comms.size());
  for (int r : group) results[r] = input(r, count);
  on_every_rank(static_cast<int>(comms.size()), [&](int r) {
    if (std::find(group.begin(), group.end(), r) == group.end()) return;
    comms[r]->all_reduce(results[r].data(), count, DType::kF32, group);
  });
  return results;
}

TEST(RingAllReduce, EqualsTheSerialSumForTwoToFiveRanksAndAwkwardCounts) {
  for (int n = 2; n <= 5; ++n) {
    // Small chunks, so that segments span many chunks and the receive window wraps.
    Comms comms = connect_local(n, [](TcpOptions& o) {
      o.ring.chunk_bytes = 12;
      o.ring.window = 3;
      ring_only(o);
    });
    for (size_t count : {size_t{0}, size_t{1}, size_t(n - 1), size_t(n), size_t(n + 1), size_t{7},
                         size_t{101}, size_t{1000}}) {
      const auto results = reduce_on_all(comms, iota_group(n), count, integer_input);
      std::vector<float> serial(count, 0.f);
      for (int r = 0; r < n; ++r) {
        const auto in = integer_input(r, count);
        for (size_t i = 0; i < count; ++i) serial[i] += in[i];
      }
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(same_bits(results[r], serial))
            << "n " << n << " count " << count << " rank " << r;
      }
    }
  }
}

TEST(RingAllReduce, EveryRankEndsWithTheSameBitsRunAfterRun) {
  const int n = 5;
  const size_t count = 300'007;  // odd, not divisible by n
  Comms comms = connect_local(n, ring_only);
  const auto first = reduce_on_all(comms, iota_group(n), count, random_input);
  const auto second = reduce_on_all(comms, iota_group(n), count, random_input);
  std::vector<double> serial(count, 0.0);
  for (int r = 0; r < n; ++r) {
    const auto in = random_input(r, count);
    for (size_t i = 0; i < count; ++i) serial[i] += in[i];
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(same_bits(first[r], first[0])) << "rank " << r << " differs from rank 0";
    ASSERT_TRUE(same_bits(second[r], first[0])) << "rank " << r << " differs between runs";
  }
  for (size_t i = 0; i < count; ++i) {
    ASSERT_NEAR(first[0][i], serial[i], 1e-5 * (1 + std::fabs(serial[i]))) << i;
  }
}

TEST(RingAllReduce, FollowsTheCallersRingOrderAndRunsSubgroupsSideBySide) {
  Comms comms = connect_local(4, ring_only);
  const auto permuted = reduce_on_all(comms, {2, 0, 3, 1}, 333, random_input);
  for (int r = 1; r < 4; ++r) EXPECT_TRUE(same_bits(permuted[r], permuted[0])) << r;

  // Two data-parallel groups at the same time: {3, 1} and {0, 2}.
  std::vector<std::vector<float>> results(4);
  for (int r = 0; r < 4; ++r) results[r] = integer_input(r, 77);
  on_every_rank(4, [&](int r) {
    const std::vector<int> group =
        (r == 1 || r == 3) ? std::vector<int>{3, 1} : std::vector<int>{0, 2};
    comms[r]->all_reduce(results[r].data(), 77, DType::kF32, group);
  });
  const auto in = [](int r) { return integer_input(r, 77); };
  for (size_t i = 0; i < 77; ++i) {
    EXPECT_EQ(results[1][i], in(1)[i] + in(3)[i]);
    EXPECT_EQ(results[0][i], in(0)[i] + in(2)[i]);
  }
  EXPECT_TRUE(same_bits(results[1], results[3]));
  EXPECT_TRUE(same_bits(results[0], results[2]));
}

TEST(RingAllReduce, SeveralCollectivesInFlightAllComplete) {
  const int n = 3;
  Comms comms = connect_local(n, ring_only);
  std::vector<std::vector<std::vector<float>>> buffers(n);  // [rank][collective]
  on_every_rank(n, [&](int r) {
    for (int k = 0; k < 4; ++k) buffers[r].push_back(integer_input(r + k, 5000 + k));
    std::vector<Request> pending;
    for (auto& b : buffers[r])
      pending.push_back(comms[r]->iall_reduce(b.data(), b.size(), DType::kF32, iota_group(n)));
    for (auto& p : pending) p.wait();
  });
  for (int k = 0; k < 4; ++k) {
    std::vector<float> serial(5000 + k, 0.f);
    for (int r = 0; r < n; ++r) {
      const auto in = integer_input(r + k, serial.size());
      for (size_t i = 0; i < serial.size(); ++i) serial[i] += in[i];
    }
    EXPECT_TRUE(same_bits(buffers[0][k], serial)) << "collective " << k;
    for (int r = 1; r < n; ++r) EXPECT_TRUE(same_bits(buffers[r][k], buffers[0][k]));
  }
}

// Rank 0 belongs to two groups and starts the one whose other member comes late first: the
// other group's all-reduce still completes meanwhile (each group has its own lane, as each
// NCCL communicator has its own stream).
TEST(RingAllReduce, AGroupWaitingForALateMemberDoesNotHoldUpAnotherGroup) {
  Comms comms = connect_local(3);
  std::vector<std::vector<float>> late(3), prompt(3);
  for (int r = 0; r < 3; ++r) {
    late[r] = integer_input(r, 1000);
    prompt[r] = integer_input(10 + r, 1000);
  }
  std::atomic<bool> prompt_done{false};
  std::atomic<bool> prompt_done_before_late_started{false};
  on_every_rank(3, [&](int r) {
    if (r == 0) {
      Request first = comms[0]->iall_reduce(late[0].data(), 1000, DType::kF32, {0, 1});
      comms[0]->all_reduce(prompt[0].data(), 1000, DType::kF32, {0, 2});
      prompt_done = true;
      first.wait();
    } else if (r == 2) {
      comms[2]->all_reduce(prompt[2].data(), 1000, DType::kF32, {0, 2});
    } else {
      // Rank 1 starts only once the other group has finished (or gives up after 10 s).
      for (int i = 0; i < 1000 && !prompt_done; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      prompt_done_before_late_started = prompt_done.load();
      comms[1]->all_reduce(late[1].data(), 1000, DType::kF32, {0, 1});
    }
  });
  EXPECT_TRUE(prompt_done_before_late_started);
  for (size_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(late[0][i], integer_input(0, 1000)[i] + integer_input(1, 1000)[i]) << i;
    ASSERT_EQ(prompt[2][i], integer_input(10, 1000)[i] + integer_input(12, 1000)[i]) << i;
  }
}

TEST(RingAllReduce, AGroupOfOneIsANoOp) {
  Comms comms = connect_local(2);
  std::vector<float> data{1.5f, -2.f};
  comms[1]->all_reduce(data.data(), data.size(), DType::kF32, {1});
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.f}));
}

TEST(RingAllReduce, RejectsBadGroupsAndDtypesNamingThem) {
  Comms comms = connect_local(3);
  std::vector<float> data(4);
  const auto error = [&](const std::vector<int>& group, DType dtype = DType::kF32) -> std::string {
    try {
      comms[0]->all_reduce(data.data(), data.size(), dtype, group);
    } catch (const TransportError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(Contains(error({0, 3}), "all-reduce group [0, 3]: rank 3 out of range [0, 3)"));
  EXPECT_TRUE(Contains(error({0, 1, 0}), "all-reduce group [0, 1, 0]: rank 0 listed twice"));
  EXPECT_TRUE(Contains(error({1, 2}), "all-reduce group [1, 2]: does not include this rank (0)"));
  EXPECT_TRUE(Contains(error({0, 1}, DType::kBF16), "dtype bf16 is not supported by the TCP ring"));
}

TEST(RingAllReduce, AMemberThatLeavesFailsTheOthersNamingAPeer) {
  const int n = 3;
  Comms comms = connect_local(n, [](TcpOptions& o) {
    o.io_timeout = 500ms;
    ring_only(o);
  });
  std::vector<std::string> errors(n);
  on_every_rank(n, [&](int r) {
    if (r == 2) {
      comms[2]->close();  // leaves instead of taking part
      return;
    }
    std::vector<float> data(10000, 1.f);
    try {
      comms[r]->all_reduce(data.data(), data.size(), DType::kF32, iota_group(n));
    } catch (const TransportError& e) {
      errors[r] = e.what();
    }
  });
  // Rank 0 waits on rank 2 (its left neighbour), which closed; rank 1 then waits on rank 0.
  EXPECT_TRUE(Contains(errors[0], "all-reduce: rank 2 (127.0.0.1:")) << errors[0];
  EXPECT_TRUE(Contains(errors[0], "test rank 2): connection closed")) << errors[0];
  EXPECT_TRUE(Contains(errors[1], "all-reduce: rank ")) << errors[1];
}

TEST(RingAllReduce, GroupIdsDifferForDifferentRings) {
  EXPECT_EQ(ring_group_id({0, 1, 2}), ring_group_id({0, 1, 2}));
  EXPECT_NE(ring_group_id({0, 1, 2}), ring_group_id({0, 2, 1}));
  EXPECT_NE(ring_group_id({0, 1}), ring_group_id({0, 1, 2}));
}

}  // namespace
}  // namespace tessel::transport
