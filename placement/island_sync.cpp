#include "placement/island_sync.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tessel::placement {

std::vector<std::vector<int>> site_islands(const Topology& topology,
                                           const std::vector<int>& members) {
  std::vector<std::vector<int>> islands;
  std::vector<const std::string*> sites;
  for (int d : members) {
    const std::string& site = topology.devices[d].site;
    size_t i = 0;
    while (i < sites.size() && *sites[i] != site) ++i;
    if (i == sites.size()) {
      sites.push_back(&site);
      islands.emplace_back();
    }
    islands[i].push_back(d);
  }
  return islands;
}

double delta_exchange_s(const Topology& topology, const std::vector<std::vector<int>>& islands,
                        double encoding_bytes) {
  double slowest = 0;
  for (size_t a = 0; a < islands.size(); ++a) {
    const size_t senders = islands[a].size();
    for (size_t p = 0; p < senders; ++p) {
      const int from = islands[a][p];
      double latency = 0, transfer = 0;
      for (size_t b = 0; b < islands.size(); ++b) {
        if (b == a) continue;
        for (size_t q = p; q < islands[b].size(); q += senders) {  // q mod |A| == p
          const int to = islands[b][q];
          latency = std::max(latency, topology.latency_ms(from, to) / 1000.0);
          transfer += encoding_bytes * 8.0 / (topology.bandwidth_gbps(from, to) * 1e9);
        }
      }
      if (transfer > 0 || latency > 0) slowest = std::max(slowest, latency + transfer);
    }
  }
  return slowest;
}

double delta_exchange_bytes(const std::vector<std::vector<int>>& islands, double encoding_bytes) {
  return islands.empty() ? 0.0 : double(islands.size() - 1) * encoding_bytes;
}

double island_latency_s(const Topology& topology, const std::vector<std::vector<int>>& islands) {
  double longest = 0;
  for (const auto& island : islands)
    for (int a : island)
      for (int b : island)
        if (a != b) longest = std::max(longest, topology.latency_ms(a, b) / 1000.0);
  return longest;
}

double data_parallel_bytes_per_step(const Topology& topology, const Workload& workload,
                                    const std::vector<std::vector<int>>& stage_groups,
                                    const std::vector<int>& layers, int sync_every) {
  const DataParallelMode& mode = workload.data_parallel;
  if (mode.low_communication() && sync_every < 1)
    throw std::invalid_argument(
        "data_parallel_bytes_per_step: the low-communication mode needs "
        "the H it was priced at, got " +
        std::to_string(sync_every));
  const int p = static_cast<int>(stage_groups.size());
  auto ring_bytes = [](size_t n, double bytes) {
    return n > 1 ? 2.0 * double(n - 1) / double(n) * bytes : 0.0;
  };
  double busiest = 0;
  for (int s = 0; s < p; ++s) {
    const bool first = s == 0, last = s == p - 1;
    double summed = workload.gradient_bytes(layers[s], first, last);
    if (p > 1 && (first || last)) summed += workload.table_gradient_bytes();
    double bytes = 0;
    if (mode.low_communication()) {
      const auto islands = site_islands(topology, stage_groups[s]);
      for (const auto& island : islands) bytes = std::max(bytes, ring_bytes(island.size(), summed));
      const int64_t params = workload.stage_parameters(layers[s], first, last);
      bytes +=
          delta_exchange_bytes(islands, delta_encoding_bytes(params, mode.delta_bits)) / sync_every;
    } else {
      bytes = ring_bytes(stage_groups[s].size(), summed);
    }
    busiest = std::max(busiest, bytes);
  }
  return busiest;
}

}  // namespace tessel::placement
