// A raw peer: rank 1 of a two-rank mesh is played by the test, writing bytes of its choice to
// rank 0, a TcpCommunicator (for malformed, hostile or oversized frames).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "local_mesh.h"
#include "noderuntime/transport/mesh.h"
#include "noderuntime/transport/message_header.h"
#include "noderuntime/transport/socket.h"

namespace tessel::transport::testing {

struct RawMesh {
  std::unique_ptr<TcpCommunicator> comm;  // rank 0
  UniqueFd raw;                           // rank 1's end of their link
  uint64_t next_sequence = 0;

  void write(std::span<const std::byte> data) {
    send_all(raw.get(), data, std::chrono::steady_clock::now() + std::chrono::seconds(5));
  }
  // Writes one whole-message frame, numbered as the link's next message.
  void write_message(MessageHeader header, const std::vector<float>& payload) {
    header.sequence = next_sequence++;
    write(encode_header(header));
    write(bytes(payload));
  }
};

// customize: adjusts rank 0's options (io_timeout, max_message_bytes, ...).
inline RawMesh make_raw_mesh(const std::function<void(TcpOptions&)>& customize = {}) {
  LocalAddresses addresses = bind_local(2);
  RawMesh mesh;
  std::thread listener_side([&] {
    TcpOptions options = local_options(addresses.peers, 0);
    if (customize) customize(options);
    mesh.comm = std::make_unique<TcpCommunicator>(options, addresses.listeners[0]);
  });
  MeshOptions raw_side;
  raw_side.job_id = kJob;
  raw_side.rank = 1;
  raw_side.peers = addresses.peers;
  raw_side.connect_timeout = std::chrono::seconds(10);
  std::vector<MeshLink> links = establish_mesh(raw_side, addresses.listeners[1]);
  listener_side.join();
  mesh.raw = std::move(links[0].streams.at(0));
  return mesh;
}

}  // namespace tessel::transport::testing
