#include "operator/server/tls_key_pair.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <stdexcept>

namespace tessel::server {
namespace {

// The newest OpenSSL error as text ("" when none), clearing the queue.
std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return std::string(": ") + text;
}

std::unique_ptr<BIO, decltype(&BIO_free)> memory_bio(const std::string& pem) {
  return {BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free};
}

}  // namespace

void check_tls_key_pair(const std::string& cert_pem, const std::string& key_pem) {
  if (cert_pem.find("-----BEGIN") == std::string::npos) {
    throw std::invalid_argument("the certificate is not PEM (no -----BEGIN line)");
  }
  if (key_pem.find("-----BEGIN") == std::string::npos) {
    throw std::invalid_argument("the key is not PEM (no -----BEGIN line)");
  }
  const auto cert_bio = memory_bio(cert_pem);
  const std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr), X509_free);
  if (!cert) throw std::invalid_argument("the certificate does not parse" + openssl_error());
  const auto key_bio = memory_bio(key_pem);
  const std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  if (!key) throw std::invalid_argument("the key does not parse" + openssl_error());
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    throw std::invalid_argument("the key is not the certificate's (the first in the chain)");
  }
}

}  // namespace tessel::server
