// job.json's "links" for a job's stage pods on clusters (issue 20). Between pods the network is
// itself the link, so the stages shape nothing ("shape": false), but a TCP stream moves at most
// its window per round trip: on a long, fat link one stream fills a fraction of it. The
// transport therefore opens several streams per link, as many as the link's bandwidth-delay
// product needs (noderuntime/transport/stream_plan.h), and for that it needs each link's
// bandwidth; the round trip it measures itself. Those bandwidths are the ones the placement
// rested on: the prober's measurements in the nodes' annotations (cluster_topology.h).
//
// Which pairs of ranks are listed: ranks on different nodes whose link was measured (by name or
// by a site aggregate) and that share a stage (its data-parallel all-reduce) or a replica (its
// pipeline, the interleaved schedule's wrap, the tied embedding's sum): the only groups that move
// bulk data. Listing any other pair (it carries the optimizer's scalars at most) would only give
// it streams: threads and socket buffers for nothing. Ranks of one node talk over loopback and an
// estimated link is no measurement: neither is listed, so such a link keeps one stream and the
// kernel's buffer autotuning.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>

#include "operator/controller/job_placement.h"

namespace tessel::controller {

// The most pairs job.json lists (about 100 bytes each in the file: 410 KB at most, which leaves
// the ranks of a few thousand pods room under api::kMaxStageJobFileBytes). A job of 64 ranks
// (8 stages x 8 replicas) lists at most 64 x 14 / 2 = 448. Past the limit, the pairs with the
// largest bandwidth-delay product (gbps x latency) are kept: they are the ones that need
// several streams.
inline constexpr size_t kMaxStageLinkPairs = 4096;

struct StageLinks {
  nlohmann::ordered_json links;  // job.json's "links" (api::unshaped_links_json)
  size_t listed = 0;             // pairs listed
  size_t omitted = 0;            // measured pairs left out past kMaxStageLinkPairs
};

// The links of `placed` (its tasklets by rank, its topology's measured node pairs).
StageLinks stage_links(const JobPlacement& placed);

}  // namespace tessel::controller
