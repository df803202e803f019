// The Rendezvous service (proto/tessel/v1alpha1/rendezvous.proto) over gRPC, on a RendezvousTable:
// what the `tessel local` launcher and the operator both serve to their stage processes. A
// waiting call waits at most kMaxWaitS (or the client's deadline, if sooner), so a client that
// sets none is not held forever; it joins again. RendezvousService is the service alone, for a
// server that serves others beside it (the operator's stage service); RendezvousServer is a
// server of its own (the launcher's).
#pragma once

#include <memory>
#include <string>

#include "proto/rendezvous/rendezvous_table.h"

namespace grpc {
class Server;
class ServerCredentials;
class Service;
}  // namespace grpc

namespace tessel::rendezvous {

inline constexpr int kMaxWaitS = 30;
// The largest request a server of the service must take: a published value and its envelope.
inline constexpr int kMaxRequestBytes = int(kMaxValueBytes) + 4096;

class RendezvousService {
 public:
  explicit RendezvousService(RendezvousTable& table);
  ~RendezvousService();
  RendezvousService(const RendezvousService&) = delete;
  RendezvousService& operator=(const RendezvousService&) = delete;

  // To register on a grpc::ServerBuilder (whose receive limit must be at least
  // kMaxRequestBytes); lives as long as this object.
  grpc::Service* service();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

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
  RendezvousTable table_;
  RendezvousService service_{table_};
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace tessel::rendezvous
