// The rank loop that the replay checker (replay_schedule) and the discrete-event simulator
// (simulate_iteration) share: every rank's instruction list run together, each rank as far as
// it can go, until no rank can move. The walk decides which rank's next instruction runs,
// pairs each receive with the oldest unreceived send on its channel (source, destination,
// kind), blocks a receive whose send is not posted yet, and reports what is left; a handler
// says what each use does with an instruction (the checker records, the simulator advances
// virtual time). The stage runtime runs one rank over real sockets, where the transport pairs
// messages by key, so it has no use for this loop.
#pragma once

#include <cstddef>
#include <vector>

#include "placement/schedule.h"

namespace tessel::placement {

// One entry of one rank's list.
struct InstructionRef {
  int rank = 0;
  size_t index = 0;
};

class InstructionHandler {
 public:
  virtual ~InstructionHandler() = default;

  // False when the instruction cannot run as written (the checker reports why); the walk then
  // passes over it. Asked again each time the walk comes back to a blocked instruction.
  virtual bool well_formed(const InstructionRef& at, const Instruction& instruction) = 0;
  virtual void forward(const InstructionRef& at, const Instruction& instruction) = 0;
  virtual void backward(const InstructionRef& at, const Instruction& instruction) = 0;
  // A send never blocks: the walk posts it on its channel (this rank to instruction.peer).
  virtual void send(const InstructionRef& at, const Instruction& instruction) = 0;
  // Called once the receive is paired with `matched_send`, the oldest send on its channel
  // (instruction.peer to this rank) that nobody has received yet.
  virtual void receive(const InstructionRef& at, const Instruction& instruction,
                       const InstructionRef& matched_send) = 0;
  virtual void all_reduce(const InstructionRef& at, const Instruction& instruction) = 0;
  // False while the step waits on other ranks; the walk comes back to it after they moved.
  virtual bool optimizer_step(const InstructionRef& at, const Instruction& instruction) = 0;
};

struct WalkOutcome {
  std::vector<StuckRank> stuck;            // empty exactly when every list ran to its end
  std::vector<InstructionRef> unreceived;  // sends nobody received, by channel then in order
};

// Runs lists[r] as rank r. A rank moves while its next instruction can run; the walk sweeps
// the ranks in order until a sweep moves none.
WalkOutcome walk_schedule(const std::vector<std::vector<Instruction>>& lists,
                          InstructionHandler& handler);

}  // namespace tessel::placement
