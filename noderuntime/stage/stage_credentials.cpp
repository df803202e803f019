#include "noderuntime/stage/stage_credentials.h"

#include <grpcpp/grpcpp.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "noderuntime/stage/gpt_config.h"
#include "proto/rendezvous/rendezvous_table.h"

namespace tessel::stage {
namespace {

// At most `limit` + 1 bytes of the file (one more than allowed tells it is too long).
std::string read_at_most(const std::string& path, size_t limit, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(field + ": " + path + ": cannot read: " + std::strerror(errno));
  std::string text(limit + 1, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

}  // namespace

std::string read_token_file(const std::string& path, const std::string& field) {
  std::string token = read_at_most(path, kMaxTokenBytes + 1, field);
  if (!token.empty() && token.back() == '\n') token.pop_back();
  if (token.size() < rendezvous::kMinTokenBytes || token.size() > kMaxTokenBytes) {
    throw ConfigError(field + ": " + path + ": a token has " +
                      std::to_string(rendezvous::kMinTokenBytes) + " to " +
                      std::to_string(kMaxTokenBytes) + " bytes, this file " +
                      std::to_string(token.size()));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c < 0x21 || c > 0x7e) {
      throw ConfigError(field + ": " + path + ": byte " + std::to_string(i) +
                        " of the token is not a printable ASCII character (a token travels as "
                        "gRPC metadata)");
    }
  }
  return token;
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const std::string& ca_file,
                                                              const std::string& field) {
  if (ca_file.empty()) return grpc::InsecureChannelCredentials();
  const std::string pem = read_at_most(ca_file, kMaxCaFileBytes, field);
  if (pem.size() > kMaxCaFileBytes) {
    throw ConfigError(field + ": " + ca_file + ": larger than " + std::to_string(kMaxCaFileBytes) +
                      " bytes: not a CA certificate file");
  }
  if (pem.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    throw ConfigError(field + ": " + ca_file +
                      ": holds no PEM certificate (no -----BEGIN CERTIFICATE----- line)");
  }
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = pem;
  return grpc::SslCredentials(options);
}

}  // namespace tessel::stage
