#include "noderuntime/stage/rendezvous_session.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace tessel::stage {

transport::NcclIdExchange rendezvous_id_exchange(RendezvousSession session,
                                                 const std::vector<int>& island) {
  std::string key = "nccl-id/";
  for (size_t i = 0; i < island.size(); ++i) key += (i ? "," : "") + std::to_string(island[i]);
  // Keys are bounded (rendezvous_table.h); a long island is named by its size and ends.
  if (key.size() > rendezvous::kMaxKeyBytes) {
    key = "nccl-id/" + std::to_string(island.size()) + ":" + std::to_string(island.front()) + ".." +
          std::to_string(island.back());
  }
  return [session, key](const std::optional<transport::NcclId>& root_id) {
    std::string value;
    if (root_id) {
      value = session.client->publish(
          session.generation, key,
          std::string(reinterpret_cast<const char*>(root_id->data()), root_id->size()));
    } else {
      value = session.client->lookup(session.generation, key, session.timeout);
    }
    if (value.size() != transport::kNcclIdBytes) {
      throw std::runtime_error("rendezvous: '" + key + "' holds " + std::to_string(value.size()) +
                               " bytes, an NCCL id has " + std::to_string(transport::kNcclIdBytes));
    }
    transport::NcclId id;
    std::memcpy(id.data(), value.data(), id.size());
    return id;
  };
}

}  // namespace tessel::stage
