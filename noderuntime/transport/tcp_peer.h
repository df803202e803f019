// The link to one peer: one or more established TCP connections ("streams", stream_plan.h), a
// sender and a receiver thread per stream (a thread pair per stream rather than an epoll loop:
// a sender sleeps through the link emulator's pacing or the kernel's back-pressure without
// holding up any other stream or peer, and each thread's code reads in order).
//
// Sending: every message gets the link's next sequence number. A message of at least twice
// min_piece_bytes is cut into up to one piece per stream (contiguous, near-equal, at least
// min_piece_bytes each), smaller ones travel whole; the pieces of message s go to the streams
// from s mod N on, so small messages spread over the streams too. Each piece is a frame
// (message_header.h: the message's description, sequence, piece offset and bytes, stream,
// piece CRC32C) followed by its bytes; a stream's sender writes its frames in sequence order,
// paced by the link emulator's LinkPacer when the link is shaped (each stream at the link's
// rate / N; pieces of at most the burst, each written at its delivery time; after the peer has
// held a write back, the schedule restarts from that moment instead of bursting to catch up).
// A send completes when all its pieces are written.
//
// Receiving: each stream's receiver reads a frame and validates it. The first frame of message
// s to arrive on any stream (after every earlier message has begun) matches it by key to the
// oldest posted receive, or keeps it for a later one; matching in sequence order keeps the
// per-key FIFO of communicator.h across streams. Each piece is then read straight into the
// receive's buffer at its offset (or into the kept copy), so N streams fill one buffer side by
// side; the message completes when its last byte is in. A receive posted while a kept message
// is still arriving waits for it.
//
// A link fails as a whole (every stream closed, or any stream reset or closed in the middle of
// a frame, a malformed or inconsistent frame, a message larger than max_message_bytes,
// silence past io_timeout while a receive waits, a send that makes no progress for io_timeout):
// every pending and later operation on it fails with the first error, which names the peer and,
// on a link of several streams, the stream. Messages that had fully arrived before the failure
// can still be received.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/transport/link_emulator.h"
#include "noderuntime/transport/message_header.h"
#include "noderuntime/transport/request.h"
#include "noderuntime/transport/socket.h"

namespace tessel::transport {

// Below twice this many bytes a message is not cut: the frame costs more than the parallelism
// gains, and a pipeline's small messages stay one write each.
constexpr size_t kDefaultMinPieceBytes = 256 * 1024;

// The largest message a receiver accepts: a frame whose header announces a bigger payload fails
// the link before anything is allocated for it. The biggest message the runtime sends is a
// rank's whole training state to a data-parallel peer (stage/peer_state.h: the rank file, fp32
// parameters and both AdamW moments, 12 bytes a parameter): ~75 GiB for the largest preset,
// gpt3-6.7b, held by one stage. 128 GiB leaves that room and still refuses the lengths a broken
// or hostile peer announces (up to 2^64), which the receiver would otherwise try to allocate.
constexpr uint64_t kDefaultMaxMessageBytes = uint64_t{128} << 30;

struct TcpPeerOptions {
  uint64_t job_id = 0;
  std::string name;  // describe_peer(), the prefix of every error
  LinkShape shape;   // of the link from this rank to the peer; its streams share it
  size_t burst_bytes = kDefaultBurstBytes;
  std::chrono::milliseconds io_timeout{30000};
  size_t min_piece_bytes = kDefaultMinPieceBytes;
  uint64_t max_message_bytes = kDefaultMaxMessageBytes;
};

class TcpPeer {
 public:
  // `streams` are the link's connections, stream k at index k (at least one).
  TcpPeer(std::vector<UniqueFd> streams, TcpPeerOptions options);
  ~TcpPeer();
  TcpPeer(const TcpPeer&) = delete;
  TcpPeer& operator=(const TcpPeer&) = delete;

  int streams() const { return static_cast<int>(streams_.size()); }
  // The caller has checked that payload is payload_bytes_of(info) bytes.
  Request send(const TensorInfo& info, std::span<const std::byte> payload);
  // The caller has checked that buffer is payload_bytes_of(expected) bytes.
  Request recv(const TensorInfo& expected, std::span<std::byte> buffer);
  // Fails every pending operation with "<name>: communicator closed" and joins the threads.
  void close();

 private:
  // One send, complete when none of its pieces is unfinished.
  struct SendState {
    std::shared_ptr<Completion> completion;
    size_t unfinished = 0;
    std::optional<std::string> error;
  };
  struct Piece {
    MessageHeader header;  // piece crc filled in by the sender thread
    std::span<const std::byte> bytes;
    std::shared_ptr<SendState> message;
    SteadyTime enqueued;
  };
  struct PostedRecv {
    TensorInfo expected;
    std::span<std::byte> buffer;
    std::shared_ptr<Completion> completion;
  };
  // A message whose pieces are arriving.
  struct Incoming {
    MessageHeader header;               // its first frame (the message fields are checked)
    std::optional<PostedRecv> target;   // the receive it matched; pieces are read into it
    std::unique_ptr<std::byte[]> held;  // without a target: the payload, kept
    std::optional<PostedRecv> claim;    // without a target: a receive posted since it began
    uint64_t bytes_left = 0;
    int readers = 0;                     // threads reading a piece of it right now
    std::optional<std::string> problem;  // mismatch with the target, or a bad piece checksum
  };
  struct Arrived {
    MessageHeader header;
    std::unique_ptr<std::byte[]> payload;
    std::optional<std::string> error;  // e.g. a checksum mismatch, reported to its receive
  };
  struct Stream {
    int index = 0;
    UniqueFd socket;
    UniqueFd recv_posted_event;  // eventfd, wakes the receiver to re-arm its silence timer
    LinkPacer pacer;
    SteadyTime backpressure_floor;          // sender thread only: no piece is ready before this
    std::deque<Piece> outgoing;             // under mu_
    std::optional<uint64_t> last_sequence;  // receiver thread only: of its latest frame
    std::thread sender, receiver;
  };

  void send_loop(Stream& stream);
  void send_piece(Stream& stream, Piece& piece);
  // Returns whether it had to wait for the peer to make room.
  bool write_bytes(Stream& stream, std::span<const std::byte> bytes);
  bool wait_until_due(SteadyTime due);
  // Counts a piece of a send as done (written, or failed with `error`).
  void finish_piece(const std::shared_ptr<SendState>& message,
                    const std::optional<std::string>& error);

  void receive_loop(Stream& stream);
  void receive_frame(Stream& stream);
  // The entry of message `header.sequence`, matched to a receive when it is the first frame.
  Incoming& incoming_for(const MessageHeader& header);
  void read_bytes(Stream& stream, std::span<std::byte> out, uint32_t* crc);
  void wait_readable(Stream& stream);
  void discard_bytes(Stream& stream, uint64_t bytes, uint32_t* crc);
  // Completes a receive from a message that has fully arrived.
  void deliver(PostedRecv& recv, const Arrived& message) const;
  std::string message_error(const MessageKey& key, const std::string& reason) const;
  std::string stream_reason(const Stream& stream, const std::string& reason) const;

  // Records the link's failure (the first one wins; once closing, "communicator closed"),
  // fails the queued pieces, posted receives and messages no thread is reading into, stops
  // every thread, and returns the failure text. The operation a thread is working on is
  // failed by that thread, never by another one (its buffer may still be in use). `reason` is
  // without the peer name.
  std::string fail(const std::string& reason);
  // Counts receives waiting on this peer, starting or stopping the silence timer.
  void update_waiting_locked();

  const TcpPeerOptions options_;
  std::vector<std::unique_ptr<Stream>> streams_;
  UniqueFd stop_event_;  // eventfd, readable once the peer is stopping; never drained

  std::mutex mu_;
  std::condition_variable send_cv_;
  std::condition_variable match_cv_;  // next_to_match_ moved, or the link is stopping
  uint64_t next_send_sequence_ = 0;
  uint64_t next_to_match_ = 0;
  std::deque<PostedRecv> posted_;
  std::map<uint64_t, Incoming> incoming_;    // by sequence
  std::map<uint64_t, Arrived> arrived_;      // by sequence, complete, no receive yet
  std::vector<int> closed_streams_;          // closed cleanly by the peer, the link still open
  int attached_ = 0;                         // incoming messages with a target or a claim
  std::optional<SteadyTime> waiting_since_;  // set while a receive waits on this peer
  SteadyTime last_data_;
  bool closing_ = false;
  std::optional<std::string> failure_;

  std::once_flag close_once_;
};

}  // namespace tessel::transport
