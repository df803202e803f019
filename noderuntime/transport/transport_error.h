// The one error type of the transport: every failed send, recv, collective, handshake or
// malformed message. what() names the peer and the field or condition at fault, e.g.
// "rank 3 (127.0.0.1:40123, stage 1 replica 0): connection closed".
#pragma once

#include <stdexcept>

namespace tessel::transport {

class TransportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tessel::transport
