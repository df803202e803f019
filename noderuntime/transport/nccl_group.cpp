#include "noderuntime/transport/nccl_group.h"

#include <algorithm>
#include <exception>
#include <string>

#include "noderuntime/transport/hierarchical_all_reduce.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

std::string list_text(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::string where(const NcclGroupOptions& options) {
  return "nccl group " + list_text(options.island) + " at rank " + std::to_string(options.rank) +
         ": ";
}

TensorInfo id_info(const std::vector<int>& island, uint64_t generation) {
  return TensorInfo{Tag::kControl, generation,  island_group_id(island),
                    kNcclIdChunk,  DType::kI32, {static_cast<int64_t>(kNcclIdBytes / 4)}};
}

}  // namespace

void check_nccl_group_options(const NcclGroupOptions& options) {
  const std::string at = where(options);
  if (options.island.empty()) throw TransportError(at + "the island is empty");
  for (size_t i = 0; i < options.island.size(); ++i) {
    const int r = options.island[i];
    if (r < 0) throw TransportError(at + "rank " + std::to_string(r) + " is negative");
    if (std::find(options.island.begin(), options.island.begin() + static_cast<long>(i), r) !=
        options.island.begin() + static_cast<long>(i)) {
      throw TransportError(at + "rank " + std::to_string(r) + " is listed twice");
    }
  }
  if (std::find(options.island.begin(), options.island.end(), options.rank) ==
      options.island.end()) {
    throw TransportError(at + "rank " + std::to_string(options.rank) +
                         " (this rank) is not in the group");
  }
  if (options.device < 0) {
    throw TransportError(at + "device " + std::to_string(options.device) + " is negative");
  }
  if (options.timeout <= std::chrono::milliseconds::zero()) {
    throw TransportError(at + "timeout " + std::to_string(options.timeout.count()) +
                         " ms must be positive");
  }
  if (!options.exchange) throw TransportError(at + "no id exchange function");
}

NcclGroup agree_on_nccl_group(const NcclGroupOptions& options,
                              const std::function<NcclId()>& default_create_id) {
  check_nccl_group_options(options);
  const std::string at = where(options);
  NcclGroup group;
  group.nranks = static_cast<int>(options.island.size());
  group.nccl_rank =
      static_cast<int>(std::find(options.island.begin(), options.island.end(), options.rank) -
                       options.island.begin());
  std::optional<NcclId> mine;
  if (group.nccl_rank == 0) {
    const auto& create = options.create_id ? options.create_id : default_create_id;
    if (!create) throw TransportError(at + "no way to create the NCCL id");
    try {
      mine = create();
    } catch (const std::exception& e) {
      throw TransportError(at + "creating the NCCL id failed: " + e.what());
    }
  }
  try {
    group.id = options.exchange(mine);
  } catch (const std::exception& e) {
    throw TransportError(at + "the NCCL id exchange failed: " + e.what());
  }
  if (mine && group.id != *mine) {
    throw TransportError(at + "the id exchange handed the first member another id than it created");
  }
  if (std::all_of(group.id.begin(), group.id.end(),
                  [](std::byte b) { return b == std::byte{0}; })) {
    throw TransportError(at +
                         "the id exchange handed back an all-zero id (no id was sent by rank " +
                         std::to_string(options.island[0]) + ")");
  }
  return group;
}

NcclIdExchange communicator_id_exchange(Communicator& comm, std::vector<int> island,
                                        uint64_t generation) {
  return [&comm, island = std::move(island), generation](const std::optional<NcclId>& root_id) {
    NcclId id{};
    const TensorInfo info = id_info(island, generation);
    if (root_id) {
      id = *root_id;
      std::vector<Request> sends;
      std::exception_ptr failure;
      for (size_t i = 1; i < island.size(); ++i) {
        try {
          sends.push_back(comm.isend(island[i], info, std::span<const std::byte>(id)));
        } catch (const TransportError&) {
          if (!failure) failure = std::current_exception();
        }
      }
      for (Request& s : sends) {
        try {
          s.wait();
        } catch (const TransportError&) {
          if (!failure) failure = std::current_exception();
        }
      }
      if (failure) std::rethrow_exception(failure);
    } else {
      comm.recv(island.at(0), info, std::span<std::byte>(id));
    }
    return id;
  };
}

}  // namespace tessel::transport
