// All-reduce of a small buffer (the loss, the gradient norm, the stop vote) in one round:
// every member sends its whole buffer to every other member at once and adds all of them up
// in group order. It pays one link latency where the ring pays 2 (n - 1), which across
// continents is the difference between a tenth of a second and several seconds a step, for
// n - 1 messages per member instead of 2 (n - 1). Every member adds the same values in the
// same order, so all end with the same bits.
//
// Message keys: tag all-reduce, step = the collective's sequence number within its group,
// micro-batch = ring_group_id(group), chunk = kDirectChunk (ring exchanges count from 0).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "noderuntime/transport/communicator.h"

namespace tessel::transport {

inline constexpr uint32_t kDirectChunk = 0xFFFFFFFFu;

// Throws TransportError when the group is invalid for `comm` or a send or receive fails.
void direct_all_reduce(Communicator& comm, std::span<float> data, const std::vector<int>& group,
                       uint64_t sequence);

}  // namespace tessel::transport
