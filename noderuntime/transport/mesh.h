// Start-up of the full mesh: one link per pair of ranks, of one or more TCP connections
// ("streams", stream_plan.h). The lower rank of a pair listens and the higher one connects
// (retrying until the deadline, since peers start in any order) and decides the link's streams
// and socket buffers: from the configured count, or from the link's capacity and the round trip
// the kernel measured while connecting its first stream. Each connection sends a hello (job id,
// its rank, the rank it meant to reach, the world size, its stream index, the link's stream
// count and buffer size) that the listener checks, applies and answers with accept or a
// rejection reason. A rejected or malformed
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
#include "noderuntime/transport/stream_plan.h"

namespace tessel::transport {

struct MeshOptions {
  uint64_t job_id = 0;
  int rank = 0;
  std::vector<PeerAddress> peers;  // index = rank; peers.size() is the world size
  std::chrono::milliseconds connect_timeout{30000};
  // Streams of every link this rank connects: 0 chooses per link (plan_link_streams).
  int streams_per_link = 0;
  std::vector<double> link_capacity;  // bytes/s, index = peer rank; empty or 0: unknown
  SocketBufferLimits buffer_limits;
};

struct MeshLink {
  std::vector<UniqueFd> streams;  // connection k carries stream k; empty at this rank
  // The connecting rank's plan; on the listening side only streams and buffer_bytes are known.
  StreamPlan plan;
  double rtt_s = 0;  // measured on stream 0 by the connecting rank; 0 on the listening side
};

// Returns the link to every peer (no streams at this rank), TCP_NODELAY set on every
// connection. `listener` must be this rank's listening socket. Throws TransportError naming the
// peer (and the stream, when the link has several).
std::vector<MeshLink> establish_mesh(const MeshOptions& options, const TcpListener& listener);

}  // namespace tessel::transport
