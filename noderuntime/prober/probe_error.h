// The error types of the prober's protocol and measurements. what() names the peer (by name
// and address), the phase and the field or limit at fault, e.g.
// "prober peer gpu-node-2 (10.0.0.2:7450): bulk throughput: connection closed".
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace tessel::prober {

class ProbeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The other end ended the session with a refusal frame; reason() is its text (printable ASCII).
class ProbeRefused : public ProbeError {
 public:
  ProbeRefused(const std::string& what, std::string reason)
      : ProbeError(what), reason_(std::move(reason)) {}
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

// The peer's prober does not speak the protocol version the client opened with (a prober of an
// older release): the client opens again with the oldest version.
class ProbeVersionRefused : public ProbeError {
 public:
  using ProbeError::ProbeError;
};

// The peer's prober is serving another peer's probe (one session at a time): no failure of the
// link or the peer; try again in a moment.
class ProbeBusy : public ProbeError {
 public:
  using ProbeError::ProbeError;
};

}  // namespace tessel::prober
