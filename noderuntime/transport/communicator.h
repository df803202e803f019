// The backend-neutral communicator a stage runs on: ranks 0..size()-1, point-to-point tensor
// messages and an all-reduce over any group of ranks. The TCP backend (tcp_communicator.h)
// implements it over sockets shaped by the link emulator. On GPUs that NCCL reaches, NCCL runs the
// collectives inside an island (nccl_communicator.h, the IslandCollective of
// hierarchical_all_reduce.h), and the hierarchical all-reduce joins islands over this interface.
//
// Semantics every backend keeps:
// - Messages from one peer are matched to receives by their key (tag, step, micro-batch,
//   chunk); messages with the same key are matched in the order they were sent, so an
//   activation and a gradient arriving in either order never block each other.
// - isend / irecv / iall_reduce return at once; the buffers must stay valid and untouched until
//   the request completes. send / recv / all_reduce are the waiting forms.
// - Failures (peer gone, silent past the timeout, malformed or unexpected message, closed
//   communicator) complete the request with a TransportError naming the peer; nothing hangs.
// - The members of a group issue the all-reduces of that group in the same order. Messages
//   tagged Tag::kAllReduce belong to the collectives; point-to-point traffic uses other tags.
// - Invalid arguments (a peer out of range or this rank itself, a buffer whose size is not
//   payload_bytes_of(info), a bad group) throw TransportError at once.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "noderuntime/transport/message_header.h"
#include "noderuntime/transport/request.h"

namespace tessel::transport {

enum class ReduceOp { kSum };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends `payload`, whose size must be payload_bytes_of(info), to `peer`.
  virtual Request isend(int peer, const TensorInfo& info, std::span<const std::byte> payload) = 0;
  // Receives the message from `peer` with expected's key into `buffer`; the message must have
  // expected's dtype and shape and buffer must be exactly its size.
  virtual Request irecv(int peer, const TensorInfo& expected, std::span<std::byte> buffer) = 0;
  // Sums `count` elements of `dtype` at `data` over `group` in place; group lists the members
  // (this rank among them) in ring order. Every member ends with bit-identical results.
  virtual Request iall_reduce(void* data, size_t count, DType dtype, const std::vector<int>& group,
                              ReduceOp op = ReduceOp::kSum) = 0;
  // Cancels every pending operation (each fails with "communicator closed") and releases the
  // connections. Idempotent; the destructor of a backend closes it.
  virtual void close() = 0;

  void send(int peer, const TensorInfo& info, std::span<const std::byte> payload) {
    isend(peer, info, payload).wait();
  }
  void recv(int peer, const TensorInfo& expected, std::span<std::byte> buffer) {
    irecv(peer, expected, buffer).wait();
  }
  void all_reduce(void* data, size_t count, DType dtype, const std::vector<int>& group,
                  ReduceOp op = ReduceOp::kSum) {
    iall_reduce(data, count, dtype, group, op).wait();
  }
};

}  // namespace tessel::transport
