// What NCCL's members agree on before NCCL starts, tested without a GPU: the ncclUniqueId created
// once, on the group's first member, reaches every member through the exchange function (here
// over real sockets, as the TCP stand-in for the rendezvous), byte for byte; every invalid group
// and every failed or inconsistent exchange is named with the group and the rank.
#include "noderuntime/transport/nccl_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>

#include "local_mesh.h"

namespace tessel::transport {
namespace {

using namespace std::chrono_literals;
using testing::Comms;
using testing::connect_local;
using testing::Contains;
using testing::on_every_rank;

// Every byte value, zeros and float NaN patterns included: the exchange must not treat the id
// as numbers.
NcclId pattern_id(int seed) {
  NcclId id;
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::byte>((i * 37 + seed) & 0xFF);
  return id;
}

NcclGroupOptions options_for(std::vector<int> island, int rank) {
  NcclGroupOptions o;
  o.island = std::move(island);
  o.rank = rank;
  o.exchange = [](const std::optional<NcclId>& root) { return root.value_or(pattern_id(1)); };
  o.create_id = [] { return pattern_id(1); };
  return o;
}

std::string agree_error(const NcclGroupOptions& options) {
  try {
    agree_on_nccl_group(options);
  } catch (const TransportError& e) {
    return e.what();
  }
  return "";
}

TEST(NcclGroup, TheFirstMembersIdReachesEveryMemberOverTcp) {
  const std::vector<int> island = {2, 0, 3, 1};
  Comms comms = connect_local(4);
  std::atomic<int> created{0};
  std::vector<NcclGroup> groups(4);
  on_every_rank(4, [&](int r) {
    NcclGroupOptions o;
    o.island = island;
    o.rank = r;
    o.exchange = communicator_id_exchange(*comms[r], island, 7);
    o.create_id = [&, r] {
      EXPECT_EQ(r, 2) << "only the first member creates the id";
      ++created;
      return pattern_id(5);
    };
    groups[r] = agree_on_nccl_group(o);
  });
  EXPECT_EQ(created, 1);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(groups[r].id, pattern_id(5)) << r;
    EXPECT_EQ(groups[r].nranks, 4);
    EXPECT_EQ(groups[r].nccl_rank, std::find(island.begin(), island.end(), r) - island.begin());
  }
}

TEST(NcclGroup, GroupsOfDifferentGenerationsOverTheSameMembersDoNotMix) {
  const std::vector<int> island = {0, 1};
  Comms comms = connect_local(2);
  std::vector<NcclId> first(2), second(2);
  on_every_rank(2, [&](int r) {
    auto one = communicator_id_exchange(*comms[r], island, 1);
    auto two = communicator_id_exchange(*comms[r], island, 2);
    if (r == 0) {
      first[0] = one(pattern_id(10));
      second[0] = two(pattern_id(20));
    } else {
      second[1] = two(std::nullopt);  // the later group first: matched by its key, not order
      first[1] = one(std::nullopt);
    }
  });
  EXPECT_EQ(first[1], pattern_id(10));
  EXPECT_EQ(second[1], pattern_id(20));
}

TEST(NcclGroup, InvalidGroupsAreNamed) {
  auto o = options_for({}, 0);
  EXPECT_TRUE(Contains(agree_error(o), "nccl group [] at rank 0: the island is empty"));
  o = options_for({0, -2}, 0);
  EXPECT_TRUE(Contains(agree_error(o), "nccl group [0, -2] at rank 0: rank -2 is negative"));
  o = options_for({0, 1, 0}, 0);
  EXPECT_TRUE(Contains(agree_error(o), "rank 0 is listed twice"));
  o = options_for({1, 2}, 0);
  EXPECT_TRUE(Contains(agree_error(o),
                       "nccl group [1, 2] at rank 0: rank 0 (this rank) is not in the group"));
  o = options_for({0}, 0);
  o.device = -1;
  EXPECT_TRUE(Contains(agree_error(o), "device -1 is negative"));
  o = options_for({0}, 0);
  o.timeout = 0ms;
  EXPECT_TRUE(Contains(agree_error(o), "timeout 0 ms must be positive"));
  o = options_for({0}, 0);
  o.exchange = nullptr;
  EXPECT_TRUE(Contains(agree_error(o), "no id exchange function"));
  o = options_for({0}, 0);
  o.create_id = nullptr;  // and no default given
  EXPECT_TRUE(Contains(agree_error(o), "no way to create the NCCL id"));
}

TEST(NcclGroup, FailedOrInconsistentExchangesAreNamed) {
  auto o = options_for({0, 1}, 0);
  o.create_id = []() -> NcclId { throw std::runtime_error("no network interface"); };
  EXPECT_TRUE(Contains(agree_error(o),
                       "nccl group [0, 1] at rank 0: creating the NCCL id failed: no network "
                       "interface"));
  o = options_for({0, 1}, 1);
  o.exchange = [](const std::optional<NcclId>&) -> NcclId {
    throw std::runtime_error("rendezvous unreachable");
  };
  EXPECT_TRUE(Contains(agree_error(o),
                       "nccl group [0, 1] at rank 1: the NCCL id exchange failed: rendezvous "
                       "unreachable"));
  o = options_for({0, 1}, 0);
  o.exchange = [](const std::optional<NcclId>&) { return pattern_id(99); };
  EXPECT_TRUE(Contains(agree_error(o), "handed the first member another id than it created"));
  o = options_for({3, 1}, 1);
  o.exchange = [](const std::optional<NcclId>&) { return NcclId{}; };
  EXPECT_TRUE(Contains(agree_error(o), "all-zero id (no id was sent by rank 3)"));
}

TEST(NcclGroup, AFirstMemberThatVanishesFailsTheExchangeNamingIt) {
  const std::vector<int> island = {0, 1, 2};
  Comms comms = connect_local(3, [](TcpOptions& t) { t.io_timeout = 5s; });
  std::vector<std::string> errors(3);
  on_every_rank(3, [&](int r) {
    if (r == 0) {
      comms[0]->close();
      return;
    }
    NcclGroupOptions o = options_for(island, r);
    o.exchange = communicator_id_exchange(*comms[r], island);
    errors[r] = agree_error(o);
  });
  for (int r : {1, 2}) {
    EXPECT_TRUE(Contains(errors[r], "nccl group [0, 1, 2] at rank " + std::to_string(r) +
                                        ": the NCCL id exchange failed: "))
        << errors[r];
    EXPECT_TRUE(Contains(errors[r], "rank 0 (127.0.0.1:")) << errors[r];
    EXPECT_TRUE(Contains(errors[r], "test rank 0)")) << errors[r];
  }
}

}  // namespace
}  // namespace tessel::transport
