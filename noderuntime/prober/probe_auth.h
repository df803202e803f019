// Mutual authentication of two probers by a shared secret: HMAC-SHA256 challenge-response in
// both directions. Each side sends a fresh random nonce; each proves it knows the secret by a
// MAC over both nonces, with a role label so that one side's proof cannot be reflected back as
// the other's. MACs are compared in constant time.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace tessel::prober {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;  // SHA-256
// A secret shorter than 16 bytes is guessable; longer than 4 KiB is a misconfiguration.
inline constexpr size_t kMinSecretBytes = 16;
inline constexpr size_t kMaxSecretBytes = 4096;

using Nonce = std::array<std::byte, kNonceBytes>;
using Mac = std::array<std::byte, kMacBytes>;

// Throws ProbeError naming `field`, the secret's length (never its bytes) and the bounds.
void check_probe_secret(const std::string& secret, std::string_view field);

// A nonce from the system's cryptographic random source; throws ProbeError if it fails.
Nonce random_nonce();

enum class ProofRole { kServer, kClient };
// The proof that the `role` side knows `secret`: HMAC-SHA256(secret, label(role) | client nonce
// | server nonce).
Mac probe_proof(const std::string& secret, ProofRole role, const Nonce& client_nonce,
                const Nonce& server_nonce);

// Constant-time comparison.
bool proofs_equal(const Mac& a, const Mac& b);

}  // namespace tessel::prober
