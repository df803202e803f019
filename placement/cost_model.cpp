#include "placement/cost_model.h"

#include <stdexcept>

namespace tessel::placement {

void CostScratch::bound_caches(size_t limit) {
  if (group_term.size() > limit) group_term.clear();
  if (pair_term.size() > limit) pair_term.clear();
}

CostModel::CostModel(const Topology& topology, PartitionShape shape)
    : topology_(topology), shape_(shape), keys_(shape.devices()) {
  if (shape.stages < 1 || shape.replicas < 1)
    throw std::invalid_argument("stages and replicas must be >= 1");
  if (topology.size() != shape.devices())
    throw std::invalid_argument("the topology has " + std::to_string(topology.size()) +
                                " devices but stages x replicas = " + std::to_string(shape.stages) +
                                " x " + std::to_string(shape.replicas) + " = " +
                                std::to_string(shape.devices()));
  const size_t n = static_cast<size_t>(shape.devices());
  hop_weight_.assign(n * n, 0.0);
  sync_weight_.assign(n * n, 0.0);
}

std::unique_ptr<CostScratch> CostModel::make_scratch() const {
  return std::make_unique<CostScratch>();
}

namespace {
// Symmetric key of an unordered pair of group keys.
uint64_t pair_key(uint64_t a, uint64_t b) {
  if (a > b) std::swap(a, b);
  return a * 0x9E3779B97F4A7C15ULL ^ ((b << 29) | (b >> 35)) ^ 0xD6E8FEB86659FD93ULL;
}
}  // namespace

void CostModel::coarsened_graph(const Groups& groups, CostScratch& s) const {
  const int g = shape_.stages, d = shape_.replicas, n = devices();
  s.keys.resize(g);
  for (int k = 0; k < g; ++k) s.keys[k] = keys_.of(groups[k]);
  s.h.assign(static_cast<size_t>(g) * g, 0.0);
  s.sub.resize(static_cast<size_t>(d) * d);
  for (int a = 0; a < g; ++a) {
    for (int b = a + 1; b < g; ++b) {
      const uint64_t key = pair_key(s.keys[a], s.keys[b]);
      double value;
      if (auto it = s.pair_term.find(key); it != s.pair_term.end()) {
        value = it->second;
        ++s.hits;
      } else {
        for (int i = 0; i < d; ++i) {
          const double* row = &hop_weight_[static_cast<size_t>(groups[a][i]) * n];
          for (int j = 0; j < d; ++j) s.sub[static_cast<size_t>(i) * d + j] = row[groups[b][j]];
        }
        value = bottleneck_matching_value(s.sub.data(), d, s.matching);
        s.pair_term.emplace(key, value);
        ++s.misses;
      }
      s.h[static_cast<size_t>(a) * g + b] = s.h[static_cast<size_t>(b) * g + a] = value;
    }
  }
}

HopMatching CostModel::match_groups(const Groups& groups, int from_group, int to_group) const {
  const int d = shape_.replicas, n = devices();
  std::vector<double> sub(static_cast<size_t>(d) * d);
  const auto& a = groups[from_group];
  const auto& b = groups[to_group];
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j)
      sub[static_cast<size_t>(i) * d + j] = hop_weight_[static_cast<size_t>(a[i]) * n + b[j]];
  const BottleneckMatch m = bottleneck_matching(sub.data(), d);
  HopMatching hop;
  hop.bottleneck_s = m.value;
  for (int i = 0; i < d; ++i) {
    hop.from_device.push_back(a[i]);
    hop.to_device.push_back(b[m.match_of_row[i]]);
  }
  return hop;
}

}  // namespace tessel::placement
