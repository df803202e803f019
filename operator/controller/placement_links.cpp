#include "operator/controller/placement_links.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tessel::controller {
namespace {

struct PairUse {
  int device_a = 0, device_b = 0;  // one device of each node, for the link's figures
  bool pipeline = false, data_parallel = false;
};

std::string site_of(const DevicePlace& place) { return site_name(place.cluster, place.node); }

}  // namespace

std::pair<nlohmann::json, size_t> placement_links(const JobPlacement& placed, int stages,
                                                  int replicas) {
  const auto& devices = placed.placement.stages;  // [stage][replica] -> device
  const auto& places = placed.topology.places;
  std::map<std::pair<std::string, std::string>, PairUse> pairs;
  const auto use = [&](int a, int b, bool pipeline) {
    std::string site_a = site_of(places.at(static_cast<size_t>(a)));
    std::string site_b = site_of(places.at(static_cast<size_t>(b)));
    if (site_a == site_b) return;  // inside one node: not a network link
    if (site_b < site_a) {
      std::swap(site_a, site_b);
      std::swap(a, b);
    }
    PairUse& pair = pairs.try_emplace({site_a, site_b}, PairUse{a, b}).first->second;
    (pipeline ? pair.pipeline : pair.data_parallel) = true;
  };
  const bool wraps = placed.layer_split.size() > static_cast<size_t>(stages) && stages > 1;
  for (int r = 0; r < replicas; ++r) {
    for (int s = 0; s + 1 < stages; ++s) use(devices.at(s).at(r), devices.at(s + 1).at(r), true);
    if (wraps) use(devices.at(stages - 1).at(r), devices.at(0).at(r), true);
  }
  for (int s = 0; s < stages && replicas > 1; ++s)
    for (int r = 0; r < replicas; ++r)
      use(devices.at(s).at(r), devices.at(s).at((r + 1) % replicas), false);

  const placement::Topology& t = placed.topology.topology;
  struct Row {
    double gbps;
    std::string from, to;
    nlohmann::json json;
  };
  std::vector<Row> rows;
  for (const auto& [sites, pair] : pairs) {
    const double gbps = t.bandwidth_gbps(pair.device_a, pair.device_b);
    const std::string carries = pair.pipeline && pair.data_parallel ? "pipeline,data-parallel"
                                : pair.pipeline                     ? "pipeline"
                                                                    : "data-parallel";
    rows.push_back(
        {gbps,
         sites.first,
         sites.second,
         {{"from", sites.first},
          {"to", sites.second},
          {"rttMs", 2 * t.latency_ms(pair.device_a, pair.device_b)},
          {"gbps", gbps},
          {"source", link_source_name(placed.topology.source(sites.first, sites.second))},
          {"carries", carries}}});
  }
  std::sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    return std::tie(x.gbps, x.from, x.to) < std::tie(y.gbps, y.from, y.to);
  });
  nlohmann::json listed = nlohmann::json::array();
  for (size_t i = 0; i < rows.size() && i < kMaxStatusLinks; ++i) listed.push_back(rows[i].json);
  return {std::move(listed), rows.size() - listed.size()};
}

}  // namespace tessel::controller
