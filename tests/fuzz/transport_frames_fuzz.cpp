// The frames of one link as the receiving TcpPeer (noderuntime/transport/tcp_peer.h) reads them
// from its socket: what a peer's stream delivers, through a real socket (a socketpair whose
// writing end is closed once the input is in, so that the link ends). The input is a list of
// frames, each a length-prefixed piece: its first kHeaderBytes bytes are a frame header (with
// its header CRC32C made right, so that the fields behind it are reached; transport_header
// fuzzes the checksum itself), the rest the bytes that follow it. Two receives wait on the link
// (an activation of step 0 and a gradient of step 0, 4 floats each), so that frames both match a
// posted receive and are kept for a later one. The link accepts messages of at most 1 MiB
// (max_message_bytes), as a deployment may set it; a frame that announces more must fail the
// link before anything is allocated. A TransportError on a receive is the refusal; every
// receive must end (the link's io_timeout is 20 ms, so that a frame waiting for an earlier
// message that never comes costs little).
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/message_header.h"
#include "noderuntime/transport/tcp_peer.h"
#include "noderuntime/transport/transport_error.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace tessel::transport;

constexpr uint64_t kJob = 0x7e55e1;

std::vector<std::byte> stream_of(const uint8_t* data, size_t size) {
  std::vector<std::byte> out;
  for (const std::string_view piece : tessel::fuzz::length_prefixed_pieces(data, size)) {
    EncodedHeader header{};
    const size_t head = std::min(piece.size(), kHeaderBytes);
    std::copy_n(reinterpret_cast<const std::byte*>(piece.data()), head, header.begin());
    const uint32_t crc = crc32c(std::span<const std::byte>(header).first(kHeaderBytes - 4));
    for (size_t i = 0; i < 4; ++i) header[kHeaderBytes - 4 + i] = std::byte(crc >> (8 * i));
    out.insert(out.end(), header.begin(), header.end());
    const auto* rest = reinterpret_cast<const std::byte*>(piece.data()) + head;
    out.insert(out.end(), rest, rest + (piece.size() - head));
  }
  return out;
}

std::string outcome(Request request) {
  try {
    request.wait();
  } catch (const TransportError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::byte> bytes = stream_of(data, size);
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  UniqueFd peer(fds[0]);
  std::vector<UniqueFd> streams;
  streams.emplace_back(fds[1]);
  TcpPeerOptions options;
  options.job_id = kJob;
  options.name = "fuzz peer";
  options.io_timeout = std::chrono::milliseconds(20);
  options.max_message_bytes = 1 << 20;
  TcpPeer link(std::move(streams), options);
  std::vector<float> activation(4), gradient(4);
  const TensorInfo activation_info{Tag::kActivation, 0, 0, 0, DType::kF32, {4}};
  const TensorInfo gradient_info{Tag::kGradient, 0, 0, 0, DType::kF32, {4}};
  Request first = link.recv(activation_info, std::as_writable_bytes(std::span(activation)));
  // The link's receiver reads as this writes; once it has failed the link it stops reading and
  // closes its end, and the rest of the stream is not wanted.
  for (size_t at = 0; at < bytes.size();) {
    const ssize_t n = ::send(peer.get(), bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  ::shutdown(peer.get(), SHUT_WR);
  Request second = link.recv(gradient_info, std::as_writable_bytes(std::span(gradient)));
  outcome(first);
  outcome(second);
  link.close();
  return 0;
}
