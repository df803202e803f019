// NCCL's unique id through the job's rendezvous: the island's first member publishes it, the
// others get the same bytes; islands do not see each other's ids; a value that is not an id is
// refused by name.
#include "noderuntime/stage/rendezvous_session.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "proto/rendezvous/rendezvous_server.h"

namespace tessel::stage {
namespace {

using namespace std::chrono_literals;

const std::string kToken = "0123456789abcdef0123456789abcdef";

class RendezvousIds : public ::testing::Test {
 protected:
  void SetUp() override { server.table().add_job(5, kWorld, kToken); }

  // Every rank joins (on its own thread); returns each rank's session.
  std::vector<RendezvousSession> join_all() {
    std::vector<std::future<RendezvousSession>> joins;
    for (int r = 0; r < kWorld; ++r) {
      joins.push_back(std::async(std::launch::async, [this, r] {
        RendezvousSession session;
        session.client = std::make_shared<rendezvous::RendezvousClient>(
            "127.0.0.1:" + std::to_string(server.port()), grpc::InsecureChannelCredentials(),
            rendezvous::Identity{5, r, 0, r, uint64_t(r + 1), kWorld, kToken});
        session.generation =
            session.client->join("127.0.0.1:" + std::to_string(6000 + r), 20s).generation;
        session.timeout = 20s;
        return session;
      }));
    }
    std::vector<RendezvousSession> sessions;
    for (auto& join : joins) sessions.push_back(join.get());
    return sessions;
  }

  static constexpr int kWorld = 4;
  rendezvous::RendezvousServer server{"127.0.0.1:0", grpc::InsecureServerCredentials()};
};

transport::NcclId id_of(uint8_t fill) {
  transport::NcclId id;
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::byte>(fill + i);
  return id;
}

TEST_F(RendezvousIds, EveryMemberGetsItsIslandsFirstMembersId) {
  const std::vector<RendezvousSession> sessions = join_all();
  const std::vector<std::vector<int>> islands = {{0, 2}, {1, 3}};
  std::vector<std::future<transport::NcclId>> got(kWorld);
  for (const auto& island : islands) {
    for (size_t i = 0; i < island.size(); ++i) {
      const int rank = island[i];
      got[rank] = std::async(std::launch::async, [&, rank, i, island] {
        const transport::NcclIdExchange exchange = rendezvous_id_exchange(sessions[rank], island);
        return exchange(i == 0 ? std::optional(id_of(uint8_t(10 * island[0] + 1))) : std::nullopt);
      });
    }
  }
  EXPECT_EQ(got[0].get(), id_of(1));
  EXPECT_EQ(got[2].get(), id_of(1));
  EXPECT_EQ(got[1].get(), id_of(11));
  EXPECT_EQ(got[3].get(), id_of(11));
}

TEST_F(RendezvousIds, AValueThatIsNoIdIsRefused) {
  const std::vector<RendezvousSession> sessions = join_all();
  sessions[0].client->publish(sessions[0].generation, "nccl-id/0,1", "short");
  try {
    rendezvous_id_exchange(sessions[1], {0, 1})(std::nullopt);
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "rendezvous: 'nccl-id/0,1' holds 5 bytes, an NCCL id has 128");
  }
}

}  // namespace
}  // namespace tessel::stage
