// The Rendezvous service: its table (joins, generations, values, every refusal) and the same over
// gRPC between a server and clients on threads, as the launcher, the operator and the stage
// processes use it.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "proto/rendezvous/rendezvous_client.h"
#include "proto/rendezvous/rendezvous_server.h"
#include "proto/rendezvous/rendezvous_table.h"

namespace tessel::rendezvous {
namespace {

using namespace std::chrono_literals;
using Code = RendezvousError::Code;

const std::string kToken = "0123456789abcdef0123456789abcdef";

RendezvousTable::Clock::time_point in(std::chrono::milliseconds ms) {
  return RendezvousTable::Clock::now() + ms;
}

std::string address_of(int rank) { return "10.0.0." + std::to_string(rank + 1) + ":4100"; }

// The refusal `call` throws: its code and message.
template <class Call>
RendezvousError refusal(Call&& call) {
  try {
    call();
  } catch (const RendezvousError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a RendezvousError";
  return RendezvousError(Code::kInvalidArgument, "");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RendezvousTable, EveryRankGetsTheWholeTableOnceAllHaveJoined) {
  RendezvousTable table;
  table.add_job(7, 4, kToken);
  std::vector<std::future<JoinedTable>> joins;
  for (int r = 0; r < 4; ++r) {
    joins.push_back(std::async(std::launch::async, [&, r] {
      return table.join(7, kToken, 4, r, 100 + r, address_of(r), in(10s));
    }));
  }
  const std::vector<std::string> expected = {address_of(0), address_of(1), address_of(2),
                                             address_of(3)};
  for (auto& join : joins) {
    const JoinedTable joined = join.get();
    EXPECT_EQ(joined.generation, 1u);
    EXPECT_EQ(joined.addresses, expected);
  }
}

TEST(RendezvousTable, TheMissingRanksAreNamed) {
  RendezvousTable table;
  table.add_job(7, 5, kToken);
  std::thread other([&] {
    EXPECT_EQ(refusal([&] { table.join(7, kToken, 5, 3, 1, address_of(3), in(2s)); }).code(),
              Code::kDeadlineExceeded);
  });
  const RendezvousError e =
      refusal([&] { table.join(7, kToken, 5, 1, 1, address_of(1), in(300ms)); });
  other.join();
  EXPECT_EQ(e.code(), Code::kDeadlineExceeded);
  EXPECT_TRUE(contains(e.what(), "waiting for ranks 0, 2, 4 of 5 to join")) << e.what();
}

TEST(RendezvousTable, ARetriedJoinGetsTheSameTableAndARestartedRankStartsANewGeneration) {
  RendezvousTable table;
  table.add_job(7, 2, kToken);
  auto other = std::async(std::launch::async,
                          [&] { return table.join(7, kToken, 2, 1, 11, address_of(1), in(5s)); });
  EXPECT_EQ(table.join(7, kToken, 2, 0, 10, address_of(0), in(5s)).generation, 1u);
  EXPECT_EQ(other.get().generation, 1u);
  // Rank 1 calls again (its reply was lost): the same table.
  EXPECT_EQ(table.join(7, kToken, 2, 1, 11, address_of(1), in(1s)).generation, 1u);
  // Rank 1 restarted (another incarnation, another address): a new generation everyone joins.
  auto restarted = std::async(
      std::launch::async, [&] { return table.join(7, kToken, 2, 1, 12, "10.0.0.9:4200", in(5s)); });
  for (int i = 0; i < 5000 && table.progress(7)->generation == 1; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(table.progress(7)->generation, 2u);
  EXPECT_EQ(table.progress(7)->joined, 1);
  const JoinedTable again = table.join(7, kToken, 2, 0, 10, address_of(0), in(5s));
  EXPECT_EQ(again.generation, 2u);
  EXPECT_EQ(again.addresses, (std::vector<std::string>{address_of(0), "10.0.0.9:4200"}));
  EXPECT_EQ(restarted.get().addresses, again.addresses);
}

TEST(RendezvousTable, RefusalsNameTheField) {
  RendezvousTable table;
  EXPECT_TRUE(contains(refusal([&] { table.add_job(1, 2, "short"); }).what(),
                       "token: must have at least 16 bytes, got 5"));
  EXPECT_TRUE(contains(refusal([&] { table.add_job(1, 0, kToken); }).what(),
                       "world_size: must be in [1, 8192], got 0"));
  table.add_job(7, 2, kToken);
  const RendezvousError wrong_token =
      refusal([&] { table.join(7, kToken + "x", 2, 0, 1, address_of(0), in(1s)); });
  EXPECT_EQ(wrong_token.code(), Code::kUnauthenticated);
  EXPECT_TRUE(contains(wrong_token.what(), "unknown job or wrong token")) << wrong_token.what();
  const RendezvousError unknown_job =
      refusal([&] { table.join(8, kToken, 2, 0, 1, address_of(0), in(1s)); });
  EXPECT_EQ(unknown_job.code(), Code::kUnauthenticated);
  EXPECT_EQ(std::string(unknown_job.what()), "job 8: unknown job or wrong token");
  EXPECT_TRUE(
      contains(refusal([&] { table.join(7, kToken, 2, 2, 1, address_of(0), in(1s)); }).what(),
               "tasklet.rank: 2 is out of range [0, 2)"));
  EXPECT_TRUE(
      contains(refusal([&] { table.join(7, kToken, 3, 0, 1, address_of(0), in(1s)); }).what(),
               "world_size: the job has 2 ranks, this process says 3"));
  for (const std::string& bad : std::vector<std::string>{
           "", "10.0.0.1", "10.0.0.1:", ":4100", "10.0.0.1:0", "10.0.0.1:65536", "10.0.0.1:41a",
           "10.0 .0.1:4100", std::string(300, 'a') + ":1"}) {
    const RendezvousError e = refusal([&] { table.join(7, kToken, 2, 0, 1, bad, in(1s)); });
    EXPECT_EQ(e.code(), Code::kInvalidArgument) << bad;
    EXPECT_TRUE(contains(e.what(), "address: ")) << e.what();
  }
}

TEST(RendezvousTable, TheFirstValuePublishedStaysAndALookupWaitsForIt) {
  RendezvousTable table;
  table.add_job(7, 2, kToken);
  auto other = std::async(std::launch::async,
                          [&] { return table.join(7, kToken, 2, 1, 11, address_of(1), in(5s)); });
  const uint64_t generation = table.join(7, kToken, 2, 0, 10, address_of(0), in(5s)).generation;
  other.get();
  auto waiting = std::async(std::launch::async, [&] {
    return table.lookup(7, kToken, generation, 1, "nccl/stage0", in(5s));
  });
  std::this_thread::sleep_for(50ms);
  const std::string id(128, '\x07');
  EXPECT_EQ(table.publish(7, kToken, generation, 0, "nccl/stage0", id), id);
  EXPECT_EQ(table.publish(7, kToken, generation, 1, "nccl/stage0", "another"), id);
  EXPECT_EQ(waiting.get(), id);
  EXPECT_EQ(refusal([&] { table.lookup(7, kToken, generation, 1, "nothing", in(100ms)); }).code(),
            Code::kDeadlineExceeded);
  const RendezvousError stale =
      refusal([&] { table.publish(7, kToken, generation + 1, 0, "k", "v"); });
  EXPECT_EQ(stale.code(), Code::kNotFound);
  EXPECT_TRUE(contains(stale.what(), "is not the current one")) << stale.what();
  EXPECT_TRUE(contains(refusal([&] { table.publish(7, kToken, generation, 0, "", "v"); }).what(),
                       "key: must have 1 to 128 bytes, got 0"));
  EXPECT_TRUE(contains(refusal([&] {
                         table.publish(7, kToken, generation, 0, "k", std::string(65537, 'v'));
                       }).what(),
                       "value: at most 65536 bytes, got 65537"));
}

// The same over gRPC: a server on a port the kernel picks, clients on threads.
class RendezvousOverGrpc : public ::testing::Test {
 protected:
  RendezvousServer server{"127.0.0.1:0", grpc::InsecureServerCredentials()};
  std::string address() const { return "127.0.0.1:" + std::to_string(server.port()); }
  RendezvousClient client(int rank, int world, const std::string& token = kToken) {
    return RendezvousClient(address(), grpc::InsecureChannelCredentials(),
                            Identity{7, rank, rank, 0, uint64_t(1000 + rank), world, token});
  }
};

TEST_F(RendezvousOverGrpc, ThreeRanksGetTheTableAndAgreeOnAPublishedValue) {
  server.table().add_job(7, 3, kToken);
  std::vector<std::future<std::string>> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      RendezvousClient c = client(r, 3);
      const JoinedTable table = c.join("127.0.0.1:" + std::to_string(5000 + r), 20s);
      EXPECT_EQ(table.addresses,
                (std::vector<std::string>{"127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"}));
      if (r == 0) return c.publish(table.generation, "nccl/island-a", std::string(128, 'x'));
      return c.lookup(table.generation, "nccl/island-a", 20s);
    }));
  }
  for (auto& rank : ranks) EXPECT_EQ(rank.get(), std::string(128, 'x'));
}

TEST_F(RendezvousOverGrpc, AWrongTokenIsRefusedAtOnceAndAMissingRankIsNamed) {
  server.table().add_job(7, 2, kToken);
  try {
    client(0, 2, "fedcba9876543210fedcba9876543210").join("127.0.0.1:5000", 20s);
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "rendezvous " + address() +
                                       ": join as rank 0 at 127.0.0.1:5000: "
                                       "job 7: unknown job or wrong token"))
        << e.what();
    // A refusal is final: it is not retried until the timeout (which would say "gave up").
    EXPECT_FALSE(contains(e.what(), "gave up")) << e.what();
  }
  try {
    client(0, 2).join("127.0.0.1:5000", 1500ms);
    FAIL() << "expected a timeout";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "waiting for ranks 1 of 2 to join")) << e.what();
    EXPECT_TRUE(contains(e.what(), "gave up after 1500 ms")) << e.what();
  }
}

}  // namespace
}  // namespace tessel::rendezvous
