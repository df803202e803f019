#include "operator/controller/stage_links.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "api/stage_job_file.h"

namespace tessel::controller {

StageLinks stage_links(const JobPlacement& placed) {
  const ClusterTopology& topology = placed.topology;
  // The measured links between nodes, by their site names in name order: the topology's site
  // pairs hold the link as measured (its matrices may be bound by a TCP window).
  std::map<std::pair<std::string, std::string>, placement::Link> measured;
  for (const placement::SitePair& pair : topology.topology.site_pairs) {
    if (topology.source(pair.a, pair.b) == LinkSource::kEstimated) continue;
    measured[std::minmax(pair.a, pair.b)] = pair.link;
  }

  std::vector<api::StageLinkPair> pairs;
  const auto add = [&](const TaskletPlace& x, const TaskletPlace& y) {
    const std::string site_x = site_name(x.cluster, x.node), site_y = site_name(y.cluster, y.node);
    const auto it = measured.find(std::minmax(site_x, site_y));
    if (it == measured.end()) return;  // one node, or an estimated link
    pairs.push_back({std::min(x.rank, y.rank), std::max(x.rank, y.rank), it->second.bandwidth_gbps,
                     it->second.latency_ms});
  };
  std::map<int, std::vector<const TaskletPlace*>> by_stage, by_replica;
  for (const TaskletPlace& t : placed.tasklets) {
    by_stage[t.stage].push_back(&t);
    by_replica[t.replica].push_back(&t);
  }
  for (const auto* groups : {&by_stage, &by_replica}) {
    for (const auto& [key, group] : *groups) {
      for (size_t i = 0; i < group.size(); ++i)
        for (size_t j = i + 1; j < group.size(); ++j) add(*group[i], *group[j]);
    }
  }

  StageLinks out;
  if (pairs.size() > kMaxStageLinkPairs) {
    const auto larger_bdp = [](const api::StageLinkPair& x, const api::StageLinkPair& y) {
      return std::make_tuple(-x.gbps * x.latency_ms, x.a, x.b) <
             std::make_tuple(-y.gbps * y.latency_ms, y.a, y.b);
    };
    std::nth_element(pairs.begin(), pairs.begin() + kMaxStageLinkPairs, pairs.end(), larger_bdp);
    out.omitted = pairs.size() - kMaxStageLinkPairs;
    pairs.resize(kMaxStageLinkPairs);
  }
  std::sort(pairs.begin(), pairs.end(),
            [](const api::StageLinkPair& x, const api::StageLinkPair& y) {
              return std::tie(x.a, x.b) < std::tie(y.a, y.b);
            });
  out.listed = pairs.size();
  out.links = api::unshaped_links_json(pairs);
  return out;
}

}  // namespace tessel::controller
