// One established connection to one peer, with a sender thread and a receiver thread (a
// thread pair per peer rather than an epoll loop: the sender sleeps through the link
// emulator's pacing without holding up any other peer, and each thread's code reads in order).
//
// Sender: takes queued messages in FIFO order, computes the payload CRC32C, encodes the
// header and writes header and payload, paced by the link's LinkPacer when it is shaped
// (pieces of at most the burst, each written at its delivery time; after the peer has held a
// write back, the schedule restarts from that moment instead of bursting to catch up).
// Receiver: reads a header, validates it, and matches it by key to the oldest posted receive,
// reading the payload straight into that receive's buffer; a message nobody waits for yet is
// kept (with its checksum verdict) until a receive asks for it.
//
// A peer fails as a whole (connection closed, a malformed header, silence past io_timeout
// while a receive waits, a send that makes no progress for io_timeout): every pending and
// later operation on it fails with the first error, which names the peer. Messages that had
// fully arrived before the failure can still be received.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
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

struct TcpPeerOptions {
  uint64_t job_id = 0;
  std::string name;  // describe_peer(), the prefix of every error
  LinkShape shape;   // of the link from this rank to the peer
  size_t burst_bytes = kDefaultBurstBytes;
  std::chrono::milliseconds io_timeout{30000};
};

class TcpPeer {
 public:
  TcpPeer(UniqueFd socket, TcpPeerOptions options);
  ~TcpPeer();
  TcpPeer(const TcpPeer&) = delete;
  TcpPeer& operator=(const TcpPeer&) = delete;

  // The caller has checked that payload is payload_bytes_of(info) bytes.
  Request send(const TensorInfo& info, std::span<const std::byte> payload);
  // The caller has checked that buffer is payload_bytes_of(expected) bytes.
  Request recv(const TensorInfo& expected, std::span<std::byte> buffer);
  // Fails every pending operation with "<name>: communicator closed" and joins the threads.
  void close();

 private:
  struct Outgoing {
    MessageHeader header;
    std::span<const std::byte> payload;
    std::shared_ptr<Completion> completion;
    SteadyTime enqueued;
  };
  struct PostedRecv {
    TensorInfo expected;
    std::span<std::byte> buffer;
    std::shared_ptr<Completion> completion;
  };
  struct Arrived {
    MessageHeader header;
    std::vector<std::byte> payload;
    std::optional<std::string> error;  // e.g. a checksum mismatch, reported to its receive
  };

  void send_loop();
  void send_message(Outgoing& message);
  // Returns whether it had to wait for the peer to make room.
  bool write_bytes(std::span<const std::byte> bytes);
  bool wait_until_due(SteadyTime due);

  void receive_loop();
  void receive_message();
  // Reads into `target`, a receive taken off posted_; fails it (not the peer) when the message
  // does not match it or its checksum is wrong.
  void receive_into(PostedRecv& target, const MessageHeader& header);
  void read_bytes(std::span<std::byte> out, uint32_t* crc);
  void wait_readable();
  void discard_bytes(uint64_t bytes);
  // Completes a receive from a message kept in arrived_.
  void deliver(PostedRecv& recv, const Arrived& message) const;
  std::string message_error(const MessageKey& key, const std::string& reason) const;

  // Records the peer's failure (the first one wins; once closing, "communicator closed"),
  // fails the queued sends and posted receives, stops both threads, and returns the failure
  // text. The operation a thread is working on is failed by that thread, never by another one
  // (its buffer may still be in use). `reason` is without the peer name.
  std::string fail(const std::string& reason);
  // Counts receives waiting on this peer, starting or stopping the silence timer.
  void update_waiting_locked();

  const TcpPeerOptions options_;
  UniqueFd socket_;
  UniqueFd stop_event_;         // eventfd, readable once the peer is stopping; never drained
  UniqueFd recv_posted_event_;  // eventfd, wakes the receiver to re-arm its silence timer
  LinkPacer pacer_;
  SteadyTime backpressure_floor_;  // sender thread only: no piece is ready before this

  std::mutex mu_;
  std::condition_variable send_cv_;
  std::deque<Outgoing> outgoing_;
  std::deque<PostedRecv> posted_;
  std::deque<Arrived> arrived_;
  bool filling_posted_ = false;  // the receiver is reading into a receive taken off posted_
  std::optional<SteadyTime> waiting_since_;  // set while a receive waits on this peer
  SteadyTime last_data_;
  bool closing_ = false;
  std::optional<std::string> failure_;

  std::once_flag close_once_;
  std::thread sender_;
  std::thread receiver_;
};

}  // namespace tessel::transport
