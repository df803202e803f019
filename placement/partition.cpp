#include "placement/partition.h"

#include <algorithm>

namespace tessel::placement {

void PartitionShape::throw_bad_devices() const {
  throw std::invalid_argument(
      std::to_string(stages) + " stages x " + std::to_string(replicas) +
      " replicas = " + std::to_string(static_cast<long long>(stages) * replicas) +
      " devices: not a device count (each must be at least 1, the product at most " +
      std::to_string(std::numeric_limits<int>::max()) + ")");
}

Groups groups_from_labels(const Labels& labels, const PartitionShape& shape) {
  Groups groups(shape.stages);
  for (auto& g : groups) g.reserve(shape.replicas);
  for (int d = 0; d < static_cast<int>(labels.size()); ++d) groups[labels[d]].push_back(d);
  // Canonical order (by smallest member), so that a partition's cost cannot depend on how its
  // groups happen to be numbered (ties in the stage-order search are broken by index).
  std::sort(groups.begin(), groups.end(),
            [](const auto& a, const auto& b) { return !b.empty() && (a.empty() || a[0] < b[0]); });
  return groups;
}

Labels labels_from_groups(const Groups& groups, int devices) {
  Labels labels(devices, -1);
  for (int g = 0; g < static_cast<int>(groups.size()); ++g)
    for (int d : groups[g]) labels[d] = g;
  return labels;
}

void check_balanced(const Labels& labels, const PartitionShape& shape) {
  if (static_cast<int>(labels.size()) != shape.devices())
    throw std::invalid_argument("partition has " + std::to_string(labels.size()) +
                                " devices, expected " + std::to_string(shape.devices()));
  std::vector<int> count(shape.stages, 0);
  for (int l : labels) {
    if (l < 0 || l >= shape.stages)
      throw std::invalid_argument("partition label " + std::to_string(l) + " out of range");
    ++count[l];
  }
  for (int g = 0; g < shape.stages; ++g)
    if (count[g] != shape.replicas)
      throw std::invalid_argument("group " + std::to_string(g) + " has " +
                                  std::to_string(count[g]) + " devices, expected " +
                                  std::to_string(shape.replicas));
}

Labels ordered_labels(const PartitionShape& shape) {
  Labels labels(shape.devices());
  for (int d = 0; d < shape.devices(); ++d) labels[d] = d / shape.replicas;
  return labels;
}

Labels random_labels(const PartitionShape& shape, Rng& rng) {
  Labels labels = ordered_labels(shape);
  rng.shuffle(labels);
  return labels;
}

DeviceKeys::DeviceKeys(int devices, uint64_t salt) : keys_(devices) {
  Rng rng(salt);
  for (auto& k : keys_) k = rng.next();
}

uint64_t DeviceKeys::of(const std::vector<int>& members) const {
  uint64_t key = 0;
  for (int d : members) key ^= keys_[d];
  return key;
}

}  // namespace tessel::placement
