// The probe protocol's framing over one TCP connection. A frame is a 12-byte header (magic
// "TPRB", type, three zero bytes, payload length as little-endian u32) and its payload. Every
// header is checked before its payload is read: magic, a known type, zero reserved bytes and a
// payload no longer than that type allows, so a hostile peer cannot make the reader allocate or
// wait for more than one data frame. Every read and write has a deadline (the I/O timeout).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "noderuntime/transport/link_emulator.h"
#include "noderuntime/transport/socket.h"

namespace tessel::prober {

// Version 2 adds the bulk phase over several connections: the hello carries a session ticket
// (zero for a new session) and a v2 server's accepted frame offers the session's ticket and how
// many connections may join it (probe_handshake.h). Each side still speaks version 1 to a peer
// that only knows it (one connection), so probers of both versions measure each other while an
// upgrade rolls across clusters.
inline constexpr uint32_t kProtocolVersion = 2;
inline constexpr uint32_t kOldestProtocolVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 12;
// The largest data frame (a bulk message); control frames are far smaller.
inline constexpr size_t kMaxDataFrameBytes = 16 * 1024 * 1024;
// A prober's name ("<node>" or "<cluster>/<node>") in the hello: DNS names are at most 253.
inline constexpr size_t kMaxPeerNameBytes = 512;
inline constexpr size_t kPingPayloadBytes = 8;
inline constexpr size_t kTicketBytes = 16;
// A sync-ack's payload in a session of `version`.
inline constexpr size_t sync_ack_bytes(uint32_t version) { return version >= 2 ? 16 : 8; }

enum class FrameType : uint8_t {
  kHello = 1,  // client: version u32, nonce, (version 2: session ticket), name
  kChallenge,  // server: nonce, server proof
  kResponse,   // client: client proof
  kAccepted,   // server: (version 2: session ticket, joins offered u16); measurements may start
  kRefused,    // either side: reason (text); the connection ends
  kPing,       // client: 8 bytes, echoed in a pong
  kPong,       // server
  kData,       // client: payload counted and dropped
  kSync,       // client: empty; asks for the data byte count since the last sync
  kSyncAck,    // server: u64 bytes, (version 2: u64 ns of the server's steady clock on reading it)
  kBye,        // client: empty; the session ends
};

const char* frame_type_name(FrameType type);
// The largest payload a frame of `type` may carry.
size_t max_payload_bytes(FrameType type);

struct FrameHeader {
  FrameType type;
  uint32_t length;
};
// Throws ProbeError naming the bad field: magic, type, reserved bytes or length over the limit.
FrameHeader decode_frame_header(std::span<const std::byte, kFrameHeaderBytes> bytes);
std::array<std::byte, kFrameHeaderBytes> encode_frame_header(FrameHeader header);

class ProbeChannel {
 public:
  // `fd` is a connected socket with Nagle's algorithm off (transport::set_tcp_nodelay); `peer`
  // is how errors name the other end; `shape` (optional) paces what this side sends through the
  // transport's link emulator. The sender is synchronous: each frame leaves at its delivery
  // time, so the emulated latency is paid once per frame (back-to-back frames do not overlap
  // it; shape latency and bandwidth in separate measurements).
  ProbeChannel(transport::UniqueFd fd, std::string peer, std::chrono::milliseconds io_timeout,
               transport::LinkShape shape = {});

  // Throw ProbeError "<peer>: <what>" on any socket failure or timeout.
  void send(FrameType type, std::span<const std::byte> payload = {});
  // The next frame; its payload replaces `payload`'s contents. A refused frame throws
  // ProbeRefused with the peer's reason.
  FrameType receive(std::vector<std::byte>& payload);
  // receive(), and throws ProbeError unless the frame is `expected` with a payload of exactly
  // `length` bytes (when given).
  void receive_expected(FrameType expected, std::vector<std::byte>& payload,
                        std::optional<size_t> length = std::nullopt);

  const std::string& peer() const { return peer_; }
  // Everything this side has written (headers included): what the probe cost the link.
  uint64_t bytes_sent() const { return bytes_sent_; }
  int fd() const { return fd_.get(); }
  void set_io_timeout(std::chrono::milliseconds io_timeout) { io_timeout_ = io_timeout; }

 private:
  // `ready`: when the frame was handed to the emulated link (ignored when unshaped).
  void write(std::span<const std::byte> bytes, transport::SteadyTime ready);

  transport::UniqueFd fd_;
  std::string peer_;
  std::chrono::milliseconds io_timeout_;
  std::optional<transport::LinkPacer> pacer_;
  uint64_t bytes_sent_ = 0;
};

}  // namespace tessel::prober
