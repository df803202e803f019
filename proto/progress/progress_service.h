// The server side of StageProgress (proto/tessel/v1alpha1/progress.proto), shared by every server
// of it (the `tessel local` launcher, the operator's stage service): reads each stream, checks
// each event's sender, acknowledges every event it holds, and drops an event whose process sent
// it before (a process whose stream broke sends again what was not acknowledged). What to accept
// and what to do with a new event is the owner's (`Admit`, `Deliver`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "tessel/v1alpha1/progress.pb.h"

namespace grpc {
class Service;
class ServerContext;
class Status;
}  // namespace grpc

namespace tessel::progress {

namespace pb = tessel::v1alpha1;

// The processes remembered per (job, rank): a rank restarted more often than this forgets its
// oldest process, whose resent events would be taken as new. Bounds the memory a job's processes
// can make the server hold.
inline constexpr size_t kMaxIncarnationsPerRank = 8;

class ProgressService {
 public:
  // An OK status accepts the event; any other ends its stream with that status (the process
  // sees it). Called on the stream's thread for every event, before it is held.
  using Admit = std::function<grpc::Status(const grpc::ServerContext&, const pb::StageEvent&)>;
  // Takes each event once, in each process's order; called under the service's lock, so it must
  // not block or call back into the service.
  using Deliver = std::function<void(pb::StageEvent)>;

  ProgressService(Admit admit, Deliver deliver);
  ~ProgressService();
  ProgressService(const ProgressService&) = delete;
  ProgressService& operator=(const ProgressService&) = delete;

  // To register on a grpc::ServerBuilder; lives as long as this object.
  grpc::Service* service();
  // Forgets the processes of a job (it is no longer served).
  void forget_job(uint64_t job_id);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::progress
