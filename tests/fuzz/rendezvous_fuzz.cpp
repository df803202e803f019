// The Rendezvous requests stage pods send to the operator and the launcher
// (proto/tessel/v1alpha1/rendezvous.proto, proto/rendezvous/rendezvous_server.h): the input is a
// stream of requests to one RendezvousTable serving job 7 of 4 ranks, each a length-prefixed
// piece whose first byte picks Join, Publish or Lookup and whose rest is that request's bytes.
// Each is handed to the table as the service hands it (RendezvousService's Join, Publish and
// Lookup), with a deadline already past so that a call waiting for other ranks returns at once.
// A RendezvousError is the service's refusal (a gRPC status).
#include <google/protobuf/stubs/logging.h>

#include <chrono>
#include <string>

#include "proto/rendezvous/rendezvous_table.h"
#include "tessel/v1alpha1/rendezvous.pb.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

namespace pb = tessel::v1alpha1;
using tessel::rendezvous::RendezvousError;
using tessel::rendezvous::RendezvousTable;

template <typename Message>
bool parse(std::string_view bytes, Message& message) {
  return message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// One request; false when its bytes are not a message of that type (gRPC ends such a call).
bool handle(RendezvousTable& table, std::string_view piece) {
  const auto deadline = RendezvousTable::Clock::now();
  const std::string_view bytes = piece.substr(1);
  switch (static_cast<unsigned char>(piece[0]) % 3) {
    case 0: {
      pb::JoinRequest request;
      if (!parse(bytes, request)) return false;
      table.join(request.tasklet().job_id(), request.token(), request.world_size(),
                 request.tasklet().rank(), request.tasklet().incarnation(), request.address(),
                 deadline);
      return true;
    }
    case 1: {
      pb::PublishRequest request;
      if (!parse(bytes, request)) return false;
      table.publish(request.tasklet().job_id(), request.token(), request.generation(),
                    request.tasklet().rank(), request.key(), request.value());
      return true;
    }
    default: {
      pb::LookupRequest request;
      if (!parse(bytes, request)) return false;
      table.lookup(request.tasklet().job_id(), request.token(), request.generation(),
                   request.tasklet().rank(), request.key(), deadline);
      return true;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // libprotobuf logs every string field that is not UTF-8 (the parse then fails, as in gRPC).
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  RendezvousTable table;
  table.add_job(7, 4, "fuzz-token-0123456789");
  for (const std::string_view piece : tessel::fuzz::length_prefixed_pieces(data, size)) {
    if (piece.empty()) continue;
    try {
      if (!handle(table, piece)) return 0;
    } catch (const RendezvousError&) {
    }
    table.progress(7);
    table.table(7);
  }
  return 0;
}
