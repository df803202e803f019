#include "noderuntime/launcher/progress_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <tuple>

#include "tessel/v1alpha1/progress.grpc.pb.h"

namespace tessel::launcher {

class ProgressServer::Service final : public pb::StageProgress::Service {
 public:
  explicit Service(uint64_t job_id)
      : job_id_(job_id), wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (wake_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + strerror(errno));
  }
  ~Service() override { close(wake_fd_); }

  grpc::Status Report(grpc::ServerContext*,
                      grpc::ServerReaderWriter<pb::ReportReply, pb::StageEvent>* stream) override {
    pb::StageEvent event;
    while (stream->Read(&event)) {
      const pb::Tasklet& t = event.tasklet();
      if (t.job_id() != job_id_) {
        return {grpc::StatusCode::FAILED_PRECONDITION,
                "rank " + std::to_string(t.rank()) + " reports for job " +
                    std::to_string(t.job_id()) + ", this launcher runs job " +
                    std::to_string(job_id_)};
      }
      pb::ReportReply reply;
      reply.set_received(hold(std::move(event)));
      if (!stream->Write(reply)) break;
    }
    return grpc::Status::OK;
  }

  int wake_fd() const { return wake_fd_; }

  std::vector<pb::StageEvent> take() {
    uint64_t count;
    [[maybe_unused]] const ssize_t n = read(wake_fd_, &count, sizeof count);
    std::lock_guard lock(mutex_);
    std::vector<pb::StageEvent> events;
    events.swap(waiting_);
    return events;
  }

 private:
  // Queues the event unless its process sent it before; returns the newest sequence held for
  // that process.
  uint64_t hold(pb::StageEvent event) {
    const pb::Tasklet& t = event.tasklet();
    std::lock_guard lock(mutex_);
    uint64_t& newest = newest_[{t.rank(), t.incarnation()}];
    if (event.sequence() <= newest) return newest;
    newest = event.sequence();
    waiting_.push_back(std::move(event));
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof one);
    return newest;
  }

  const uint64_t job_id_;
  const int wake_fd_;
  std::mutex mutex_;
  std::map<std::tuple<int, uint64_t>, uint64_t> newest_;  // (rank, incarnation) -> sequence
  std::vector<pb::StageEvent> waiting_;
};

ProgressServer::ProgressServer(uint64_t job_id, int port)
    : service_(std::make_unique<Service>(job_id)) {
  grpc::ServerBuilder builder;
  const std::string address = "127.0.0.1:" + std::to_string(port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(service_.get());
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

std::string ProgressServer::address() const { return "127.0.0.1:" + std::to_string(port_); }

int ProgressServer::wake_fd() const { return service_->wake_fd(); }

std::vector<pb::StageEvent> ProgressServer::take() { return service_->take(); }

}  // namespace tessel::launcher
