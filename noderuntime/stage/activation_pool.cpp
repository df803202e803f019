#include "noderuntime/stage/activation_pool.h"

#include <stdexcept>
#include <string>

namespace tessel::stage {

ActivationSlot& ActivationPool::acquire(int micro_batch) {
  auto& slot = live_[micro_batch];
  if (slot) return *slot;
  for (auto it = released_.begin(); it != released_.end(); ++it) {
    bool sent = true;
    for (auto& send : (*it)->sends) sent = sent && send.test();
    if (!sent) continue;
    slot = std::move(*it);
    released_.erase(it);
    slot->sends.clear();
    return *slot;
  }
  slot = std::make_unique<ActivationSlot>();
  slot->act = chunk_.new_activations();
  ++allocated_;
  return *slot;
}

ActivationSlot& ActivationPool::at(int micro_batch) {
  const auto it = live_.find(micro_batch);
  if (it == live_.end()) {
    throw std::logic_error("virtual stage " + std::to_string(chunk_.spec().virtual_stage) +
                           ": micro-batch " + std::to_string(micro_batch) +
                           " has no activations (Backward or send before its Forward)");
  }
  return *it->second;
}

void ActivationPool::release(int micro_batch) {
  const auto it = live_.find(micro_batch);
  if (it == live_.end()) return;
  released_.push_back(std::move(it->second));
  live_.erase(it);
}

void ActivationPool::wait_all() {
  for (auto& [micro_batch, slot] : live_) {
    for (auto& send : slot->sends) send.wait();
    slot->sends.clear();
    released_.push_back(std::move(slot));
  }
  live_.clear();
  for (auto& slot : released_) {
    for (auto& send : slot->sends) send.wait();
    slot->sends.clear();
  }
}

}  // namespace tessel::stage
