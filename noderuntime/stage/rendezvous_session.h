// A stage process's session with its job's Rendezvous service (proto/rendezvous): the client,
// the generation the process joined, and the set-up data the members of an island agree on
// through it (NCCL's unique id), so that nothing travels by a side channel.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "noderuntime/transport/nccl_group.h"
#include "proto/rendezvous/rendezvous_client.h"

namespace tessel::stage {

struct RendezvousSession {
  std::shared_ptr<rendezvous::RendezvousClient> client;
  uint64_t generation = 0;
  std::chrono::milliseconds timeout{60000};  // how long a member waits for the first one's value
};

// NCCL's id for `island` (global ranks, first member first): the first member publishes it under
// "nccl-id/<the island's ranks>", the others look it up. Throws std::runtime_error naming the
// service and the key when it cannot, or when the value is not an id.
transport::NcclIdExchange rendezvous_id_exchange(RendezvousSession session,
                                                 const std::vector<int>& island);

}  // namespace tessel::stage
