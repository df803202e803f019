#include "proto/rendezvous/rendezvous_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "tessel/v1alpha1/rendezvous.grpc.pb.h"

namespace tessel::rendezvous {

namespace pb = tessel::v1alpha1;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kCallLimit = std::chrono::seconds(10);

void fill(pb::Tasklet& tasklet, const Identity& id) {
  tasklet.set_job_id(id.job_id);
  tasklet.set_rank(id.rank);
  tasklet.set_stage(id.stage);
  tasklet.set_replica(id.replica);
  tasklet.set_incarnation(id.incarnation);
}

// Whether a failed call may succeed when made again: the server is not up yet, or the awaited
// ranks or value are not there yet.
bool worth_retrying(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         status.error_code() == grpc::StatusCode::UNAVAILABLE;
}

// Calls `call(context)` until it succeeds, fails for good, or `timeout` passes.
template <class Call>
void call_until(const std::string& server, const std::string& what,
                std::chrono::milliseconds timeout, Call&& call) {
  const auto deadline = Clock::now() + timeout;
  auto pause = std::chrono::milliseconds(50);
  grpc::Status last;
  while (true) {
    const auto left = deadline - Clock::now();
    grpc::ClientContext context;
    context.set_deadline(
        std::chrono::system_clock::now() +
        std::min<Clock::duration>(std::max<Clock::duration>(left, {}), kCallLimit));
    last = call(context);
    if (last.ok()) return;
    if (!worth_retrying(last) || Clock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
  throw std::runtime_error(
      "rendezvous " + server + ": " + what + ": " + last.error_message() +
      (worth_retrying(last) ? " (gave up after " + std::to_string(timeout.count()) + " ms)" : ""));
}

}  // namespace

RendezvousClient::RendezvousClient(const std::string& server,
                                   std::shared_ptr<grpc::ChannelCredentials> credentials,
                                   Identity identity)
    : server_(server),
      identity_(std::move(identity)),
      channel_(grpc::CreateChannel(server, std::move(credentials))) {}

RendezvousClient::~RendezvousClient() = default;

JoinedTable RendezvousClient::join(const std::string& address, std::chrono::milliseconds timeout) {
  pb::JoinRequest request;
  fill(*request.mutable_tasklet(), identity_);
  request.set_token(identity_.token);
  request.set_world_size(identity_.world_size);
  request.set_address(address);
  pb::JoinReply reply;
  auto stub = pb::Rendezvous::NewStub(channel_);
  call_until(server_, "join as rank " + std::to_string(identity_.rank) + " at " + address, timeout,
             [&](grpc::ClientContext& context) { return stub->Join(&context, request, &reply); });
  if (reply.addresses_size() != identity_.world_size) {
    throw std::runtime_error("rendezvous " + server_ + ": the table has " +
                             std::to_string(reply.addresses_size()) + " ranks, the job " +
                             std::to_string(identity_.world_size));
  }
  JoinedTable table;
  table.generation = reply.generation();
  table.addresses.assign(reply.addresses().begin(), reply.addresses().end());
  return table;
}

std::string RendezvousClient::publish(uint64_t generation, const std::string& key,
                                      const std::string& value) {
  pb::PublishRequest request;
  fill(*request.mutable_tasklet(), identity_);
  request.set_token(identity_.token);
  request.set_generation(generation);
  request.set_key(key);
  request.set_value(value);
  pb::ValueReply reply;
  auto stub = pb::Rendezvous::NewStub(channel_);
  call_until(
      server_, "publish '" + key + "'", std::chrono::milliseconds(kCallLimit),
      [&](grpc::ClientContext& context) { return stub->Publish(&context, request, &reply); });
  return reply.value();
}

std::string RendezvousClient::lookup(uint64_t generation, const std::string& key,
                                     std::chrono::milliseconds timeout) {
  pb::LookupRequest request;
  fill(*request.mutable_tasklet(), identity_);
  request.set_token(identity_.token);
  request.set_generation(generation);
  request.set_key(key);
  pb::ValueReply reply;
  auto stub = pb::Rendezvous::NewStub(channel_);
  call_until(server_, "look up '" + key + "'", timeout,
             [&](grpc::ClientContext& context) { return stub->Lookup(&context, request, &reply); });
  return reply.value();
}

}  // namespace tessel::rendezvous
