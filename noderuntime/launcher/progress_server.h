// The launcher's end of StageProgress (proto/tessel/v1alpha1/progress.proto): a gRPC server on
// 127.0.0.1 or a given host (a port the kernel picks) that takes the events of one job's stage
// processes and hands them to the launcher's thread in arrival order, each once (proto/progress
// acknowledges them and drops the ones a reconnecting process sends again). Events of another job
// are refused.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessel/v1alpha1/progress.pb.h"

namespace grpc {
class Server;
}
namespace tessel::progress {
class ProgressService;
}

namespace tessel::launcher {

namespace pb = tessel::v1alpha1;

class ProgressServer {
 public:
  // Listens on host:port (0: a port the kernel picks; host an IPv4 address). Throws
  // std::runtime_error naming the address when it cannot.
  explicit ProgressServer(uint64_t job_id, int port = 0, std::string host = "127.0.0.1");
  ~ProgressServer();
  ProgressServer(const ProgressServer&) = delete;
  ProgressServer& operator=(const ProgressServer&) = delete;

  std::string address() const;  // "host:port"
  // Readable while events wait to be taken (for poll).
  int wake_fd() const;
  // The events received since the last call, each once, in arrival order.
  std::vector<pb::StageEvent> take();

 private:
  class Queue;
  std::unique_ptr<Queue> queue_;
  std::unique_ptr<progress::ProgressService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string host_;
  int port_ = 0;
};

}  // namespace tessel::launcher
