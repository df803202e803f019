// What the members of an NCCL group agree on before NCCL starts, without a GPU: who is in the
// group and at which NCCL rank, and the 128-byte ncclUniqueId that the group's first member
// creates and every other member needs. The id travels only through a caller-supplied exchange
// function: the rendezvous provides one in production (the id beside the peers it already hands
// out); tests and the TCP stand-in use communicator_id_exchange below. Never a side channel (no
// file, no environment variable, no extra socket).
//
// This file needs neither CUDA nor NCCL, so its logic is built and tested everywhere;
// nccl_communicator.h (CUDA builds) calls agree_on_nccl_group with ncclGetUniqueId as create_id.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "noderuntime/transport/communicator.h"

namespace tessel::transport {

inline constexpr size_t kNcclIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES (checked where nccl.h is seen)
using NcclId = std::array<std::byte, kNcclIdBytes>;

// Called once on every member of the group. On the group's first member `root_id` holds the id it
// created; elsewhere it is nullopt. Returns the first member's id, on every member. Throws (any
// exception) when the id cannot be exchanged.
using NcclIdExchange = std::function<NcclId(const std::optional<NcclId>& root_id)>;

struct NcclGroupOptions {
  // The group's global ranks; a member's index here is its NCCL rank, and island[0] creates the
  // id. The GPUs of these ranks must all be reachable by NCCL (one node, or one cluster).
  std::vector<int> island;
  int rank = -1;   // this member's global rank
  int device = 0;  // this member's CUDA device (an index among the visible ones)
  NcclIdExchange exchange;
  // Creates the id on the first member; empty means ncclGetUniqueId (nccl_communicator.cpp).
  // A seam for tests and for callers that create ids elsewhere.
  std::function<NcclId()> create_id;
  // The longest NCCL may take to set the group up, and any one collective to complete, before
  // the communicator is aborted and the operation fails (a member that never came, or died).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

struct NcclGroup {
  int nranks = 0;
  int nccl_rank = 0;  // this member's index in the island
  NcclId id{};
};

// Throws TransportError naming the group, this rank and the fault when the options are invalid:
// an empty island, a negative rank, a rank listed twice, `rank` not in the island, a negative
// device, a timeout that is not positive, or no exchange function.
void check_nccl_group_options(const NcclGroupOptions& options);

// Checks the options, creates the id on the first member (options.create_id, else
// `default_create_id`), and runs the exchange. Throws TransportError naming the group and this
// rank when the options are invalid, the id cannot be created or exchanged, the exchange hands
// the first member back another id, or it hands any member an all-zero id (no id was sent).
NcclGroup agree_on_nccl_group(const NcclGroupOptions& options,
                              const std::function<NcclId()>& default_create_id = {});

// An exchange over a Communicator's point-to-point calls (the TCP stand-in for the rendezvous):
// island[0] sends the id to every other member, which receives it from island[0]. Message key:
// tag control, step `generation` (different for every group set up over the same members),
// micro-batch island_group_id(island), chunk kNcclIdChunk; an i32 tensor of 32 elements carrying
// the bytes unchanged. A failed send or receive throws TransportError naming the peer.
inline constexpr uint32_t kNcclIdChunk = 0x4E43434Cu;  // "NCCL"
NcclIdExchange communicator_id_exchange(Communicator& comm, std::vector<int> island,
                                        uint64_t generation = 0);

}  // namespace tessel::transport
