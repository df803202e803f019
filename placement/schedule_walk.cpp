#include "placement/schedule_walk.h"

#include <deque>
#include <map>
#include <tuple>

namespace tessel::placement {

namespace {

class Walk {
 public:
  Walk(const std::vector<std::vector<Instruction>>& lists, InstructionHandler& handler)
      : lists_(lists), handler_(handler), next_(lists.size(), 0) {}

  WalkOutcome run() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (size_t rank = 0; rank < lists_.size(); ++rank) {
        while (next_[rank] < lists_[rank].size() && step(static_cast<int>(rank))) {
          progress = true;
        }
      }
    }
    WalkOutcome outcome;
    for (size_t rank = 0; rank < lists_.size(); ++rank) {
      if (next_[rank] < lists_[rank].size()) {
        outcome.stuck.push_back(
            {static_cast<int>(rank), static_cast<int>(next_[rank]), lists_[rank][next_[rank]]});
      }
    }
    for (const auto& [channel, queue] : channels_) {
      outcome.unreceived.insert(outcome.unreceived.end(), queue.begin(), queue.end());
    }
    return outcome;
  }

 private:
  using Channel = std::tuple<int, int, Op>;  // (source, destination, send op)

  // Runs the rank's next instruction; false when it has to wait.
  bool step(int rank) {
    const InstructionRef at{rank, next_[rank]};
    const Instruction& instruction = lists_[rank][at.index];
    if (handler_.well_formed(at, instruction)) {
      switch (instruction.op) {
        case Op::Forward:
          handler_.forward(at, instruction);
          break;
        case Op::Backward:
          handler_.backward(at, instruction);
          break;
        case Op::SendActivation:
        case Op::SendGradient:
          channels_[{rank, instruction.peer, instruction.op}].push_back(at);
          handler_.send(at, instruction);
          break;
        case Op::RecvActivation:
        case Op::RecvGradient: {
          const Op send_op =
              instruction.op == Op::RecvActivation ? Op::SendActivation : Op::SendGradient;
          auto& queue = channels_[{instruction.peer, rank, send_op}];
          if (queue.empty()) return false;
          const InstructionRef matched = queue.front();
          queue.pop_front();
          handler_.receive(at, instruction, matched);
          break;
        }
        case Op::AllReduce:
          handler_.all_reduce(at, instruction);
          break;
        case Op::OptimizerStep:
          if (!handler_.optimizer_step(at, instruction)) return false;
          break;
      }
    }
    ++next_[rank];
    return true;
  }

  const std::vector<std::vector<Instruction>>& lists_;
  InstructionHandler& handler_;
  std::vector<size_t> next_;  // per rank: index of its next instruction
  std::map<Channel, std::deque<InstructionRef>> channels_;
};

}  // namespace

WalkOutcome walk_schedule(const std::vector<std::vector<Instruction>>& lists,
                          InstructionHandler& handler) {
  return Walk(lists, handler).run();
}

}  // namespace tessel::placement
