#include "operator/controller/cluster_topology.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "api/link_annotations.h"
#include "api/manifest_error.h"
#include "placement/gpu_models.h"

namespace tessel::controller {
std::string site_name(const std::string& cluster, const std::string& node) {
  return cluster + "/" + node;
}

namespace {

// What a peer in `writer`'s annotation stands for: a node by "<cluster>/<node>", an aggregate
// by the cluster's name ("*": the writer's own; parse_node_links refused "<own cluster>/*").
std::string peer_key(const GpuNode& writer, const std::string& peer) {
  if (peer == "*") return writer.cluster;
  if (api::is_aggregate(peer)) return peer.substr(0, peer.size() - 2);
  return peer.find('/') == std::string::npos ? site_name(writer.cluster, peer) : peer;
}

// The worse of two directions: the larger latency, the smaller bandwidth (a pipeline hop and
// a ring all-reduce both go at the pace of their slower direction).
placement::Link combine(const std::optional<placement::Link>& ab,
                        const std::optional<placement::Link>& ba) {
  if (!ab) return *ba;
  if (!ba) return *ab;
  return {std::max(ab->latency_ms, ba->latency_ms),
          std::min(ab->bandwidth_gbps, ba->bandwidth_gbps)};
}

placement::Link estimate(const GpuNode& a, const GpuNode& b, const LinkEstimates& e) {
  if (a.region.empty() || b.region.empty() || a.region != b.region) return e.other_region;
  if (!a.zone.empty() && a.zone == b.zone) return e.same_zone;
  return e.same_region;
}

// "1h", "1h30m", "5m", "42s": a duration as a note shows it, to the largest unit that fits.
std::string duration_text(std::chrono::seconds d) {
  const long long s = d.count();
  if (s >= 3600) {
    return std::to_string(s / 3600) + "h" +
           (s % 3600 >= 60 ? std::to_string(s % 3600 / 60) + "m" : "");
  }
  if (s >= 60) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

// Why a node's measurements were not all taken: how many were too old and how many dated in the
// future, with the worst of each.
struct Staleness {
  int old = 0, future = 0;
  std::chrono::seconds oldest{0}, furthest{0};
  std::string oldest_at, furthest_at;

  std::string note(const std::string& node, int total, const LinkFreshness& f) const {
    std::string text = node + ": ";
    if (old > 0) {
      text += std::to_string(old) + " of its " + std::to_string(total) +
              " link measurements are older than " + duration_text(f.max_age) + " (the oldest at " +
              oldest_at + ", " + duration_text(oldest) + " old)";
    }
    if (future > 0) {
      text += std::string(old > 0 ? "; " : "") + std::to_string(future) + " of its " +
              std::to_string(total) + " link measurements are dated more than " +
              duration_text(f.max_clock_skew) + " in the future (" + furthest_at + ", " +
              duration_text(furthest) + " ahead)";
    }
    return text + " (those links are estimated unless the peer measured them)";
  }
};

// The note on the pairs whose link rests on an aggregate, naming the first few writers.
std::string aggregates_note(int pairs, const std::set<std::string>& writers) {
  constexpr size_t kNamed = 3;
  std::string names;
  size_t n = 0;
  for (const std::string& writer : writers) {
    if (n == kNamed) break;
    names += (n++ == 0 ? "" : ", ") + writer;
  }
  if (writers.size() > kNamed)
    names += " and " + std::to_string(writers.size() - kNamed) + " more nodes";
  return std::to_string(pairs) +
         " node pairs rest on site aggregates, not on a measurement of the pair: a node's median "
         "link to the nodes of a cluster it did not list by name (written by " +
         names + ")";
}

}  // namespace

const char* link_source_name(LinkSource source) {
  switch (source) {
    case LinkSource::kMeasured:
      return "measured";
    case LinkSource::kAggregated:
      return "aggregated";
    case LinkSource::kEstimated:
      return "estimated";
  }
  return "estimated";
}

LinkSource ClusterTopology::source(const std::string& site_a, const std::string& site_b) const {
  const auto it = pair_sources.find(std::minmax(site_a, site_b));
  if (it == pair_sources.end())
    throw std::out_of_range("no node pair " + site_a + " - " + site_b + " in the topology");
  return it->second;
}

ClusterTopology build_cluster_topology(const std::vector<GpuNode>& nodes,
                                       const LinkEstimates& estimates,
                                       const LinkFreshness& freshness) {
  if (freshness.max_age <= std::chrono::seconds(0)) {
    throw std::invalid_argument("link measurement max age must be > 0s, got " +
                                std::to_string(freshness.max_age.count()) + "s");
  }
  if (freshness.max_clock_skew < std::chrono::seconds(0)) {
    throw std::invalid_argument("link measurement clock skew must be >= 0s, got " +
                                std::to_string(freshness.max_clock_skew.count()) + "s");
  }
  const auto now = std::chrono::time_point_cast<std::chrono::seconds>(freshness.now);
  ClusterTopology out;
  placement::Topology& t = out.topology;
  t.id = "clusters";
  t.name = "candidate GPUs of the member clusters";
  t.intra_site = estimates.same_node;

  // Every node's fresh named measurements, by "<cluster>/<node>" of both ends; its fresh
  // aggregates by "<cluster>/<node>" of the writer and the cluster they stand for; the peers it
  // listed by name, fresh or not (its aggregates do not stand for those).
  std::map<std::pair<std::string, std::string>, placement::Link> measured, aggregated;
  std::set<std::pair<std::string, std::string>> listed;
  for (const GpuNode& node : nodes) {
    const std::string self = site_name(node.cluster, node.name);
    const auto annotation = node.annotations.find(api::kLinksAnnotation);
    if (annotation == node.annotations.end()) continue;
    api::NodeLinks links;
    try {
      links = api::parse_node_links(annotation->second, self);
    } catch (const api::ManifestError& e) {
      out.notes.push_back(std::string(e.what()) + " (its links are estimated)");
      const size_t more = e.errors().size() - 1;
      out.rejected.push_back(
          {node.cluster, node.name,
           e.errors().front().text() +
               (more > 0 ? " (and " + std::to_string(more) + " more errors)" : "")});
      continue;
    }
    Staleness stale;
    for (const auto& [peer, m] : links.peers) {
      const bool aggregate = api::is_aggregate(peer);
      const std::string other = peer_key(node, peer);
      if (!aggregate) listed.insert({self, other});
      const auto at = *api::parse_measured_at(m.measured_at);  // parse_node_links checked it
      if (now - at > freshness.max_age) {
        if (stale.old++ == 0 || now - at > stale.oldest) {
          stale.oldest = now - at;
          stale.oldest_at = m.measured_at;
        }
        continue;
      }
      if (at - now > freshness.max_clock_skew) {
        if (stale.future++ == 0 || at - now > stale.furthest) {
          stale.furthest = at - now;
          stale.furthest_at = m.measured_at;
        }
        continue;
      }
      (aggregate ? aggregated : measured)[{self, other}] = m.link();
    }
    if (stale.old + stale.future > 0) {
      out.stale_measurements += stale.old + stale.future;
      out.notes.push_back(stale.note(self, static_cast<int>(links.peers.size()), freshness));
    }
  }

  std::map<std::string, const placement::GpuType*> types;
  for (const GpuNode& node : nodes) {
    placement::Site site;
    site.name = site_name(node.cluster, node.name);
    site.kind = "node";
    site.gpus = node.free_gpus;
    t.sites.push_back(site);
    std::optional<placement::GpuType> type = placement::gpu_type_for_product(node.gpu_product);
    if (!type) {
      type = placement::known_gpu_types()[placement::kGeneratedGpuModels - 1];  // the slowest
      out.notes.push_back(site.name + ": " +
                          (node.gpu_product.empty()
                               ? "no " + std::string(kGpuProductLabel) + " label"
                               : "unknown GPU product '" + node.gpu_product + "'") +
                          " (taken as " + type->name + ")");
    }
    if (std::none_of(t.gpu_types.begin(), t.gpu_types.end(),
                     [&](const placement::GpuType& g) { return g.name == type->name; })) {
      t.gpu_types.push_back(*type);
    }
    for (int g = 0; g < node.free_gpus; ++g) {
      t.devices.push_back({.id = t.size(),
                           .site = site.name,
                           .gpu = type->name,
                           .peak_tflops = type->peak_tflops,
                           .memory_gib = type->memory_gib});
      out.places.push_back({node.cluster, node.name, g});
    }
  }

  std::set<std::string> aggregate_writers;  // nodes whose aggregates were taken
  // One direction of a pair: what `from` measured to `to` by name (missing when that one is
  // stale), else its aggregate for the nodes of `to`'s cluster; `aggregate` set when the
  // aggregate was taken.
  const auto direction = [&](size_t from, size_t to,
                             bool& aggregate) -> std::optional<placement::Link> {
    const std::pair<std::string, std::string> named{t.sites[from].name, t.sites[to].name};
    if (listed.count(named)) {
      const auto it = measured.find(named);
      return it == measured.end() ? std::nullopt : std::optional(it->second);
    }
    const std::string& writer = named.first;
    if (const auto it = aggregated.find({writer, nodes[to].cluster}); it != aggregated.end()) {
      aggregate = true;
      aggregate_writers.insert(writer);
      return it->second;
    }
    return std::nullopt;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t j = i + 1; j < nodes.size(); ++j) {
      bool aggregate = false;
      const std::optional<placement::Link> ab = direction(i, j, aggregate),
                                           ba = direction(j, i, aggregate);
      placement::SitePair pair{t.sites[i].name, t.sites[j].name, {}};
      LinkSource source = LinkSource::kEstimated;
      if (ab || ba) {
        pair.link = combine(ab, ba);
        ++out.measured_pairs;
        if (aggregate) ++out.aggregated_pairs;
        source = aggregate ? LinkSource::kAggregated : LinkSource::kMeasured;
      } else {
        pair.link = estimate(nodes[i], nodes[j], estimates);
        ++out.estimated_pairs;
      }
      out.pair_sources[std::minmax(pair.a, pair.b)] = source;
      t.site_pairs.push_back(pair);
    }
  }
  if (out.aggregated_pairs > 0)
    out.notes.push_back(aggregates_note(out.aggregated_pairs, aggregate_writers));
  t.finalize("member clusters");
  return out;
}

}  // namespace tessel::controller
