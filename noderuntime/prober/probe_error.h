// The one error type of the prober's protocol and measurements. what() names the peer (by name
// and address), the phase and the field or limit at fault, e.g.
// "prober peer gpu-node-2 (10.0.0.2:7450): bulk throughput: connection closed".
#pragma once

#include <stdexcept>

namespace tessel::prober {

class ProbeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tessel::prober
