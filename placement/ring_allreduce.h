// The data-parallel all-reduce of one stage group in full mode: a ring (reduce-scatter then
// all-gather, as the runtime does it over TCP) through the group's members.
#pragma once

#include <vector>

#include "placement/topology.h"

namespace tessel::placement {

struct RingPlan {
  std::vector<int> order;           // the members in ring order
  std::vector<double> latency_s;    // link order[i] -> order[i+1 mod n]
  std::vector<double> bytes_per_s;  // its bandwidth
};

// Ring order: nearest neighbour (by latency + one ring step's transfer of `bytes`) from every
// start, keeping the ring whose slowest step is the fastest (sum as tie-break).
RingPlan plan_ring(const Topology& topology, const std::vector<int>& members, double bytes);

// Ring all-reduce of `bytes`: 2 (n-1) steps, each moving bytes/n over every ring link at once,
// a step lasting as long as its slowest link: 2 (n-1) x max_l (lat_l + bytes / (n bw_l)).
double ring_allreduce_s(const RingPlan& ring, double bytes);

}  // namespace tessel::placement
