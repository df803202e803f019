// What a stage process shows the services it calls (the Rendezvous service and StageProgress of
// the launcher or the operator): the job's token, read from the file job.json names, and the
// channel's credentials: TLS verified by the PEM CA job.json names, or an insecure channel
// without one (the launcher's loopback services).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace grpc {
class ChannelCredentials;
}

namespace tessel::stage {

inline constexpr size_t kMaxTokenBytes = 4096;
inline constexpr size_t kMaxCaFileBytes = 1 << 20;  // a CA bundle, generously

// The token in `path` (a final newline dropped): 16 (rendezvous::kMinTokenBytes) to
// kMaxTokenBytes printable ASCII characters, as gRPC metadata can carry them. Throws
// ConfigError naming `field` ("rendezvous.token_file"), the file and what is wrong.
std::string read_token_file(const std::string& path, const std::string& field);

// TLS verified by the PEM certificates in `ca_file`; an insecure channel when it is empty.
// Throws ConfigError naming `field` ("progress.ca_file") and the file when it cannot be read,
// is larger than kMaxCaFileBytes or holds no PEM certificate.
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const std::string& ca_file,
                                                              const std::string& field);

}  // namespace tessel::stage
