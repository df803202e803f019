// TestCertificateAuthority: certificates made at run time with the OpenSSL 3 C API, EC P-256
// keys, valid from a day ago (clock skew between processes) to a year ahead.
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>

#include "tests/support/http_server.h"

namespace tessel::testing {
namespace {

constexpr long kValidBeforeSeconds = 24L * 3600;
constexpr long kValidAfterSeconds = 365L * 24 * 3600;

using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

[[noreturn]] void fail(const std::string& what) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  char text[256] = "unknown OpenSSL error";
  if (code != 0) ERR_error_string_n(code, text, sizeof text);
  throw std::runtime_error("TestCertificateAuthority: " + what + ": " + text);
}

KeyPtr generate_key() {
  KeyPtr key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  if (!key) fail("generating an EC P-256 key");
  return key;
}

// The subject: O entries first, then the CN, as kubeadm writes client certificates.
void set_subject(X509* certificate, const std::string& common_name,
                 const std::vector<std::string>& organizations) {
  X509_NAME* name = X509_get_subject_name(certificate);
  const auto add = [&](const char* field, const std::string& value) {
    if (X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(value.c_str()),
                                   static_cast<int>(value.size()), -1, 0) != 1) {
      fail(std::string("subject ") + field + "=\"" + value + "\"");
    }
  };
  for (const auto& organization : organizations) add("O", organization);
  add("CN", common_name);
}

void add_extension(X509* certificate, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, certificate, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value);
  if (extension == nullptr) fail(std::string("extension ") + OBJ_nid2sn(nid) + "=" + value);
  const int added = X509_add_ext(certificate, extension, -1);
  X509_EXTENSION_free(extension);
  if (added != 1) fail(std::string("adding extension ") + OBJ_nid2sn(nid));
}

// A certificate for `key` with a random serial and the validity window; issuer and extensions
// are the caller's.
X509Ptr new_certificate(EVP_PKEY* key, const std::string& common_name,
                        const std::vector<std::string>& organizations) {
  X509Ptr certificate(X509_new(), X509_free);
  if (!certificate || X509_set_version(certificate.get(), 2) != 1) fail("creating a certificate");
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), BN_free);
  if (!serial || BN_rand(serial.get(), 63, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(certificate.get())) == nullptr) {
    fail("choosing a serial number");
  }
  if (X509_gmtime_adj(X509_getm_notBefore(certificate.get()), -kValidBeforeSeconds) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(certificate.get()), kValidAfterSeconds) == nullptr) {
    fail("setting the validity");
  }
  if (X509_set_pubkey(certificate.get(), key) != 1) fail("setting the public key");
  set_subject(certificate.get(), common_name, organizations);
  return certificate;
}

void sign(X509* certificate, EVP_PKEY* issuer_key) {
  if (X509_sign(certificate, issuer_key, EVP_sha256()) == 0) fail("signing");
}

std::string certificate_pem(X509* certificate) {
  BioPtr bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || PEM_write_bio_X509(bio.get(), certificate) != 1) fail("writing a certificate");
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(length));
}

std::string key_pem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    fail("writing a private key");
  }
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(length));
}

}  // namespace

struct TestCertificateAuthority::Impl {
  KeyPtr key{nullptr, EVP_PKEY_free};
  X509Ptr certificate{nullptr, X509_free};
  std::string pem;

  TestCertificate issue(const std::string& common_name,
                        const std::vector<std::string>& organizations, const char* usage,
                        const char* subject_alt_names) const {
    KeyPtr leaf_key = generate_key();
    X509Ptr leaf = new_certificate(leaf_key.get(), common_name, organizations);
    if (X509_set_issuer_name(leaf.get(), X509_get_subject_name(certificate.get())) != 1) {
      fail("setting the issuer");
    }
    add_extension(leaf.get(), certificate.get(), NID_basic_constraints, "critical,CA:FALSE");
    add_extension(leaf.get(), certificate.get(), NID_key_usage,
                  "critical,digitalSignature,keyEncipherment");
    add_extension(leaf.get(), certificate.get(), NID_ext_key_usage, usage);
    add_extension(leaf.get(), certificate.get(), NID_authority_key_identifier, "keyid:always");
    if (subject_alt_names != nullptr) {
      add_extension(leaf.get(), certificate.get(), NID_subject_alt_name, subject_alt_names);
    }
    sign(leaf.get(), key.get());
    return {certificate_pem(leaf.get()), key_pem(leaf_key.get())};
  }
};

TestCertificateAuthority::TestCertificateAuthority() : impl_(std::make_unique<Impl>()) {
  impl_->key = generate_key();
  impl_->certificate = new_certificate(impl_->key.get(), "tessel-test-ca", {});
  X509* ca = impl_->certificate.get();
  if (X509_set_issuer_name(ca, X509_get_subject_name(ca)) != 1) fail("setting the CA issuer");
  add_extension(ca, ca, NID_basic_constraints, "critical,CA:TRUE");
  add_extension(ca, ca, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature");
  add_extension(ca, ca, NID_subject_key_identifier, "hash");
  sign(ca, impl_->key.get());
  impl_->pem = certificate_pem(ca);
}

TestCertificateAuthority::~TestCertificateAuthority() = default;

const std::string& TestCertificateAuthority::ca_pem() const { return impl_->pem; }

TestCertificate TestCertificateAuthority::issue_server() const {
  return issue_server(std::vector<std::string>{});
}

TestCertificate TestCertificateAuthority::issue_server(
    const std::vector<std::string>& dns_names) const {
  std::string names = "IP:127.0.0.1,IP:0:0:0:0:0:0:0:1,DNS:localhost";
  for (const std::string& name : dns_names) names += ",DNS:" + name;
  return impl_->issue("tessel-test-server", {}, "serverAuth", names.c_str());
}

TestCertificate TestCertificateAuthority::issue_client(
    const std::string& cn, const std::vector<std::string>& organizations) const {
  return impl_->issue(cn, organizations, "clientAuth", nullptr);
}

}  // namespace tessel::testing
