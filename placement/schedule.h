// Pipeline schedules (GPipe, 1F1B, interleaved 1F1B) as one instruction list per rank, pure
// functions of (p, v, m), and a multi-rank replay that checks a set of lists can run together.
// The same lists drive the stage runtime, the discrete-event simulator and the Chrome trace.
#pragma once

#include <string>
#include <vector>

#include "placement/pipeline_timing.h"

namespace tessel::placement {

enum class Op {
  Forward,
  Backward,
  SendActivation,
  RecvActivation,
  SendGradient,
  RecvGradient,
  AllReduce,
  OptimizerStep
};

const char* to_string(Op op);  // "Forward", "SendActivation", ...

// micro_batch and chunk are -1 for AllReduce and OptimizerStep. chunk is always this rank's
// own chunk: a send carries the output (or input gradient) of that chunk, a receive brings
// the input (or output gradient) of that chunk. Rank r's chunk c is virtual stage c*p + r;
// activations go to virtual stage s+1, gradients to s-1 (rank p-1 chunk c feeds rank 0
// chunk c+1 over the wrap hop).
struct Instruction {
  Op op = Op::Forward;
  int micro_batch = -1;
  int chunk = -1;
  int peer = -1;  // the other rank for sends and receives, -1 otherwise

  bool operator==(const Instruction&) const = default;
};

std::string to_string(const Instruction& instruction);  // e.g. "RecvGradient mb3 c1 from 2"

// Throws std::invalid_argument naming the offending value when (kind, p, m, v, G) does not
// describe a schedule this module can run.
void validate_schedule_spec(const ScheduleSpec& spec);

// Each rank's instruction list. GPipe: all forwards, then all backwards. 1F1B: Megatron's
// non-interleaved order. Interleaved: Megatron's order with v chunks per rank. Every list ends
// with AllReduce then OptimizerStep. Throws std::invalid_argument for an invalid spec.
std::vector<std::vector<Instruction>> generate_schedule(const ScheduleSpec& spec);

// Warm-up forwards of one rank (Megatron's num_warmup_microbatches, counting chunk forwards).
int warmup_forwards(const ScheduleSpec& spec, int rank);

// Where the activation (or gradient) leaving (rank, chunk) is consumed; only meaningful when
// there is one, i.e. not from the last (first) virtual stage.
struct ChunkRef {
  int rank = 0;
  int chunk = 0;
};
bool is_first_virtual_stage(const ScheduleSpec& spec, int rank, int chunk);
bool is_last_virtual_stage(const ScheduleSpec& spec, int rank, int chunk);
ChunkRef activation_destination(const ScheduleSpec& spec, int rank, int chunk);
ChunkRef gradient_destination(const ScheduleSpec& spec, int rank, int chunk);

// Index into PipelineTiming::hops of the hop a message from `rank` crosses: activations
// leave over hop rank (hop p-1 is the wrap hop to rank 0), gradients over hop rank-1
// (rank 0 sends back over the wrap hop).
int activation_hop(const ScheduleSpec& spec, int rank);
int gradient_hop(const ScheduleSpec& spec, int rank);

// A rank the replay could not move: the instruction it waits on.
struct StuckRank {
  int rank = 0;
  int index = 0;  // position in the rank's list
  Instruction instruction;
};

struct ReplayReport {
  std::vector<std::string> errors;  // one sentence per violation, empty when the lists are sound
  std::vector<StuckRank> stuck;     // non-empty exactly when the replay deadlocked

  bool ok() const { return errors.empty(); }
  bool deadlocked() const { return !stuck.empty(); }
};

// Runs all ranks' lists together. A send is buffered (never blocks); a receive blocks until
// the peer has posted the matching send, matched in FIFO order per (source, destination, kind).
// Reports deadlock, sends nobody receives, FIFO pairs that disagree on micro-batch or chunk,
// sends to or receives from the wrong rank, compute before its input arrived (a Forward before
// its RecvActivation, a Backward before its own Forward or its RecvGradient), a send before
// the compute that produces it, and any (micro-batch, chunk) without exactly one Forward and
// one Backward on a rank, and lists that do not end with AllReduce, OptimizerStep.
ReplayReport replay_schedule(const ScheduleSpec& spec,
                             const std::vector<std::vector<Instruction>>& lists);

// Forwards whose backward has not run yet, maximum over the list (the activation stash, in
// chunk forwards): 1F1B stage r holds min(p - r, m), GPipe m.
int max_in_flight_activations(const std::vector<Instruction>& rank_list);

}  // namespace tessel::placement
