// The operator's stage service: one gRPC server over TLS on one port that serves the stage pods
// of every TrainingJob the Rendezvous service (proto/rendezvous: each rank reports its address
// and gets the peer table) and StageProgress (proto/progress: the events of each stage process),
// and folds each job's events into a JobProgress (job_progress.h says what step and loss mean).
//
// Authentication is per job: a job is registered with its id and token (the token the operator
// puts in the job's Secret in each member). A Rendezvous request carries it in its token field;
// a progress stream in its `authorization: Bearer <token>` metadata, checked for every event
// against the event's job: a stream without it, with another job's token or for a job not
// served here is ended UNAUTHENTICATED, and the message names no token. TLS is always on.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "operator/server/job_progress.h"

namespace grpc {
class Server;
class ServerContext;
class Status;
}  // namespace grpc
namespace tessel::rendezvous {
class RendezvousTable;
class RendezvousService;
}  // namespace tessel::rendezvous
namespace tessel::progress {
class ProgressService;
}

namespace tessel::server {

class StageServiceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class StageService {
 public:
  // Listens on `bind_address` ("0.0.0.0:7443"; port 0: one the kernel picks) with the PEM
  // certificate chain and key. on_progress(job_key) is called on a gRPC thread whenever a job's
  // progress changed, in the order of its events: it must return at once (enqueue the job) and
  // may call progress(), but not register_job or unregister_job. Throws StageServiceError
  // naming the address and the cause (a certificate or key that is not PEM, or that do not
  // match; the port taken).
  StageService(const std::string& bind_address, const std::string& cert_pem,
               const std::string& key_pem,
               std::function<void(const std::string& job_key)> on_progress);
  // Stops the server: waiting rendezvous calls fail at once, open progress streams are cut.
  ~StageService();
  StageService(const StageService&) = delete;
  StageService& operator=(const StageService&) = delete;

  int port() const { return port_; }

  // Serves job `job_key` ("namespace/name") as `job_id` of `world_size` ranks whose pods carry
  // `token` (at least rendezvous::kMinTokenBytes). Registering it again with the same id, world
  // size and token changes nothing (its rendezvous and progress are kept); with anything else
  // it starts over. Throws StageServiceError naming the field when the world size or token is
  // out of bounds, or when another job is served under the same id.
  void register_job(const std::string& job_key, uint64_t job_id, int world_size,
                    const std::string& token);
  // Stops serving the job (no-op when it is not served): its rendezvous is refused from now on.
  // Its processes' progress events are still acknowledged, and dropped, for the last
  // kRetiredJobsAcknowledged jobs let go: they are being stopped, and a process whose last
  // events nobody acknowledges waits out its exit flush (10 s) before it ends, which held up
  // every restart's next attempt (its pods take the same names).
  void unregister_job(const std::string& job_key);
  // The job's progress; nullopt when it is not served.
  std::optional<JobProgress> progress(const std::string& job_key) const;

 private:
  struct Job {
    uint64_t id = 0;
    int world_size = 0;
    std::string token;
    JobProgressFold fold;
  };
  struct RetiredJob {
    uint64_t id = 0;
    int world_size = 0;
    std::string token;
  };
  static constexpr size_t kRetiredJobsAcknowledged = 64;

  // Remembers a job let go (under mutex_); the id of one forgotten to make room, if any.
  std::optional<uint64_t> retire(const Job& job);

  // OK when the call's bearer token is that of the event's job, served or retired, and the rank
  // is in range; UNAUTHENTICATED or INVALID_ARGUMENT otherwise.
  grpc::Status admit(const grpc::ServerContext& context,
                     const tessel::v1alpha1::StageEvent& event) const;
  // Folds an admitted event into its job, then calls on_progress if it changed.
  void deliver(const tessel::v1alpha1::StageEvent& event);

  const std::function<void(const std::string&)> on_progress_;
  mutable std::mutex mutex_;
  std::map<std::string, Job> jobs_;            // by key
  std::map<uint64_t, std::string> key_of_id_;  // job id -> key
  std::deque<RetiredJob> retired_;             // the oldest first
  std::unique_ptr<rendezvous::RendezvousTable> table_;
  std::unique_ptr<rendezvous::RendezvousService> rendezvous_;
  std::unique_ptr<progress::ProgressService> progress_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace tessel::server
