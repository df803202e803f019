// Topologies the placement tests share: the paper's scenarios, and small random ones.
#pragma once

#include <string>

#include "placement/topology.h"
#include "placement/topology_generate.h"

namespace tessel::placement::testing {

inline Topology scenario(const std::string& file) {
  return load_topology_file(std::string(TESSEL_SOURCE_DIR) + "/examples/topologies/" + file);
}

// A small geo topology with uneven links, for exhaustive comparisons.
inline Topology small_geo(int devices, int sites, uint64_t seed) {
  GeoTopologySpec spec;
  spec.devices = devices;
  spec.sites = sites;
  spec.seed = seed;
  spec.mixed_gpus = false;
  return generate_geo_topology(spec);
}

}  // namespace tessel::placement::testing
