// Synthetic geo-distributed topologies of any size, for tests, benchmarks and what-ifs.
#pragma once

#include <cstdint>

#include "placement/topology.h"

namespace tessel::placement {

struct GeoTopologySpec {
  int devices = 64;
  int sites = 8;  // devices are spread as evenly as possible over the sites
  uint64_t seed = 1;
  double intra_site_latency_ms = 0.5;
  double intra_site_bandwidth_gbps = 100;
  double min_bandwidth_gbps = 0.3;  // inter-site bandwidth drawn in [min, max], lower when far
  double max_bandwidth_gbps = 10;
  bool mixed_gpus = true;  // a mix of GPU models (A100, H100, H200, V100...) per site
};

// Sites get real-looking coordinates (drawn on land-ish latitude bands); latency between
// two sites = great-circle distance / (2/3 c) * route inflation + a small fixed overhead;
// bandwidth falls with distance within [min, max] with seeded noise. Same spec -> same topology.
Topology generate_geo_topology(const GeoTopologySpec& spec);

}  // namespace tessel::placement
