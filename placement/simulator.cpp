#include "placement/simulator.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "placement/outer_sync_cost.h"
#include "placement/schedule.h"
#include "placement/schedule_walk.h"

namespace tessel::placement {

const char* stream_name(Stream stream) {
  switch (stream) {
    case Stream::ForwardRecv:
      return "1. forward-recv";
    case Stream::ForwardCompute:
      return "2. forward-compute";
    case Stream::ForwardSend:
      return "3. forward-send";
    case Stream::BackwardRecv:
      return "4. backward-recv";
    case Stream::BackwardCompute:
      return "5. backward-compute";
    case Stream::BackwardSend:
      return "6. backward-send";
    case Stream::OptimizerComm:
      return "7. optimizer-comm";
    case Stream::OptimizerStep:
      return "8. optimizer-step";
  }
  return "unknown";
}

void validate_pipeline_timing(const ScheduleSpec& spec, const PipelineTiming& timing) {
  auto fail = [](const std::string& why) {
    throw std::invalid_argument("pipeline timing: " + why);
  };
  const size_t p = static_cast<size_t>(spec.stages);
  if (timing.stages.size() != p) {
    fail(std::to_string(timing.stages.size()) + " stages for a pipeline of " + std::to_string(p));
  }
  const size_t hops_needed = spec.kind == ScheduleKind::Interleaved ? p : p - 1;
  if (timing.hops.size() < hops_needed) {
    fail(std::to_string(timing.hops.size()) + " hops, the " + to_string(spec.kind) +
         " schedule over " + std::to_string(p) + " stages needs " + std::to_string(hops_needed));
  }
  for (size_t j = 0; j < timing.stages.size(); ++j) {
    const StageTiming& stage = timing.stages[j];
    if (stage.forward_s < 0 || stage.backward_s < 0 || stage.allreduce_s < 0 ||
        stage.table_allreduce_s < 0 || stage.delta_exchange_s < 0) {
      fail("stages[" + std::to_string(j) + "] has a negative time");
    }
  }
  for (size_t h = 0; h < timing.hops.size(); ++h) {
    if (timing.hops[h].latency_s < 0 || timing.hops[h].transfer_s < 0) {
      fail("hops[" + std::to_string(h) + "] has a negative time");
    }
  }
  if (timing.optimizer_s < 0) fail("optimizer_s is negative");
  if (timing.embedding_allreduce_s < 0) fail("embedding_allreduce_s is negative");
  if (timing.world_sync_s < 0) fail("world_sync_s is negative");
  if (timing.allreduce_buckets < 1) fail("allreduce_buckets must be at least 1");
  const OuterSyncTiming& outer = timing.outer_sync;
  if (outer.sync_every < 0) fail("outer_sync.sync_every is negative");
  if (outer.vote_s < 0 || outer.outer_step_s < 0) fail("outer_sync has a negative time");
}

namespace {

// A message on a link: when its data was ready at the sender, when its transfer started and
// when it arrives at the receiver. (Which micro-batch and chunk it carries is the replay
// checker's business: generated lists pair up in FIFO order.)
struct Message {
  double ready_s = 0;
  double start_s = 0;
  double arrival_s = 0;
};

// Every resource has one owner that uses it in list order: a rank's compute, the link direction
// a rank sends one kind of message on (each (sender, kind) has one receiver, so the walk's FIFO
// channel is the link's FIFO order), a rank's data-parallel link. The order of the events on
// each resource is therefore fixed, and instead of a global event queue the simulation walks
// the lists (schedule_walk.h), advancing each rank as far as the messages it waits for have
// been posted; the times are those an event-queue simulation of the same model computes.
class Simulation : public InstructionHandler {
 public:
  Simulation(const ScheduleSpec& spec, const PipelineTiming& timing)
      : spec_(spec),
        timing_(timing),
        lists_(generate_schedule(spec)),
        ranks_(lists_.size()),
        link_free_s_(2 * lists_.size(), 0) {
    const size_t cells = static_cast<size_t>(spec.micro_batches) * spec.chunks;
    for (size_t rank = 0; rank < lists_.size(); ++rank) {
      RankState& state = ranks_[rank];
      state.sent.assign(lists_[rank].size(), {});
      state.activation.assign(cells, {});
      state.gradient.assign(cells, {});
      state.forward_end_s.assign(cells, 0);
      state.backward_end_s.assign(cells, 0);
    }
    result_.compute_busy_s.assign(lists_.size(), 0);
    result_.network_wait_s.assign(lists_.size(), 0);
  }

  SimulationResult run() {
    const WalkOutcome outcome = walk_schedule(lists_, *this);
    if (!outcome.stuck.empty()) {
      throw std::logic_error("simulation stalled at rank " +
                             std::to_string(outcome.stuck.front().rank));
    }
    for (const RankState& state : ranks_) {
      result_.step_s = std::max(result_.step_s, state.clock_s);
    }
    result_.iteration_s = result_.step_s;
    if (timing_.outer_sync.sync_every > 0) {
      for (size_t rank = 0; rank < ranks_.size(); ++rank) {
        record(static_cast<int>(rank), Stream::OptimizerComm,
               "outer sync (every " + std::to_string(timing_.outer_sync.sync_every) + " steps)",
               ranks_[rank].clock_s, timing_.stages[rank].delta_exchange_s);
      }
      result_.outer_stall_s = outer_sync_stall_s(timing_, result_.step_s);
      result_.iteration_s = amortised_iteration_s(timing_, result_.step_s);
    }
    double busy = 0;
    for (double rank_busy : result_.compute_busy_s) busy += rank_busy;
    const double mean_busy = busy / static_cast<double>(lists_.size());
    result_.bubble_fraction = result_.iteration_s > 0 ? 1 - mean_busy / result_.iteration_s : 0;
    return std::move(result_);
  }

 private:
  struct Input {
    double arrival_s = 0;
    double ready_s = 0;  // when the sender had the data
  };
  struct RankState {
    // Compute stream free; without overlap the whole rank (it blocks on communication).
    double clock_s = 0;
    std::vector<Input> activation, gradient;  // per (mb, chunk) cell, set by the receive
    std::vector<double> forward_end_s, backward_end_s;
    std::vector<Message> sent;  // per index of the rank's list: the message its send posted
    double last_backward_start_s = 0;
    double last_backward_s = 0;
    double allreduce_end_s = 0;
    // When this rank's copy of the tied table has its gradient (first and last stage only);
    // unset until the rank reaches its all-reduce.
    std::optional<double> table_ready_s;
    // When the rank's gradients are complete and it waits for the world's sum; unset until
    // it reaches its OptimizerStep.
    std::optional<double> synced_s;
  };

  size_t cell(const Instruction& instruction) const {
    return static_cast<size_t>(instruction.micro_batch) * spec_.chunks + instruction.chunk;
  }

  static std::string label(const char* prefix, const Instruction& instruction) {
    return std::string(prefix) + "mb" + std::to_string(instruction.micro_batch) + " c" +
           std::to_string(instruction.chunk);
  }

  void record(int rank, Stream stream, std::string name, double start_s, double duration_s) {
    result_.events.push_back({rank, stream, std::move(name), start_s, duration_s});
  }

  // Idle compute time before `start_s` that the network caused: waiting for an input counts
  // only as long as the message was on its way, not while its sender was still computing it.
  void wait_for(int rank, const Input& input, double start_s) {
    const double idle = start_s - ranks_[rank].clock_s;
    if (idle > 0) {
      result_.network_wait_s[rank] += std::min(idle, input.arrival_s - input.ready_s);
    }
  }

  // Generated lists are sound (the replay checker proves it for every spec the tests sweep).
  bool well_formed(const InstructionRef&, const Instruction&) override { return true; }
  void forward(const InstructionRef& at, const Instruction& instruction) override {
    compute(at.rank, instruction);
  }
  void backward(const InstructionRef& at, const Instruction& instruction) override {
    compute(at.rank, instruction);
  }

  void compute(int rank, const Instruction& instruction) {
    RankState& state = ranks_[rank];
    const StageTiming& stage = timing_.stages[rank];
    const bool forward = instruction.op == Op::Forward;
    const size_t c = cell(instruction);
    const bool has_input = forward ? !is_first_virtual_stage(spec_, rank, instruction.chunk)
                                   : !is_last_virtual_stage(spec_, rank, instruction.chunk);
    double start_s = state.clock_s;
    if (has_input) {
      const Input& input = forward ? state.activation[c] : state.gradient[c];
      start_s = std::max(start_s, input.arrival_s);
      wait_for(rank, input, start_s);
    }
    const double duration_s = (forward ? stage.forward_s : stage.backward_s) / spec_.chunks;
    state.clock_s = start_s + duration_s;
    result_.compute_busy_s[rank] += duration_s;
    if (forward) {
      state.forward_end_s[c] = state.clock_s;
    } else {
      state.backward_end_s[c] = state.clock_s;
      state.last_backward_start_s = start_s;
      state.last_backward_s = duration_s;
    }
    record(rank, forward ? Stream::ForwardCompute : Stream::BackwardCompute,
           label(forward ? "F " : "B ", instruction), start_s, duration_s);
  }

  void send(const InstructionRef& at, const Instruction& instruction) override {
    const int rank = at.rank;
    RankState& state = ranks_[rank];
    const bool activation = instruction.op == Op::SendActivation;
    const HopTiming& hop =
        timing_.hops[activation ? activation_hop(spec_, rank) : gradient_hop(spec_, rank)];
    double& link_free_s = link_free_s_[2 * rank + (activation ? 0 : 1)];
    const size_t c = cell(instruction);
    Message& message = state.sent[at.index];
    message.ready_s = activation ? state.forward_end_s[c] : state.backward_end_s[c];
    if (!timing_.overlap) message.ready_s = std::max(message.ready_s, state.clock_s);
    message.start_s = std::max(message.ready_s, link_free_s);
    link_free_s = message.start_s + hop.transfer_s;
    message.arrival_s = link_free_s + hop.latency_s;
    const Stream stream = activation ? Stream::ForwardSend : Stream::BackwardSend;
    const std::string name = label(activation ? "send F " : "send B ", instruction);
    if (timing_.overlap) {
      record(rank, stream, name, message.start_s, hop.transfer_s);
    } else {
      // The rank is held until the message has arrived at its peer.
      result_.network_wait_s[rank] += message.arrival_s - state.clock_s;
      record(rank, stream, name, message.start_s, message.arrival_s - message.start_s);
      state.clock_s = message.arrival_s;
    }
  }

  void receive(const InstructionRef& at, const Instruction& instruction,
               const InstructionRef& matched_send) override {
    const int rank = at.rank;
    RankState& state = ranks_[rank];
    const bool activation = instruction.op == Op::RecvActivation;
    const Message& message = ranks_[matched_send.rank].sent[matched_send.index];
    const Input input{message.arrival_s, message.ready_s};
    (activation ? state.activation : state.gradient)[cell(instruction)] = input;
    const Stream stream = activation ? Stream::ForwardRecv : Stream::BackwardRecv;
    const std::string name = label(activation ? "recv F " : "recv B ", instruction);
    // Posted when the rank reaches it; it completes when the message arrives.
    const double start_s =
        timing_.overlap ? std::max(state.clock_s, message.start_s) : state.clock_s;
    const double end_s = std::max(start_s, message.arrival_s);
    record(rank, stream, name, start_s, end_s - start_s);
    if (!timing_.overlap) {
      wait_for(rank, input, end_s);
      state.clock_s = end_s;
    }
  }

  // The first and the last rank, when the tied table is summed.
  bool holds_table(int rank) const {
    return sums_tied_table(timing_) && (rank == 0 || rank == spec_.stages - 1);
  }

  void all_reduce(const InstructionRef& at, const Instruction&) override {
    const int rank = at.rank;
    RankState& state = ranks_[rank];
    const double total_s = timing_.stages[rank].allreduce_s;
    if (!timing_.overlap) {
      record(rank, Stream::OptimizerComm, "all-reduce", state.clock_s, total_s);
      state.clock_s += total_s;
      state.allreduce_end_s = state.clock_s;
      result_.network_wait_s[rank] += total_s;
      if (holds_table(rank)) state.table_ready_s = state.clock_s;
      return;
    }
    if (holds_table(rank)) {
      state.table_ready_s = rank == 0 ? state.last_backward_start_s + state.last_backward_s
                                      : state.last_backward_start_s;
    }
    // Bucket k is released once (k+1)/buckets of the last Backward has run.
    const int buckets = timing_.allreduce_buckets;
    double link_free_s = 0;
    for (int k = 0; k < buckets; ++k) {
      const double released_s =
          state.last_backward_start_s + state.last_backward_s * (k + 1) / buckets;
      const double start_s = std::max(released_s, link_free_s);
      link_free_s = start_s + total_s / buckets;
      record(rank, Stream::OptimizerComm,
             "all-reduce " + std::to_string(k + 1) + "/" + std::to_string(buckets), start_s,
             total_s / buckets);
    }
    state.allreduce_end_s = link_free_s;
  }

  // False while the other holder of the tied table has not reached its all-reduce, or (with a
  // world sum) some rank has not reached its optimizer step.
  bool optimizer_step(const InstructionRef& at, const Instruction&) override {
    const int rank = at.rank;
    RankState& state = ranks_[rank];
    if (!state.synced_s) {
      double synced_s = state.allreduce_end_s;
      if (holds_table(rank)) {
        const RankState& other = ranks_[rank == 0 ? spec_.stages - 1 : 0];
        if (!other.table_ready_s) return false;
        const double tie_start_s = std::max(*state.table_ready_s, *other.table_ready_s);
        const double tie_end_s = tie_start_s + timing_.embedding_allreduce_s;
        record(rank, Stream::OptimizerComm, "tie embedding", tie_start_s,
               timing_.embedding_allreduce_s);
        // The table's own all-reduce queues behind the rank's other buckets.
        const double table_start_s = std::max(synced_s, tie_end_s);
        const double table_s = timing_.stages[rank].table_allreduce_s;
        record(rank, Stream::OptimizerComm, "all-reduce table", table_start_s, table_s);
        synced_s = table_start_s + table_s;
      }
      state.synced_s = std::max(state.clock_s, synced_s);
    }
    // With a world sum every rank waits for the last one; without, each steps on its own.
    double world_s = *state.synced_s;
    if (timing_.world_sync_s > 0) {
      for (const RankState& r : ranks_) {
        if (!r.synced_s) return false;
        world_s = std::max(world_s, *r.synced_s);
      }
      record(rank, Stream::OptimizerComm, "world sum", world_s, timing_.world_sync_s);
    }
    const double start_s = world_s + timing_.world_sync_s;
    result_.network_wait_s[rank] += start_s - state.clock_s;
    record(rank, Stream::OptimizerStep, "optimizer step", start_s, timing_.optimizer_s);
    state.clock_s = start_s + timing_.optimizer_s;
    return true;
  }

  const ScheduleSpec& spec_;
  const PipelineTiming& timing_;
  std::vector<std::vector<Instruction>> lists_;
  std::vector<RankState> ranks_;
  // When each link direction is free for the next transfer: 2*sender + (0 activations,
  // 1 gradients).
  std::vector<double> link_free_s_;
  SimulationResult result_;
};

}  // namespace

SimulationResult simulate_iteration(const ScheduleSpec& spec, const PipelineTiming& timing) {
  validate_schedule_spec(spec);
  validate_pipeline_timing(spec, timing);
  return Simulation(spec, timing).run();
}

}  // namespace tessel::placement
