#include "noderuntime/stage/topology_links.h"

#include <stdexcept>
#include <string>

namespace tessel::stage {

transport::LinkEmulator links_from_topology(const placement::Topology& topology,
                                            const std::vector<int>& device_of_rank) {
  const int ranks = static_cast<int>(device_of_rank.size());
  for (int r = 0; r < ranks; ++r) {
    if (device_of_rank[r] < 0 || device_of_rank[r] >= topology.size()) {
      throw std::invalid_argument("device_of_rank[" + std::to_string(r) + "]: device " +
                                  std::to_string(device_of_rank[r]) + " is not in the topology (" +
                                  std::to_string(topology.size()) + " devices)");
    }
  }
  transport::LinkEmulator links(ranks);
  for (int from = 0; from < ranks; ++from) {
    for (int to = 0; to < ranks; ++to) {
      const int a = device_of_rank[from], b = device_of_rank[to];
      if (a == b) continue;
      links.set(from, to,
                {topology.bandwidth_gbps(a, b) * 1e9 / 8, topology.latency_ms(a, b) / 1e3});
    }
  }
  return links;
}

}  // namespace tessel::stage
