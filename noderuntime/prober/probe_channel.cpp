#include "noderuntime/prober/probe_channel.h"

#include <array>
#include <cstring>
#include <thread>

#include "noderuntime/prober/probe_error.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::prober {
namespace {

constexpr std::array<std::byte, 4> kMagic = {std::byte{'T'}, std::byte{'P'}, std::byte{'R'},
                                             std::byte{'B'}};
constexpr uint8_t kLastFrameType = static_cast<uint8_t>(FrameType::kBye);
constexpr size_t kMaxReasonBytes = 1024;

}  // namespace

const char* frame_type_name(FrameType type) {
  switch (type) {
    case FrameType::kHello:
      return "hello";
    case FrameType::kChallenge:
      return "challenge";
    case FrameType::kResponse:
      return "response";
    case FrameType::kAccepted:
      return "accepted";
    case FrameType::kRefused:
      return "refused";
    case FrameType::kPing:
      return "ping";
    case FrameType::kPong:
      return "pong";
    case FrameType::kData:
      return "data";
    case FrameType::kSync:
      return "sync";
    case FrameType::kSyncAck:
      return "sync-ack";
    case FrameType::kBye:
      return "bye";
  }
  return "unknown";
}

size_t max_payload_bytes(FrameType type) {
  switch (type) {
    case FrameType::kHello:
      return 4 + 32 + kTicketBytes + kMaxPeerNameBytes;
    case FrameType::kChallenge:
      return 32 + 32;
    case FrameType::kResponse:
      return 32;
    case FrameType::kRefused:
      return kMaxReasonBytes;
    case FrameType::kAccepted:
      return kTicketBytes + 2;
    case FrameType::kPing:
    case FrameType::kPong:
      return kPingPayloadBytes;
    case FrameType::kData:
      return kMaxDataFrameBytes;
    case FrameType::kSyncAck:
      return sync_ack_bytes(kProtocolVersion);
    case FrameType::kSync:
    case FrameType::kBye:
      return 0;
  }
  return 0;
}

FrameHeader decode_frame_header(std::span<const std::byte, kFrameHeaderBytes> bytes) {
  if (std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    throw ProbeError("frame header: bad magic (not the tessel probe protocol)");
  }
  const auto type = static_cast<uint8_t>(bytes[4]);
  if (type == 0 || type > kLastFrameType) {
    throw ProbeError("frame header: unknown frame type " + std::to_string(type));
  }
  if (bytes[5] != std::byte{0} || bytes[6] != std::byte{0} || bytes[7] != std::byte{0}) {
    throw ProbeError("frame header: reserved bytes are not zero");
  }
  uint32_t length = 0;
  for (int i = 3; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(bytes[8 + i]);
  const FrameHeader header{static_cast<FrameType>(type), length};
  if (length > max_payload_bytes(header.type)) {
    throw ProbeError(std::string("frame header: a ") + frame_type_name(header.type) + " frame of " +
                     std::to_string(length) + " bytes exceeds its limit of " +
                     std::to_string(max_payload_bytes(header.type)) + " bytes");
  }
  return header;
}

std::array<std::byte, kFrameHeaderBytes> encode_frame_header(FrameHeader header) {
  std::array<std::byte, kFrameHeaderBytes> bytes{};
  std::memcpy(bytes.data(), kMagic.data(), kMagic.size());
  bytes[4] = static_cast<std::byte>(header.type);
  for (int i = 0; i < 4; ++i) bytes[8 + i] = static_cast<std::byte>(header.length >> (8 * i));
  return bytes;
}

ProbeChannel::ProbeChannel(transport::UniqueFd fd, std::string peer,
                           std::chrono::milliseconds io_timeout, transport::LinkShape shape)
    : fd_(std::move(fd)), peer_(std::move(peer)), io_timeout_(io_timeout) {
  if (shape.shaped()) pacer_.emplace(shape);
}

void ProbeChannel::write(std::span<const std::byte> bytes, transport::SteadyTime ready) {
  try {
    if (!pacer_) {
      transport::send_all(fd_.get(), bytes, std::chrono::steady_clock::now() + io_timeout_);
      return;
    }
    // The emulated link: each piece goes out when the pacer says it reaches the far end.
    while (!bytes.empty()) {
      const auto piece = bytes.first(std::min(bytes.size(), pacer_->burst_bytes()));
      std::this_thread::sleep_until(pacer_->delivery_time(piece.size(), ready));
      transport::send_all(fd_.get(), piece, std::chrono::steady_clock::now() + io_timeout_);
      bytes = bytes.subspan(piece.size());
    }
  } catch (const transport::TransportError& e) {
    throw ProbeError(peer_ + ": " + e.what());
  }
}

void ProbeChannel::send(FrameType type, std::span<const std::byte> payload) {
  if (payload.size() > max_payload_bytes(type)) {
    throw ProbeError(peer_ + ": a " + frame_type_name(type) + " frame of " +
                     std::to_string(payload.size()) + " bytes exceeds its limit of " +
                     std::to_string(max_payload_bytes(type)) + " bytes");
  }
  const auto header = encode_frame_header({type, static_cast<uint32_t>(payload.size())});
  // The whole frame is handed to the (emulated) link at once: its latency is paid once.
  const auto ready = std::chrono::steady_clock::now();
  write(header, ready);
  if (!payload.empty()) write(payload, ready);
  bytes_sent_ += header.size() + payload.size();
}

FrameType ProbeChannel::receive(std::vector<std::byte>& payload) {
  std::array<std::byte, kFrameHeaderBytes> header_bytes;
  FrameHeader header{};
  try {
    transport::recv_all(fd_.get(), header_bytes, std::chrono::steady_clock::now() + io_timeout_);
    header = decode_frame_header(header_bytes);
    payload.resize(header.length);
    transport::recv_all(fd_.get(), payload, std::chrono::steady_clock::now() + io_timeout_);
  } catch (const transport::TransportError& e) {
    throw ProbeError(peer_ + ": " + e.what());
  } catch (const ProbeError& e) {
    throw ProbeError(peer_ + ": " + e.what());
  }
  if (header.type == FrameType::kRefused) {
    std::string reason;
    for (std::byte b : payload) {
      const auto c = static_cast<char>(b);
      reason += (c >= ' ' && c <= '~') ? c : '?';  // never echo control bytes into logs
    }
    throw ProbeRefused(peer_ + ": refused: " + reason, reason);
  }
  return header.type;
}

void ProbeChannel::receive_expected(FrameType expected, std::vector<std::byte>& payload,
                                    std::optional<size_t> length) {
  const FrameType got = receive(payload);
  if (got != expected) {
    throw ProbeError(peer_ + ": expected a " + frame_type_name(expected) + " frame, got " +
                     frame_type_name(got));
  }
  if (length && payload.size() != *length) {
    throw ProbeError(peer_ + ": a " + std::string(frame_type_name(expected)) + " frame of " +
                     std::to_string(payload.size()) + " bytes; it must be " +
                     std::to_string(*length));
  }
}

}  // namespace tessel::prober
