#include "noderuntime/prober/probe_handshake.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "noderuntime/prober/probe_error.h"

namespace tessel::prober {
namespace {

// How a prober of either version begins its refusal of a version it does not speak.
constexpr std::string_view kVersionRefusalPrefix = "protocol version ";
constexpr std::string_view kVersionRefusalTail = " is not supported";

template <size_t N>
std::array<std::byte, N> take(std::span<const std::byte> bytes) {
  std::array<std::byte, N> out;
  std::memcpy(out.data(), bytes.data(), N);
  return out;
}

void append(std::vector<std::byte>& out, std::span<const std::byte> bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}

void append_u32(std::vector<std::byte>& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(value >> (8 * i)));
}

std::span<const std::byte> as_bytes(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

bool is_zero(const SessionTicket& ticket) {
  return std::all_of(ticket.begin(), ticket.end(), [](std::byte b) { return b == std::byte{0}; });
}

bool is_version_refusal(const std::string& reason) {
  return reason.starts_with(kVersionRefusalPrefix) &&
         reason.find(kVersionRefusalTail) != std::string::npos;
}

// The accepted frame's payload: none for a version 1 client (its accepted frame is empty).
std::vector<std::byte> accepted_payload(uint32_t version, const SessionOffer& offer) {
  std::vector<std::byte> payload;
  if (version < 2) return payload;
  append(payload, offer.ticket);
  const auto joins = static_cast<uint16_t>(std::clamp(offer.joins, 0, 0xffff));
  payload.push_back(static_cast<std::byte>(joins & 0xff));
  payload.push_back(static_cast<std::byte>(joins >> 8));
  return payload;
}

SessionOffer read_offer(uint32_t version, const std::vector<std::byte>& payload) {
  SessionOffer offer;
  offer.version = version;
  if (version < 2) return offer;
  offer.ticket = take<kTicketBytes>(payload);
  offer.joins = static_cast<int>(static_cast<uint8_t>(payload[kTicketBytes])) |
                (static_cast<int>(static_cast<uint8_t>(payload[kTicketBytes + 1])) << 8);
  return offer;
}

}  // namespace

SessionTicket random_ticket() {
  SessionTicket ticket{};
  while (is_zero(ticket)) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(ticket.data()),
                   static_cast<int>(ticket.size())) != 1) {
      throw ProbeError("prober: the system's random source failed (RAND_bytes)");
    }
  }
  return ticket;
}

SessionOffer authenticate_to_server(ProbeChannel& channel, const std::string& secret,
                                    const std::string& self_name, const HelloOptions& options) {
  if (self_name.empty() || self_name.size() > kMaxPeerNameBytes) {
    throw ProbeError("prober name '" + self_name + "' must be 1 to " +
                     std::to_string(kMaxPeerNameBytes) + " bytes");
  }
  if (options.version < kOldestProtocolVersion || options.version > kProtocolVersion ||
      (options.join && options.version < 2)) {
    throw ProbeError("prober: cannot open a version " + std::to_string(options.version) +
                     (options.join ? " joining connection" : " connection"));
  }
  const Nonce client_nonce = random_nonce();
  std::vector<std::byte> hello;
  append_u32(hello, options.version);
  append(hello, client_nonce);
  if (options.version >= 2) append(hello, options.join.value_or(SessionTicket{}));
  append(hello, as_bytes(self_name));
  channel.send(FrameType::kHello, hello);

  std::vector<std::byte> payload;
  try {
    channel.receive_expected(FrameType::kChallenge, payload, kNonceBytes + kMacBytes);
  } catch (const ProbeRefused& e) {
    if (e.reason() == kBusyRefusal) throw ProbeBusy(channel.peer() + ": " + e.reason());
    if (is_version_refusal(e.reason())) throw ProbeVersionRefused(e.what());
    throw;
  }
  const Nonce server_nonce = take<kNonceBytes>(payload);
  const Mac server_proof = take<kMacBytes>(std::span(payload).subspan(kNonceBytes));
  if (!proofs_equal(server_proof,
                    probe_proof(secret, ProofRole::kServer, client_nonce, server_nonce))) {
    throw ProbeError(channel.peer() +
                     ": authentication failed: the peer did not prove it knows the shared secret "
                     "(a wrong secret, or not a tessel prober)");
  }
  const Mac client_proof = probe_proof(secret, ProofRole::kClient, client_nonce, server_nonce);
  channel.send(FrameType::kResponse, client_proof);
  channel.receive_expected(FrameType::kAccepted, payload,
                           accepted_payload(options.version, SessionOffer{}).size());
  return read_offer(options.version, payload);
}

ProbeHello read_hello(ProbeChannel& channel) {
  std::vector<std::byte> payload;
  channel.receive_expected(FrameType::kHello, payload);
  if (payload.size() < 4) {
    throw ProbeError(channel.peer() + ": a hello frame of " + std::to_string(payload.size()) +
                     " bytes; it must be at least " + std::to_string(4 + kNonceBytes + 1));
  }
  ProbeHello hello;
  hello.version = 0;
  for (int i = 3; i >= 0; --i) {
    hello.version = (hello.version << 8) | static_cast<uint8_t>(payload[i]);
  }
  if (hello.version < kOldestProtocolVersion || hello.version > kProtocolVersion) {
    const std::string why = std::string(kVersionRefusalPrefix) + std::to_string(hello.version) +
                            std::string(kVersionRefusalTail) + " (this prober speaks " +
                            std::to_string(kOldestProtocolVersion) + " to " +
                            std::to_string(kProtocolVersion) + ")";
    channel.send(FrameType::kRefused, as_bytes(why));
    throw ProbeError(channel.peer() + ": " + why);
  }
  const size_t ticket_bytes = hello.version >= 2 ? kTicketBytes : 0;
  const size_t least = 4 + kNonceBytes + ticket_bytes + 1;
  if (payload.size() < least) {
    throw ProbeError(channel.peer() + ": a version " + std::to_string(hello.version) +
                     " hello frame of " + std::to_string(payload.size()) +
                     " bytes; it must be at least " + std::to_string(least));
  }
  hello.nonce = take<kNonceBytes>(std::span(payload).subspan(4));
  if (ticket_bytes > 0) {
    const auto ticket = take<kTicketBytes>(std::span(payload).subspan(4 + kNonceBytes));
    if (!is_zero(ticket)) hello.join = ticket;
  }
  const std::span<const std::byte> name = std::span(payload).subspan(4 + kNonceBytes + ticket_bytes);
  if (name.size() > kMaxPeerNameBytes) {
    throw ProbeError(channel.peer() + ": a hello's name of " + std::to_string(name.size()) +
                     " bytes exceeds its limit of " + std::to_string(kMaxPeerNameBytes));
  }
  for (std::byte b : name) {
    const auto c = static_cast<char>(b);
    hello.name += (c >= ' ' && c <= '~') ? c : '?';
  }
  return hello;
}

void authenticate_client(ProbeChannel& channel, const std::string& secret, const ProbeHello& hello,
                         const SessionOffer& offer) {
  const Nonce server_nonce = random_nonce();
  std::vector<std::byte> challenge;
  append(challenge, server_nonce);
  append(challenge, probe_proof(secret, ProofRole::kServer, hello.nonce, server_nonce));
  channel.send(FrameType::kChallenge, challenge);

  std::vector<std::byte> payload;
  channel.receive_expected(FrameType::kResponse, payload, kMacBytes);
  if (!proofs_equal(take<kMacBytes>(payload),
                    probe_proof(secret, ProofRole::kClient, hello.nonce, server_nonce))) {
    const std::string why = "authentication failed: wrong proof of the shared secret";
    channel.send(FrameType::kRefused, as_bytes(why));
    throw ProbeError(channel.peer() + " (says it is '" + hello.name + "'): " + why);
  }
  channel.send(FrameType::kAccepted, accepted_payload(hello.version, offer));
}

std::string authenticate_client(ProbeChannel& channel, const std::string& secret) {
  const ProbeHello hello = read_hello(channel);
  authenticate_client(channel, secret, hello, SessionOffer{});
  return hello.name;
}

}  // namespace tessel::prober
