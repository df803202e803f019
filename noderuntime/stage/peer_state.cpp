#include "noderuntime/stage/peer_state.h"

#include <exception>

namespace tessel::stage {
namespace {

// ok, bytes (2), crc32c, step (2), data_position (2), seed (2), stage, replica.
constexpr size_t kHeaderWords = 12;

transport::TensorInfo header_info(int64_t step) {
  return {transport::Tag::kControl, static_cast<uint64_t>(step),         0, kPeerStateChunk,
          transport::DType::kI32,   {static_cast<int64_t>(kHeaderWords)}};
}

transport::TensorInfo file_info(int64_t step, uint64_t bytes) {
  return {transport::Tag::kControl,
          static_cast<uint64_t>(step),
          1,
          kPeerStateChunk,
          transport::DType::kI32,
          {static_cast<int64_t>((bytes + 3) / 4)}};
}

void put64(uint32_t* out, uint64_t value) {
  out[0] = static_cast<uint32_t>(value);
  out[1] = static_cast<uint32_t>(value >> 32);
}

uint64_t get64(const uint32_t* in) { return uint64_t{in[0]} | uint64_t{in[1]} << 32; }

}  // namespace

void send_peer_state(transport::Communicator& comm, const std::vector<int>& peers, int64_t step,
                     const std::optional<PeerState>& state) {
  uint32_t header[kHeaderWords] = {};
  std::vector<std::byte> padded;
  if (state) {
    const StateFacts& f = state->facts;
    header[0] = 1;
    put64(header + 1, f.bytes);
    header[3] = f.crc32c;
    put64(header + 4, static_cast<uint64_t>(f.step));
    put64(header + 6, static_cast<uint64_t>(f.data_position));
    put64(header + 8, f.seed);
    header[10] = static_cast<uint32_t>(f.stage);
    header[11] = static_cast<uint32_t>(f.replica);
    padded = state->bytes;
    padded.resize((padded.size() + 3) / 4 * 4, std::byte{0});
  }
  // To every peer at once (each over its own connection), then wait for all.
  std::vector<transport::Request> sends;
  for (int peer : peers) {
    sends.push_back(comm.isend(peer, header_info(step), std::as_bytes(std::span(header))));
    if (state) sends.push_back(comm.isend(peer, file_info(step, state->bytes.size()), padded));
  }
  // Every request waited before the buffers go, the first failure thrown after.
  std::exception_ptr failure;
  for (transport::Request& send : sends) {
    try {
      send.wait();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

void receive_peer_state(transport::Communicator& comm, int peer, const std::string& peer_label,
                        int64_t step, StageRuntime& runtime) {
  uint32_t header[kHeaderWords] = {};
  comm.recv(peer, header_info(step), std::as_writable_bytes(std::span(header)));
  const std::string what = "the state of step " + std::to_string(step) + " from " + peer_label;
  if (header[0] != 1) {
    throw CheckpointError(what + ": the peer could not read its state (its error says why)");
  }
  StateFacts facts;
  facts.bytes = get64(header + 1);
  facts.crc32c = header[3];
  facts.step = static_cast<int64_t>(get64(header + 4));
  facts.data_position = static_cast<int64_t>(get64(header + 6));
  facts.seed = get64(header + 8);
  facts.stage = static_cast<int>(header[10]);
  facts.replica = static_cast<int>(header[11]);
  if (facts.step != step) {
    throw CheckpointError(what + ": its header says step " + std::to_string(facts.step));
  }
  const uint64_t limit = max_state_bytes(runtime);
  if (facts.bytes > limit) {
    throw CheckpointError(what + ": " + std::to_string(facts.bytes) +
                          " bytes, more than this rank's tensors and the largest safetensors "
                          "header can take (" +
                          std::to_string(limit) + ")");
  }
  std::vector<std::byte> bytes((facts.bytes + 3) / 4 * 4);
  comm.recv(peer, file_info(step, facts.bytes), bytes);
  bytes.resize(facts.bytes);
  load_state(bytes, facts, what, what + " (its header)", runtime);
}

}  // namespace tessel::stage
