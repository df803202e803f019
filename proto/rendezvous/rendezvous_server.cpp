#include "proto/rendezvous/rendezvous_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <stdexcept>

#include "tessel/v1alpha1/rendezvous.grpc.pb.h"

namespace tessel::rendezvous {

namespace pb = tessel::v1alpha1;

namespace {

grpc::Status status_of(const RendezvousError& e) {
  using Code = RendezvousError::Code;
  switch (e.code()) {
    case Code::kInvalidArgument:
      return {grpc::StatusCode::INVALID_ARGUMENT, e.what()};
    case Code::kUnauthenticated:
      return {grpc::StatusCode::UNAUTHENTICATED, e.what()};
    case Code::kNotFound:
      return {grpc::StatusCode::FAILED_PRECONDITION, e.what()};
    case Code::kDeadlineExceeded:
      return {grpc::StatusCode::DEADLINE_EXCEEDED, e.what()};
    case Code::kExhausted:
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, e.what()};
  }
  return {grpc::StatusCode::INTERNAL, e.what()};
}

// The sooner of kMaxWaitS from now and a little before the client's deadline, so that the client
// gets the server's answer (which names what is missing) rather than its own timeout.
RendezvousTable::Clock::time_point wait_deadline(const grpc::ServerContext& context) {
  constexpr auto kMargin = std::chrono::milliseconds(200);
  const auto cap = RendezvousTable::Clock::now() + std::chrono::seconds(kMaxWaitS);
  const auto client = context.deadline();
  if (client == std::chrono::system_clock::time_point::max()) return cap;
  const auto left = client - std::chrono::system_clock::now() - kMargin;
  return std::min(cap, RendezvousTable::Clock::now() +
                           std::chrono::duration_cast<RendezvousTable::Clock::duration>(left));
}

}  // namespace

class RendezvousService::Impl final : public pb::Rendezvous::Service {
 public:
  explicit Impl(RendezvousTable& table) : table_(table) {}

  grpc::Status Join(grpc::ServerContext* context, const pb::JoinRequest* request,
                    pb::JoinReply* reply) override {
    try {
      const JoinedTable joined =
          table_.join(request->tasklet().job_id(), request->token(), request->world_size(),
                      request->tasklet().rank(), request->tasklet().incarnation(),
                      request->address(), wait_deadline(*context));
      reply->set_generation(joined.generation);
      for (const std::string& address : joined.addresses) reply->add_addresses(address);
      return grpc::Status::OK;
    } catch (const RendezvousError& e) {
      return status_of(e);
    }
  }

  grpc::Status Publish(grpc::ServerContext*, const pb::PublishRequest* request,
                       pb::ValueReply* reply) override {
    try {
      reply->set_value(table_.publish(request->tasklet().job_id(), request->token(),
                                      request->generation(), request->tasklet().rank(),
                                      request->key(), request->value()));
      return grpc::Status::OK;
    } catch (const RendezvousError& e) {
      return status_of(e);
    }
  }

  grpc::Status Lookup(grpc::ServerContext* context, const pb::LookupRequest* request,
                      pb::ValueReply* reply) override {
    try {
      reply->set_value(table_.lookup(request->tasklet().job_id(), request->token(),
                                     request->generation(), request->tasklet().rank(),
                                     request->key(), wait_deadline(*context)));
      return grpc::Status::OK;
    } catch (const RendezvousError& e) {
      return status_of(e);
    }
  }

 private:
  RendezvousTable& table_;
};

RendezvousService::RendezvousService(RendezvousTable& table)
    : impl_(std::make_unique<Impl>(table)) {}

RendezvousService::~RendezvousService() = default;

grpc::Service* RendezvousService::service() { return impl_.get(); }

RendezvousServer::RendezvousServer(const std::string& address,
                                   std::shared_ptr<grpc::ServerCredentials> credentials) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, std::move(credentials), &port_);
  builder.RegisterService(service_.service());
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    throw std::runtime_error("rendezvous: cannot listen on " + address);
  }
}

RendezvousServer::~RendezvousServer() {
  table_.shut_down();  // waiting calls return at once
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace tessel::rendezvous
