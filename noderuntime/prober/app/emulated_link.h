// --emulate-link: the prober's sends to some peers shaped by the transport's link emulator, so
// that probers on one machine (demos, end-to-end tests) measure distinct links.
#pragma once

#include <string>
#include <vector>

#include "noderuntime/transport/link_emulator.h"

namespace tessel::prober {

// Sends to peers whose name starts with `prefix` are shaped.
struct EmulatedLink {
  std::string prefix;  // "" matches every peer
  transport::LinkShape shape;
  bool operator==(const EmulatedLink&) const = default;
};

// PREFIX=GBPS/MS: GBPS the rate in Gbit/s (0: unlimited), MS the delay added to this side's
// sends in milliseconds (a check's pings go out delayed and come back unshaped, so MS is what
// the round trip gains). Throws std::invalid_argument naming --emulate-link, the value and the
// limit.
EmulatedLink parse_emulated_link(const std::string& text);

// The shape of the longest prefix matching `peer`; unshaped when none does.
transport::LinkShape emulated_shape(const std::vector<EmulatedLink>& links,
                                    const std::string& peer);

}  // namespace tessel::prober
