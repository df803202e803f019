// Topologies the placement tests share: the paper's scenarios, and small random ones.
#pragma once

#include <string>

#include "placement/partition.h"
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

// The 64-device scenarios (8 sites x 8 devices, ids by site):
// "each pipeline inside one site, each data-parallel group one device per site",
// group k = devices {k, k+8, ..., k+56}; and its opposite, group k = site k.
inline Groups one_device_per_site_groups() {
  Groups groups(8);
  for (int k = 0; k < 8; ++k)
    for (int i = 0; i < 8; ++i) groups[k].push_back(k + 8 * i);
  return groups;
}

inline Groups one_site_per_group() {
  Groups groups(8);
  for (int k = 0; k < 8; ++k)
    for (int i = 0; i < 8; ++i) groups[k].push_back(8 * k + i);
  return groups;
}

}  // namespace tessel::placement::testing
