// The one-round all-reduce of small buffers: exact sums, the same bits on every member, one
// round (each member's own buffer to every other, so one link latency instead of the ring's
// 2 (n - 1)), and a member that leaves named.
#include "noderuntime/transport/direct_all_reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// Records what a member sends, then passes every call on to the real communicator.
class SendRecorder final : public Communicator {
 public:
  struct Sent {
    int peer;
    TensorInfo info;
    std::vector<float> payload;
  };

  explicit SendRecorder(Communicator& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Request isend(int peer, const TensorInfo& info, std::span<const std::byte> payload) override {
    std::vector<float> copy(payload.size() / sizeof(float));
    std::memcpy(copy.data(), payload.data(), payload.size());
    sent.push_back({peer, info, std::move(copy)});
    return inner_.isend(peer, info, payload);
  }
  Request irecv(int peer, const TensorInfo& expected, std::span<std::byte> buffer) override {
    return inner_.irecv(peer, expected, buffer);
  }
  Request iall_reduce(void* data, size_t count, DType dtype, const std::vector<int>& group,
                      ReduceOp op) override {
    return inner_.iall_reduce(data, count, dtype, group, op);
  }
  void close() override { inner_.close(); }

  std::vector<Sent> sent;

 private:
  Communicator& inner_;
};

// One round, hence one link latency where the ring pays 2 (n - 1): no message depends on one
// received, so each member sends its own input, once, to every other member, and nothing else.
// (The ring's later messages carry partial sums it received.)
TEST(DirectAllReduce, EachMemberSendsOnlyItsOwnBufferOnceToEveryOther) {
  const int n = 4;
  Comms comms = connect_local(n);
  std::vector<SendRecorder> recorders;
  for (int r = 0; r < n; ++r) recorders.emplace_back(*comms[r]);
  std::vector<std::vector<float>> values(n);
  for (int r = 0; r < n; ++r) values[r] = random_input(r, 3);
  on_every_rank(n, [&](int r) {
    direct_all_reduce(recorders[r], std::span(values[r]), {0, 1, 2, 3}, 7);
  });
  for (int r = 0; r < n; ++r) {
    std::vector<int> peers;
    for (const SendRecorder::Sent& s : recorders[r].sent) {
      peers.push_back(s.peer);
      EXPECT_EQ(s.payload, random_input(r, 3)) << "rank " << r << " to " << s.peer;
      EXPECT_EQ(s.info.tag, Tag::kAllReduce);
      EXPECT_EQ(s.info.step, 7u);
      EXPECT_EQ(s.info.chunk, kDirectChunk);
    }
    std::sort(peers.begin(), peers.end());
    std::vector<int> others;
    for (int p = 0; p < n; ++p)
      if (p != r) others.push_back(p);
    EXPECT_EQ(peers, others) << "rank " << r;
    EXPECT_EQ(values[r], values[0]) << "rank " << r;
  }
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
