// A balanced partition of N = stages x replicas devices into `stages` data-parallel groups
// of `replicas` devices each: the search space of the placement. Which group becomes which
// stage, and how the members of neighbouring groups pair up into pipelines, is solved
// exactly inside the cost model.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "placement/rng.h"

namespace tessel::placement {

struct PartitionShape {
  int stages = 1;    // D_PP: number of groups
  int replicas = 1;  // D_DP: devices per group
  // stages x replicas; throws std::invalid_argument (naming both) when either is negative or
  // the product does not fit an int, instead of wrapping.
  int devices() const {
    const long long n = static_cast<long long>(stages) * replicas;
    if (stages < 0 || replicas < 0 || n > std::numeric_limits<int>::max()) throw_bad_devices();
    return static_cast<int>(n);
  }

 private:
  [[noreturn]] void throw_bad_devices() const;
};

// labels[device] = group index in [0, stages).
using Labels = std::vector<int>;
// groups[g] = the sorted device ids of group g; groups_from_labels orders the groups by their
// smallest device.
using Groups = std::vector<std::vector<int>>;

Groups groups_from_labels(const Labels& labels, const PartitionShape& shape);
Labels labels_from_groups(const Groups& groups, int devices);
// Throws std::invalid_argument unless every group has exactly `replicas` devices.
void check_balanced(const Labels& labels, const PartitionShape& shape);

// Group k = devices k*D .. k*D+D-1 (rank order).
Labels ordered_labels(const PartitionShape& shape);
Labels random_labels(const PartitionShape& shape, Rng& rng);

// Order-independent 64-bit key of a set of devices (Zobrist hashing): the XOR of one random
// key per device, so moving a device in or out updates it in O(1). Used to cache per-group
// and per-group-pair costs across candidates; a collision needs two distinct groups of the
// same size to agree on 64 random bits.
class DeviceKeys {
 public:
  explicit DeviceKeys(int devices, uint64_t salt = 0x7E55E1);
  uint64_t operator[](int device) const { return keys_[device]; }
  uint64_t of(const std::vector<int>& members) const;

 private:
  std::vector<uint64_t> keys_;
};

}  // namespace tessel::placement
