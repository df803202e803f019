#include "noderuntime/prober/probe_handshake.h"

#include <cstring>
#include <vector>

#include "noderuntime/prober/probe_auth.h"
#include "noderuntime/prober/probe_error.h"

namespace tessel::prober {
namespace {

template <size_t N>
std::array<std::byte, N> take(std::span<const std::byte> bytes) {
  std::array<std::byte, N> out;
  std::memcpy(out.data(), bytes.data(), N);
  return out;
}

void append(std::vector<std::byte>& out, std::span<const std::byte> bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}

std::span<const std::byte> as_bytes(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

}  // namespace

void authenticate_to_server(ProbeChannel& channel, const std::string& secret,
                            const std::string& self_name) {
  if (self_name.empty() || self_name.size() > kMaxPeerNameBytes) {
    throw ProbeError("prober name '" + self_name + "' must be 1 to " +
                     std::to_string(kMaxPeerNameBytes) + " bytes");
  }
  const Nonce client_nonce = random_nonce();
  std::vector<std::byte> hello;
  for (int i = 0; i < 4; ++i) hello.push_back(static_cast<std::byte>(kProtocolVersion >> (8 * i)));
  append(hello, client_nonce);
  append(hello, as_bytes(self_name));
  channel.send(FrameType::kHello, hello);

  std::vector<std::byte> payload;
  try {
    channel.receive_expected(FrameType::kChallenge, payload, kNonceBytes + kMacBytes);
  } catch (const ProbeRefused& e) {
    if (e.reason() == kBusyRefusal) throw ProbeBusy(channel.peer() + ": " + e.reason());
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
  channel.receive_expected(FrameType::kAccepted, payload, 0);
}

std::string authenticate_client(ProbeChannel& channel, const std::string& secret) {
  std::vector<std::byte> payload;
  channel.receive_expected(FrameType::kHello, payload);
  if (payload.size() < 4 + kNonceBytes + 1) {
    throw ProbeError(channel.peer() + ": a hello frame of " + std::to_string(payload.size()) +
                     " bytes; it must be at least " + std::to_string(4 + kNonceBytes + 1));
  }
  uint32_t version = 0;
  for (int i = 3; i >= 0; --i) version = (version << 8) | static_cast<uint8_t>(payload[i]);
  if (version != kProtocolVersion) {
    const std::string why = "protocol version " + std::to_string(version) +
                            " is not supported (this prober speaks " +
                            std::to_string(kProtocolVersion) + ")";
    channel.send(FrameType::kRefused, as_bytes(why));
    throw ProbeError(channel.peer() + ": " + why);
  }
  const Nonce client_nonce = take<kNonceBytes>(std::span(payload).subspan(4));
  std::string name;
  for (std::byte b : std::span(payload).subspan(4 + kNonceBytes)) {
    const auto c = static_cast<char>(b);
    name += (c >= ' ' && c <= '~') ? c : '?';
  }

  const Nonce server_nonce = random_nonce();
  std::vector<std::byte> challenge;
  append(challenge, server_nonce);
  append(challenge, probe_proof(secret, ProofRole::kServer, client_nonce, server_nonce));
  channel.send(FrameType::kChallenge, challenge);

  channel.receive_expected(FrameType::kResponse, payload, kMacBytes);
  if (!proofs_equal(take<kMacBytes>(payload),
                    probe_proof(secret, ProofRole::kClient, client_nonce, server_nonce))) {
    const std::string why = "authentication failed: wrong proof of the shared secret";
    channel.send(FrameType::kRefused, as_bytes(why));
    throw ProbeError(channel.peer() + " (says it is '" + name + "'): " + why);
  }
  channel.send(FrameType::kAccepted);
  return name;
}

}  // namespace tessel::prober
