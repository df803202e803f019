// The link emulator's shapes of a job whose ranks run on the devices of a placement topology: the
// link from rank r to rank s is shaped like the topology's link between their devices.
#pragma once

#include <vector>

#include "noderuntime/transport/link_emulator.h"
#include "placement/topology.h"

namespace tessel::stage {

// Gbit/s -> bytes/s and ms -> s of the topology's link between device_of_rank[r] and
// device_of_rank[s]; two ranks on one device are unshaped. Throws std::invalid_argument naming
// the rank whose device index is out of range.
transport::LinkEmulator links_from_topology(const placement::Topology& topology,
                                            const std::vector<int>& device_of_rank);

}  // namespace tessel::stage
