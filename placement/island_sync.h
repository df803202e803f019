// The low-communication mode's data-parallel traffic on a topology (docs/low-communication.md,
// "Traffic, for the cost model"): a stage group splits into islands, the replicas of one site,
// which all-reduce their gradients every step; every H steps the islands exchange the stage's
// encoded parameter delta.
#pragma once

#include <vector>

#include "placement/topology.h"
#include "placement/workload.h"

namespace tessel::placement {

// A stage group's members split by site, islands in order of their first member, members in
// group order.
std::vector<std::vector<int>> site_islands(const Topology& topology,
                                           const std::vector<int>& members);

// The delta exchange of one outer sync, an island-aware all-gather: member p of island A sends
// its encoding (encoding_bytes) to the members q of every other island with q mod |A| == p, so
// each rank receives one encoding per other island. Each transfer costs latency + bytes /
// bandwidth of its link; one sender's transfers share its uplink, one after another, and the
// exchange lasts as long as the busiest sender: max_a (max latency + sum bytes / bandwidth).
// 0 with one island.
double delta_exchange_s(const Topology& topology, const std::vector<std::vector<int>>& islands,
                        double encoding_bytes);

// Bytes one rank receives per outer sync: (islands - 1) encodings.
double delta_exchange_bytes(const std::vector<std::vector<int>>& islands, double encoding_bytes);

// The longest latency between two members of one island (0 for islands of one device): the
// per-step sums (gradients' ring steps aside, loss and norm) stay inside the islands.
double island_latency_s(const Topology& topology, const std::vector<std::vector<int>>& islands);

// Bytes of data-parallel traffic one rank receives per step, the busiest stage's (stage_groups[s]:
// its devices, layers[s]: its layers): synchronous, the ring all-reduce's 2 (n-1)/n of the
// gradients (and of the tied table on the first and last stage); low-communication, the same
// inside its island plus delta_exchange_bytes / H, H = sync_every (the H the layout was priced
// at: its PipelineTiming's outer_sync.sync_every, which the planner may have chosen; ignored
// when synchronous). Throws std::invalid_argument for the mode with sync_every < 1.
double data_parallel_bytes_per_step(const Topology& topology, const Workload& workload,
                                    const std::vector<std::vector<int>>& stage_groups,
                                    const std::vector<int>& layers, int sync_every);

}  // namespace tessel::placement
