// Start-up of the full mesh: one TCP connection per pair of ranks. The lower rank of a pair
// listens and the higher one connects (retrying until the deadline, since peers start in any
// order), then sends a hello (job id, its rank, the rank it meant to reach, the world size) that
// the listener checks and answers with accept or a rejection reason. A rejected or malformed
// connection is answered, closed and remembered; the listener keeps waiting for the right one
// until the deadline, whose error lists the ranks still missing and the last rejection.
//
// Every rank first connects to all lower ranks, then accepts all higher ones. This cannot
// deadlock: rank 0 only accepts, and a rank answers its higher peers once every lower rank
// has answered it.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "noderuntime/transport/peer_address.h"
#include "noderuntime/transport/socket.h"

namespace tessel::transport {

struct MeshOptions {
  uint64_t job_id = 0;
  int rank = 0;
  std::vector<PeerAddress> peers;  // index = rank; peers.size() is the world size
  std::chrono::milliseconds connect_timeout{30000};
};

// Returns the connected socket for every peer (invalid at this rank), TCP_NODELAY set.
// `listener` must be this rank's listening socket. Throws TransportError naming the peer.
std::vector<UniqueFd> establish_mesh(const MeshOptions& options, const TcpListener& listener);

}  // namespace tessel::transport
