// The activation stash of one chunk: a slot per micro-batch in flight, holding its
// ChunkActivations from the first instruction that touches it (a receive posted early, or its
// Forward) until its Backward and the send of its input gradient. A slot whose sends are still
// in flight is only reused once they have completed, so a send's buffer is never overwritten;
// nothing waits for a send until the slot is needed again or the step ends.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "noderuntime/stage/chunk_model.h"
#include "noderuntime/transport/request.h"

namespace tessel::stage {

struct ActivationSlot {
  ChunkActivations act;
  std::vector<transport::Request> sends;  // in flight from act's buffers
};

class ActivationPool {
 public:
  explicit ActivationPool(const ChunkModel& chunk) : chunk_(chunk) {}

  // The micro-batch's slot, taken from the free slots (or allocated) on first use.
  ActivationSlot& acquire(int micro_batch);
  // The micro-batch's slot; throws std::logic_error when it has none.
  ActivationSlot& at(int micro_batch);
  // The micro-batch is done with its slot; its sends may still be in flight.
  void release(int micro_batch);
  // Waits for every send still in flight (throws the transport's error); all slots free.
  void wait_all();

  size_t allocated() const { return allocated_; }  // slots ever created: the stash's peak

 private:
  const ChunkModel& chunk_;
  std::map<int, std::unique_ptr<ActivationSlot>> live_;
  std::vector<std::unique_ptr<ActivationSlot>> released_;  // oldest first
  size_t allocated_ = 0;
};

}  // namespace tessel::stage
