// The one-round all-reduce of small buffers: exact sums, the same bits on every member, one
// link latency instead of the ring's 2 (n - 1), and a member that leaves named.
#include "noderuntime/transport/direct_all_reduce.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>

#include "local_mesh.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

using namespace std::chrono_literals;
using testing::Comms;
using testing::connect_local;
using testing::on_every_rank;
using testing::random_input;

TEST(DirectAllReduce, SumsInGroupOrderWithTheSameBitsOnEveryMember) {
  for (int n = 2; n <= 5; ++n) {
    Comms comms = connect_local(n);
    std::vector<int> group(n);
    for (int i = 0; i < n; ++i) group[i] = n - 1 - i;  // not rank order
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{1000}}) {
      std::vector<std::vector<float>> results(n);
      for (int r = 0; r < n; ++r) results[r] = random_input(r, count);
      on_every_rank(n, [&](int r) {
        comms[r]->all_reduce(results[r].data(), count, DType::kF32, group);  // 4 KB at most
      });
      for (size_t e = 0; e < count; ++e) {
        float expected = 0;
        for (int member : group) expected += random_input(member, count)[e];
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(std::memcmp(&results[r][e], &expected, sizeof(float)), 0)
              << "n " << n << " count " << count << " rank " << r << " element " << e;
        }
      }
    }
  }
}

// Every link 100 ms long: the ring would need 2 (4 - 1) = 6 latencies, 600 ms.
TEST(DirectAllReduce, CostsOneLatencyWhereTheRingCostsSix) {
  Comms comms = connect_local(4, [](TcpOptions& o) {
    o.links = LinkEmulator::uniform(4, LinkShape{0, 0.100});
  });
  std::vector<std::vector<float>> values(4, std::vector<float>(3, 1.f));
  const auto start = std::chrono::steady_clock::now();
  on_every_rank(4, [&](int r) {
    comms[r]->all_reduce(values[r].data(), 3, DType::kF32, {0, 1, 2, 3});
  });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 100ms);
  EXPECT_LT(took, 300ms) << "took " << std::chrono::duration<double>(took).count() << " s";
  for (const auto& v : values) EXPECT_EQ(v, (std::vector<float>{4.f, 4.f, 4.f}));
}

TEST(DirectAllReduce, AMemberThatLeavesFailsTheOthersNamingIt) {
  Comms comms = connect_local(3, [](TcpOptions& o) { o.io_timeout = 500ms; });
  std::vector<std::string> errors(3);
  on_every_rank(3, [&](int r) {
    if (r == 2) {
      comms[2]->close();  // leaves instead of taking part
      return;
    }
    std::vector<float> v(4, 1.f);
    try {
      comms[r]->all_reduce(v.data(), v.size(), DType::kF32, {0, 1, 2});
    } catch (const TransportError& e) {
      errors[r] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("all-reduce: rank 2 (127.0.0.1:"), std::string::npos)
        << "rank " << r << ": " << errors[r];
  }
}

}  // namespace
}  // namespace tessel::transport
