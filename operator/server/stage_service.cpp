#include "operator/server/stage_service.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <stdexcept>

#include "operator/server/tls_key_pair.h"
#include "proto/progress/progress_service.h"
#include "proto/rendezvous/rendezvous_server.h"
#include "proto/rendezvous/rendezvous_table.h"

namespace tessel::server {

namespace pb = tessel::v1alpha1;

namespace {

constexpr std::string_view kBearer = "Bearer ";

// The token of the call's `authorization: Bearer <token>` metadata; nullopt when it has none or
// its value is not of that form.
std::optional<std::string> bearer_token(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return std::nullopt;
  const std::string_view value(it->second.data(), it->second.size());
  if (value.size() <= kBearer.size() || value.substr(0, kBearer.size()) != kBearer) {
    return std::nullopt;
  }
  return std::string(value.substr(kBearer.size()));
}

std::shared_ptr<grpc::ServerCredentials> tls_credentials(const std::string& cert_pem,
                                                         const std::string& key_pem) {
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({key_pem, cert_pem});
  return grpc::SslServerCredentials(options);
}

}  // namespace

StageService::StageService(const std::string& bind_address, const std::string& cert_pem,
                           const std::string& key_pem,
                           std::function<void(const std::string& job_key)> on_progress)
    : on_progress_(std::move(on_progress)),
      table_(std::make_unique<rendezvous::RendezvousTable>()),
      rendezvous_(std::make_unique<rendezvous::RendezvousService>(*table_)),
      progress_(std::make_unique<progress::ProgressService>(
          [this](const grpc::ServerContext& context, const pb::StageEvent& event) {
            return admit(context, event);
          },
          [this](pb::StageEvent event) { deliver(event); })) {
  try {
    check_tls_key_pair(cert_pem, key_pem);
  } catch (const std::invalid_argument& e) {
    throw StageServiceError("stage service on " + bind_address + ": " + e.what());
  }
  grpc::ServerBuilder builder;
  // gRPC shares a port with another socket that allows it by default: a taken port must fail.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(bind_address, tls_credentials(cert_pem, key_pem), &port_);
  builder.RegisterService(rendezvous_->service());
  builder.RegisterService(progress_->service());
  builder.SetMaxReceiveMessageSize(rendezvous::kMaxRequestBytes);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    throw StageServiceError("stage service: cannot listen on " + bind_address +
                            " (the address is taken, or not an address of this host)");
  }
}

StageService::~StageService() {
  table_->shut_down();                                  // waiting rendezvous calls return at once
  server_->Shutdown(std::chrono::system_clock::now());  // progress streams are cut
  server_->Wait();
}

void StageService::register_job(const std::string& job_key, uint64_t job_id, int world_size,
                                const std::string& token) {
  const std::string what = "stage service: job " + job_key;
  if (world_size < 1 || world_size > rendezvous::kMaxWorldSize) {
    throw StageServiceError(what + ": world size must be in [1, " +
                            std::to_string(rendezvous::kMaxWorldSize) + "], got " +
                            std::to_string(world_size));
  }
  if (token.size() < rendezvous::kMinTokenBytes) {
    throw StageServiceError(what + ": the token must have at least " +
                            std::to_string(rendezvous::kMinTokenBytes) + " bytes, it has " +
                            std::to_string(token.size()));
  }
  std::optional<uint64_t> replaced;
  std::optional<uint64_t> forgotten;
  {
    const std::lock_guard lock(mutex_);
    if (const auto other = key_of_id_.find(job_id);
        other != key_of_id_.end() && other->second != job_key) {
      throw StageServiceError(what + ": job id " + std::to_string(job_id) +
                              " is already served for job " + other->second);
    }
    const auto it = jobs_.find(job_key);
    if (it != jobs_.end()) {
      const Job& job = it->second;
      if (job.id == job_id && job.world_size == world_size &&
          rendezvous::same_token(job.token, token)) {
        return;  // the same job: its rendezvous and progress go on
      }
      replaced = job.id;
      key_of_id_.erase(job.id);
      if (job.id != job_id) {
        table_->remove_job(job.id);
        forgotten = retire(job);
      }
    }
    std::erase_if(retired_, [job_id](const RetiredJob& r) { return r.id == job_id; });
    table_->add_job(job_id, world_size, token);
    jobs_.insert_or_assign(job_key, Job{job_id, world_size, token, JobProgressFold(world_size)});
    key_of_id_[job_id] = job_key;
  }
  // Outside our lock: the progress service holds its own while it delivers to us.
  if (replaced) progress_->forget_job(*replaced);
  if (forgotten) progress_->forget_job(*forgotten);
  progress_->forget_job(job_id);
}

std::optional<uint64_t> StageService::retire(const Job& job) {
  retired_.push_back({job.id, job.world_size, job.token});
  if (retired_.size() <= kRetiredJobsAcknowledged) return std::nullopt;
  const uint64_t oldest = retired_.front().id;
  retired_.pop_front();
  return oldest;
}

void StageService::unregister_job(const std::string& job_key) {
  uint64_t id = 0;
  std::optional<uint64_t> forgotten;
  {
    const std::lock_guard lock(mutex_);
    const auto it = jobs_.find(job_key);
    if (it == jobs_.end()) return;
    id = it->second.id;
    forgotten = retire(it->second);
    key_of_id_.erase(id);
    jobs_.erase(it);
    table_->remove_job(id);
  }
  progress_->forget_job(id);
  if (forgotten) progress_->forget_job(*forgotten);
}

std::optional<JobProgress> StageService::progress(const std::string& job_key) const {
  const std::lock_guard lock(mutex_);
  const auto it = jobs_.find(job_key);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.fold.progress();
}

grpc::Status StageService::admit(const grpc::ServerContext& context,
                                 const pb::StageEvent& event) const {
  const pb::Tasklet& tasklet = event.tasklet();
  const std::string job = "progress: job " + std::to_string(tasklet.job_id());
  const std::optional<std::string> token = bearer_token(context);
  if (!token) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            job + ": the call carries no 'authorization: Bearer <token>' metadata"};
  }
  const std::lock_guard lock(mutex_);
  const auto key = key_of_id_.find(tasklet.job_id());
  const std::string* job_token = nullptr;
  int world_size = 0;
  if (key != key_of_id_.end()) {
    const Job& served = jobs_.at(key->second);
    job_token = &served.token;
    world_size = served.world_size;
  } else if (const auto retired =
                 std::find_if(retired_.begin(), retired_.end(),
                              [&](const RetiredJob& r) { return r.id == tasklet.job_id(); });
             retired != retired_.end()) {
    // Acknowledged, then dropped by deliver(): the job is no longer served.
    job_token = &retired->token;
    world_size = retired->world_size;
  }
  // An unknown job and a wrong token are answered alike: neither says which jobs exist.
  if (job_token == nullptr || !rendezvous::same_token(*job_token, *token)) {
    return {grpc::StatusCode::UNAUTHENTICATED,
            job + ": unknown job, or the bearer token is not the job's"};
  }
  if (tasklet.rank() < 0 || tasklet.rank() >= world_size) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            job + ": tasklet.rank " + std::to_string(tasklet.rank()) + " is out of range [0, " +
                std::to_string(world_size) + ")"};
  }
  return grpc::Status::OK;
}

void StageService::deliver(const pb::StageEvent& event) {
  std::string changed;
  {
    const std::lock_guard lock(mutex_);
    const auto key = key_of_id_.find(event.tasklet().job_id());
    if (key == key_of_id_.end()) return;  // retired: acknowledged, not folded
    Job& job = jobs_.at(key->second);
    if (event.tasklet().rank() >= job.world_size) return;  // registered anew, smaller
    if (!job.fold.add(event)) return;
    changed = key->second;
  }
  if (on_progress_) on_progress_(changed);
}

}  // namespace tessel::server
