// A stage process's end of the Rendezvous service (proto/tessel/v1alpha1/rendezvous.proto): join
// with the address it listens at and get the peer table; publish and look up the small values
// the ranks agree on. Waiting calls are retried (the server may not be up yet, or ranks may
// still be starting) until the caller's timeout; a refusal (a wrong token, a bad field) is not.
// Errors name the server and say what was awaited.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "proto/rendezvous/rendezvous_table.h"

namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace tessel::rendezvous {

struct Identity {
  uint64_t job_id = 0;
  int rank = 0;
  int stage = 0;
  int replica = 0;
  uint64_t incarnation = 0;  // random per process start
  int world_size = 0;
  std::string token;
};

class RendezvousError;

class RendezvousClient {
 public:
  RendezvousClient(const std::string& server, std::shared_ptr<grpc::ChannelCredentials> credentials,
                   Identity identity);
  ~RendezvousClient();

  // Throws std::runtime_error when the table is not complete within `timeout`, or on a refusal.
  JoinedTable join(const std::string& address, std::chrono::milliseconds timeout);
  std::string publish(uint64_t generation, const std::string& key, const std::string& value);
  std::string lookup(uint64_t generation, const std::string& key,
                     std::chrono::milliseconds timeout);

 private:
  std::string server_;
  Identity identity_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace tessel::rendezvous
