// A rank's training state sent to a data-parallel peer of its stage over the job's transport,
// for a peer that has no verified state of the step the job resumes from (resume_plan.h). What
// travels is the sender's verified rank file as it is on disk (parameters, AdamW moments, step,
// data position, seed and what the rank was, every tensor's CRC32C and the metadata's checksum
// inside) after a header with what its manifest says of it (checkpoint.h StateFacts). The
// receiver checks it exactly as a file from its own dir (load_state: the whole file's CRC32C,
// every tensor's, the metadata, the stage, the shapes, finite values) and loads it, so it ends
// with the bytes the sender loaded.
//
// Messages (Tag::kControl, step = the step resumed from, chunk kPeerStateChunk):
//   micro-batch 0: header, kHeaderWords i32: ok (0: the sender could not read its state, and
//                  nothing follows), then bytes, crc32c, step, data_position, seed, stage,
//                  replica in 32-bit words (64-bit values low word first)
//   micro-batch 1: the file, i32 words, zero-padded to a multiple of 4 bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/stage_runtime.h"
#include "noderuntime/transport/communicator.h"

namespace tessel::stage {

inline constexpr uint32_t kPeerStateChunk = 0x50454552u;  // "PEER"

// A verified state to send: its facts and the rank file's bytes.
struct PeerState {
  StateFacts facts;
  std::vector<std::byte> bytes;
};

// Sends `state` of step `step` to every one of `peers` at once, or (nullopt) the header that
// says this rank could not read it, so that they fail at once instead of waiting. Returns when
// every send is done; throws the transport's error.
void send_peer_state(transport::Communicator& comm, const std::vector<int>& peers, int64_t step,
                     const std::optional<PeerState>& state);

// Receives the state of step `step` that `peer` (named `peer_label`) sends, checks it and loads
// it into runtime (checkpoint.h load_state). Throws CheckpointError when the peer could not
// read its state, when the header is of another step or larger than this rank's state can be,
// or when a check fails; the transport's error when the peer is gone.
void receive_peer_state(transport::Communicator& comm, int peer, const std::string& peer_label,
                        int64_t step, StageRuntime& runtime);

}  // namespace tessel::stage
