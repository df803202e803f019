#include "noderuntime/launcher/progress_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "proto/progress/progress_service.h"

namespace tessel::launcher {

// The events the service delivers, waiting for the launcher's thread; the eventfd says so.
class ProgressServer::Queue {
 public:
  Queue() : wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (wake_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + strerror(errno));
  }
  ~Queue() { close(wake_fd_); }

  int wake_fd() const { return wake_fd_; }

  void push(pb::StageEvent event) {
    {
      const std::lock_guard lock(mutex_);
      waiting_.push_back(std::move(event));
    }
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof one);
  }

  std::vector<pb::StageEvent> take() {
    uint64_t count;
    [[maybe_unused]] const ssize_t n = read(wake_fd_, &count, sizeof count);
    const std::lock_guard lock(mutex_);
    std::vector<pb::StageEvent> events;
    events.swap(waiting_);
    return events;
  }

 private:
  const int wake_fd_;
  std::mutex mutex_;
  std::vector<pb::StageEvent> waiting_;
};

ProgressServer::ProgressServer(uint64_t job_id, int port, std::string host)
    : queue_(std::make_unique<Queue>()),
      service_(std::make_unique<progress::ProgressService>(
          [job_id](const grpc::ServerContext&, const pb::StageEvent& event) {
            const pb::Tasklet& t = event.tasklet();
            if (t.job_id() == job_id) return grpc::Status::OK;
            return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                "rank " + std::to_string(t.rank()) + " reports for job " +
                                    std::to_string(t.job_id()) + ", this launcher runs job " +
                                    std::to_string(job_id));
          },
          [queue = queue_.get()](pb::StageEvent event) { queue->push(std::move(event)); })),
      host_(std::move(host)) {
  grpc::ServerBuilder builder;
  const std::string address = host_ + ":" + std::to_string(port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(service_->service());
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    throw std::runtime_error("cannot start the progress server on " + address);
  }
}

ProgressServer::~ProgressServer() {
  // Streams still open (a process that has not flushed yet) are cancelled at once.
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
}

std::string ProgressServer::address() const { return host_ + ":" + std::to_string(port_); }

int ProgressServer::wake_fd() const { return queue_->wake_fd(); }

std::vector<pb::StageEvent> ProgressServer::take() { return queue_->take(); }

}  // namespace tessel::launcher
