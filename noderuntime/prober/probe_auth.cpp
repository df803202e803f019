#include "noderuntime/prober/probe_auth.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <vector>

#include "noderuntime/prober/probe_error.h"

namespace tessel::prober {

void check_probe_secret(const std::string& secret, std::string_view field) {
  if (secret.size() < kMinSecretBytes || secret.size() > kMaxSecretBytes) {
    throw ProbeError(std::string(field) + ": the shared secret is " +
                     std::to_string(secret.size()) + " bytes; it must be " +
                     std::to_string(kMinSecretBytes) + " to " + std::to_string(kMaxSecretBytes) +
                     " bytes");
  }
}

Nonce random_nonce() {
  Nonce nonce;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) !=
      1) {
    throw ProbeError("prober: the system's random source failed (RAND_bytes)");
  }
  return nonce;
}

Mac probe_proof(const std::string& secret, ProofRole role, const Nonce& client_nonce,
                const Nonce& server_nonce) {
  const std::string_view label =
      role == ProofRole::kServer ? "tessel-probe/1 server" : "tessel-probe/1 client";
  std::vector<unsigned char> message(label.begin(), label.end());
  for (const Nonce* nonce : {&client_nonce, &server_nonce}) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(nonce->data());
    message.insert(message.end(), bytes, bytes + nonce->size());
  }
  Mac mac;
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), message.data(),
           message.size(), reinterpret_cast<unsigned char*>(mac.data()), &length) == nullptr ||
      length != mac.size()) {
    throw ProbeError("prober: HMAC-SHA256 failed");
  }
  return mac;
}

bool proofs_equal(const Mac& a, const Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace tessel::prober
