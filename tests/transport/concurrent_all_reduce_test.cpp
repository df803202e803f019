// Several all-reduces of one group in flight at once (TcpOptions::all_reduces_in_flight,
// tcp_communicator.h): they sum exactly and bit-identically on every member, the same bits as
// when each runs alone, over links of several streams, whatever order the caller waits in; a
// later one may complete while an earlier one waits, a full lane starts the next only when one
// finishes, and with one in flight they complete in call order; a failed one fails alone naming
// the peer while the others complete, a failed link fails every one over it, and closing fails
// those queued. Where the order of events matters, rank 1 is played by the test (raw_peer.h), so
// nothing depends on timing: it sends each collective's message when the test says.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "local_mesh.h"
#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/direct_all_reduce.h"
#include "noderuntime/transport/ring_allreduce.h"
#include "raw_peer.h"

namespace tessel::transport {
namespace {

using namespace std::chrono_literals;
using testing::Comms;
using testing::connect_local;
using testing::Contains;
using testing::integer_input;
using testing::iota_group;
using testing::kJob;
using testing::make_raw_mesh;
using testing::on_every_rank;
using testing::random_input;
using testing::RawMesh;
using testing::same_bits;
using testing::wait_error;

// Mixed sizes: direct ones (at most 4096 bytes), rings of one chunk and rings of many.
const std::vector<size_t> kCounts = {300'001, 17, 5000, 1, 120'000, 1024, 64'007, 3, 250'000, 9999};

// Links of 3 streams that cut messages of 8 KiB and up, rings of 16 KiB chunks: the rings'
// messages interleave on every stream, in pieces.
void striped(TcpOptions& o) {
  o.streams_per_link = 3;
  o.min_piece_bytes = 4096;
  o.ring.chunk_bytes = 16 << 10;
  o.ring.min_chunk_bytes = 4096;
  o.ring.window = 3;
}

// Every rank starts kCounts' all-reduces of input(rank + k, count) over the whole group, back
// to back, then waits for them: the even ranks in call order, the odd ones in reverse.
std::vector<std::vector<std::vector<float>>> reduce_all_at_once(
    Comms& comms, std::vector<float> (*input)(int, size_t)) {
  const int n = static_cast<int>(comms.size());
  std::vector<std::vector<std::vector<float>>> results(n);  // [rank][collective]
  on_every_rank(n, [&](int r) {
    std::vector<Request> pending;
    for (size_t k = 0; k < kCounts.size(); ++k) {
      results[r].push_back(input(r + static_cast<int>(k), kCounts[k]));
    }
    for (auto& buffer : results[r]) {
      pending.push_back(
          comms[r]->iall_reduce(buffer.data(), buffer.size(), DType::kF32, iota_group(n)));
    }
    if (r % 2 == 1) std::reverse(pending.begin(), pending.end());
    for (Request& p : pending) p.wait();
  });
  return results;
}

TEST(ConcurrentAllReduce, ManyInFlightSumExactlyOnEveryMemberWhateverTheWaitOrder) {
  for (int n : {2, 3, 4}) {
    Comms comms = connect_local(n, [](TcpOptions& o) {
      striped(o);
      o.all_reduces_in_flight = 4;
    });
    const auto results = reduce_all_at_once(comms, integer_input);
    for (size_t k = 0; k < kCounts.size(); ++k) {
      std::vector<float> serial(kCounts[k], 0.f);
      for (int r = 0; r < n; ++r) {
        const auto in = integer_input(r + static_cast<int>(k), kCounts[k]);
        for (size_t i = 0; i < serial.size(); ++i) serial[i] += in[i];
      }
      for (int r = 0; r < n; ++r) {
        ASSERT_TRUE(same_bits(results[r][k], serial))
            << "n " << n << " collective " << k << " (" << kCounts[k] << ") rank " << r;
      }
    }
  }
}

TEST(ConcurrentAllReduce, ManyInFlightGiveTheBitsEachGivesAlone) {
  const int n = 3;
  Comms one_at_a_time = connect_local(n, [](TcpOptions& o) {
    striped(o);
    o.all_reduces_in_flight = 1;
  });
  Comms many = connect_local(n, [](TcpOptions& o) {
    striped(o);
    o.all_reduces_in_flight = static_cast<int>(kCounts.size());
  });
  const auto alone = reduce_all_at_once(one_at_a_time, random_input);
  const auto together = reduce_all_at_once(many, random_input);
  for (size_t k = 0; k < kCounts.size(); ++k) {
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(same_bits(together[r][k], alone[0][k])) << "collective " << k << " rank " << r;
      ASSERT_TRUE(same_bits(alone[r][k], alone[0][k])) << "collective " << k << " rank " << r;
    }
  }
}

TEST(ConcurrentAllReduce, RejectsAnOutOfRangeCountNamingTheOption) {
  for (int bad : {0, kMaxAllReducesInFlight + 1}) {
    try {
      connect_local(2, [&](TcpOptions& o) { o.all_reduces_in_flight = bad; });
      ADD_FAILURE() << bad << " was accepted";
    } catch (const TransportError& e) {
      EXPECT_TRUE(Contains(e.what(), "all_reduces_in_flight " + std::to_string(bad) +
                                         " outside [1, " + std::to_string(kMaxAllReducesInFlight) +
                                         "]"));
    }
  }
}

// ---- rank 1 played by the test ----------------------------------------------------------------

constexpr size_t kElems = 6;  // direct all-reduces: one message each way

// Rank 0, a TcpCommunicator of a two-rank mesh with `in_flight` all-reduces at once; rank 1
// sends its side of each all-reduce over {0, 1} when told.
struct PlayedPair {
  explicit PlayedPair(int in_flight)
      : mesh(make_raw_mesh([&](TcpOptions& o) {
          o.all_reduces_in_flight = in_flight;
          o.io_timeout = 10s;
        })) {}

  // Starts the next all-reduce on rank 0 (its input: collective k's).
  Request start() {
    const size_t k = data.size();
    data.push_back(integer_input(0, kElems));
    for (float& x : data.back()) x += static_cast<float>(k);
    return mesh.comm->iall_reduce(data.back().data(), kElems, DType::kF32, {0, 1});
  }
  // Rank 1's message for all-reduce `sequence`, `elems` values of rank 1's input.
  void send(uint64_t sequence, size_t elems = kElems) {
    TensorInfo info{Tag::kAllReduce, sequence,    ring_group_id({0, 1}),
                    kDirectChunk,    DType::kF32, {static_cast<int64_t>(elems)}};
    const std::vector<float> payload = integer_input(1, elems);
    MessageHeader header{kJob, info, elems * sizeof(float)};
    header.piece_bytes = header.payload_bytes;
    header.piece_crc32c = crc32c(testing::bytes(payload));
    mesh.write_message(header, payload);
  }
  // Whether all-reduce k summed rank 0's and rank 1's inputs.
  bool summed(size_t k) const {
    const auto in0 = integer_input(0, kElems), in1 = integer_input(1, kElems);
    for (size_t i = 0; i < kElems; ++i) {
      if (data[k][i] != (in0[i] + static_cast<float>(k)) + in1[i]) return false;
    }
    return true;
  }

  RawMesh mesh;
  std::deque<std::vector<float>> data;  // stable addresses
};

// A request that is not complete after this long would only complete once the test sends more:
// the check cannot fail by the machine being slow.
void let_it_run() { std::this_thread::sleep_for(200ms); }

TEST(ConcurrentAllReduce, ALaterOneCompletesWhileAnEarlierOneWaits) {
  PlayedPair pair(2);
  Request first = pair.start();
  Request second = pair.start();
  pair.send(1);
  second.wait();
  EXPECT_TRUE(pair.summed(1));
  EXPECT_FALSE(first.test());  // rank 1 has not sent its part
  pair.send(0);
  first.wait();
  EXPECT_TRUE(pair.summed(0));
}

TEST(ConcurrentAllReduce, AFullLaneStartsTheNextOnlyWhenOneFinishes) {
  PlayedPair pair(2);
  Request a = pair.start(), b = pair.start(), c = pair.start();
  pair.send(2);  // c's part arrives, but a and b hold both places
  let_it_run();
  EXPECT_FALSE(c.test());
  pair.send(1);  // b finishes, c takes its place and finds its part there
  b.wait();
  c.wait();
  EXPECT_FALSE(a.test());
  pair.send(0);
  a.wait();
  for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(pair.summed(k)) << k;
}

TEST(ConcurrentAllReduce, OneInFlightCompletesInCallOrder) {
  PlayedPair pair(1);
  Request a = pair.start(), b = pair.start();
  pair.send(1);
  let_it_run();
  EXPECT_FALSE(b.test());
  pair.send(0);
  a.wait();
  b.wait();
  EXPECT_TRUE(pair.summed(0));
  EXPECT_TRUE(pair.summed(1));
}

TEST(ConcurrentAllReduce, AFailedOneFailsAloneNamingThePeerAndTheOthersComplete) {
  PlayedPair pair(4);
  Request a = pair.start(), b = pair.start(), c = pair.start();
  pair.send(1, kElems + 1);  // b's part has the wrong length
  pair.send(2);
  pair.send(0);
  const std::string error = wait_error(b);
  EXPECT_TRUE(Contains(error, "all-reduce: rank 1 (127.0.0.1:")) << error;
  EXPECT_TRUE(Contains(error, "test rank 1)")) << error;
  EXPECT_TRUE(Contains(error, "shape [7] does not match the expected [6]")) << error;
  a.wait();
  c.wait();
  EXPECT_TRUE(pair.summed(0));
  EXPECT_TRUE(pair.summed(2));
  // The group goes on.
  Request d = pair.start();
  pair.send(3);
  d.wait();
  EXPECT_TRUE(pair.summed(3));
}

TEST(ConcurrentAllReduce, AFailedLinkFailsEveryOneOverItNamingThePeer) {
  PlayedPair pair(2);
  Request a = pair.start(), b = pair.start(), c = pair.start();  // c queued behind a full lane
  pair.mesh.raw.reset();                                         // rank 1 goes away
  for (Request* r : {&a, &b, &c}) {
    const std::string error = wait_error(*r);
    EXPECT_TRUE(Contains(error, "all-reduce: rank 1 (127.0.0.1:")) << error;
    EXPECT_TRUE(Contains(error, "test rank 1): connection closed")) << error;
  }
  EXPECT_TRUE(Contains(wait_error(pair.start()), "test rank 1): connection closed"));
}

TEST(ConcurrentAllReduce, ClosingFailsTheRunningAndTheQueued) {
  PlayedPair pair(2);
  Request a = pair.start(), b = pair.start(), c = pair.start();
  pair.mesh.comm->close();
  for (Request* r : {&a, &b, &c}) EXPECT_TRUE(Contains(wait_error(*r), "communicator closed"));
}

// A member that leaves while several all-reduces are in flight fails every one of them on the
// others, each naming a peer; nothing hangs.
TEST(ConcurrentAllReduce, AMemberThatLeavesFailsEveryOneInFlight) {
  const int n = 3;
  Comms comms = connect_local(n, [](TcpOptions& o) {
    striped(o);
    o.io_timeout = 500ms;
  });
  std::vector<std::vector<std::string>> errors(n);
  on_every_rank(n, [&](int r) {
    if (r == 2) {
      comms[2]->close();
      return;
    }
    std::vector<std::vector<float>> buffers(6, std::vector<float>(20000, 1.f));
    std::vector<Request> pending;
    for (auto& b : buffers) {
      pending.push_back(comms[r]->iall_reduce(b.data(), b.size(), DType::kF32, iota_group(n)));
    }
    for (Request& p : pending) errors[r].push_back(wait_error(p));
  });
  for (int r = 0; r < 2; ++r) {
    for (const std::string& e : errors[r]) {
      EXPECT_TRUE(Contains(e, "all-reduce: rank ")) << "rank " << r << ": " << e;
    }
  }
}

}  // namespace
}  // namespace tessel::transport
