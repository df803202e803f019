// The Rendezvous service (proto/tessel/v1alpha1/rendezvous.proto) over gRPC, on a RendezvousTable:
// what the `tessel local` launcher and the operator both serve to their stage processes. A
// waiting call waits at most kMaxWaitS (or the client's deadline, if sooner), so a client that
// sets none is not held forever; it joins again.
#pragma once

#include <memory>
#include <string>

#include "proto/rendezvous/rendezvous_table.h"

namespace grpc {
class Server;
class ServerCredentials;
}  // namespace grpc

namespace tessel::rendezvous {

inline constexpr int kMaxWaitS = 30;

class RendezvousServer {
 public:
  // Listens on `address` (e.g. "127.0.0.1:0": a port the kernel picks; "0.0.0.0:7443") with
  // `credentials` (TLS for the operator; insecure on loopback for the launcher). Throws
  // std::runtime_error naming the address when it cannot listen.
  RendezvousServer(const std::string& address,
                   std::shared_ptr<grpc::ServerCredentials> credentials);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  RendezvousTable& table() { return table_; }
  int port() const { return port_; }

 private:
  class Service;
  RendezvousTable table_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace tessel::rendezvous
