#include "operator/controller/cluster_topology.h"

#include <algorithm>
#include <map>
#include <optional>

#include "api/link_annotations.h"
#include "api/manifest_error.h"
#include "placement/gpu_models.h"

namespace tessel::controller {
namespace {

std::string key_of(const std::string& cluster, const std::string& node) {
  return cluster + "/" + node;
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

}  // namespace

ClusterTopology build_cluster_topology(const std::vector<GpuNode>& nodes,
                                       const LinkEstimates& estimates) {
  ClusterTopology out;
  placement::Topology& t = out.topology;
  t.id = "clusters";
  t.name = "candidate GPUs of the member clusters";
  t.intra_site = estimates.same_node;

  // Every node's measurements, by "<cluster>/<node>" of both ends.
  std::map<std::pair<std::string, std::string>, placement::Link> measured;
  for (const GpuNode& node : nodes) {
    const std::string self = key_of(node.cluster, node.name);
    const auto annotation = node.annotations.find(api::kLinksAnnotation);
    if (annotation == node.annotations.end()) continue;
    try {
      for (const auto& [peer, m] : api::parse_node_links(annotation->second, self).peers) {
        const std::string other =
            peer.find('/') == std::string::npos ? key_of(node.cluster, peer) : peer;
        measured[{self, other}] = m.link();
      }
    } catch (const api::ManifestError& e) {
      out.notes.push_back(std::string(e.what()) + " (its links are estimated)");
    }
  }

  std::map<std::string, const placement::GpuType*> types;
  for (const GpuNode& node : nodes) {
    placement::Site site;
    site.name = key_of(node.cluster, node.name);
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

  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t j = i + 1; j < nodes.size(); ++j) {
      const std::string a = t.sites[i].name, b = t.sites[j].name;
      std::optional<placement::Link> ab, ba;
      if (const auto it = measured.find({a, b}); it != measured.end()) ab = it->second;
      if (const auto it = measured.find({b, a}); it != measured.end()) ba = it->second;
      placement::SitePair pair{a, b, {}};
      if (ab || ba) {
        pair.link = combine(ab, ba);
        ++out.measured_pairs;
      } else {
        pair.link = estimate(nodes[i], nodes[j], estimates);
        ++out.estimated_pairs;
      }
      t.site_pairs.push_back(pair);
    }
  }
  t.finalize("member clusters");
  return out;
}

}  // namespace tessel::controller
