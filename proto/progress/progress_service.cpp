#include "proto/progress/progress_service.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "tessel/v1alpha1/progress.grpc.pb.h"

namespace tessel::progress {

class ProgressService::Impl final : public pb::StageProgress::Service {
 public:
  Impl(Admit admit, Deliver deliver) : admit_(std::move(admit)), deliver_(std::move(deliver)) {}

  grpc::Status Report(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<pb::ReportReply, pb::StageEvent>* stream) override {
    pb::StageEvent event;
    while (stream->Read(&event)) {
      grpc::Status admitted = admit_(*context, event);
      if (!admitted.ok()) return admitted;
      pb::ReportReply reply;
      reply.set_received(hold(std::move(event)));
      if (!stream->Write(reply)) break;
    }
    return grpc::Status::OK;
  }

  void forget_job(uint64_t job_id) {
    const std::lock_guard lock(mutex_);
    std::erase_if(newest_, [job_id](const auto& entry) { return entry.first.first == job_id; });
  }

 private:
  struct Process {
    uint64_t incarnation = 0;
    uint64_t newest = 0;  // the newest sequence held
  };

  // Delivers the event unless its process sent it before; returns the newest sequence held for
  // that process.
  uint64_t hold(pb::StageEvent event) {
    const pb::Tasklet& t = event.tasklet();
    const std::lock_guard lock(mutex_);
    std::vector<Process>& processes = newest_[{t.job_id(), t.rank()}];
    auto it = std::find_if(processes.begin(), processes.end(),
                           [&](const Process& p) { return p.incarnation == t.incarnation(); });
    if (it == processes.end()) {
      if (processes.size() == kMaxIncarnationsPerRank) processes.erase(processes.begin());
      processes.push_back({t.incarnation(), 0});
      it = processes.end() - 1;
    }
    if (event.sequence() <= it->newest) return it->newest;
    it->newest = event.sequence();
    const uint64_t newest = it->newest;
    deliver_(std::move(event));
    return newest;
  }

  const Admit admit_;
  const Deliver deliver_;
  std::mutex mutex_;
  // (job, rank) -> its processes, the oldest first.
  std::map<std::pair<uint64_t, int>, std::vector<Process>> newest_;
};

ProgressService::ProgressService(Admit admit, Deliver deliver)
    : impl_(std::make_unique<Impl>(std::move(admit), std::move(deliver))) {}

ProgressService::~ProgressService() = default;

grpc::Service* ProgressService::service() { return impl_.get(); }

void ProgressService::forget_job(uint64_t job_id) { impl_->forget_job(job_id); }

}  // namespace tessel::progress
