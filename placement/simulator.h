// Discrete-event simulation of one training iteration: replays the instruction lists of
// generate_schedule() against per-stage compute times, per-hop links and the data-parallel
// all-reduce, and records a timed event for every instruction (for the Chrome trace).
#pragma once

#include <string>
#include <vector>

#include "placement/pipeline_timing.h"

namespace tessel::placement {

// The streams of one rank, in DT-FM's profiling order.
enum class Stream {
  ForwardRecv,
  ForwardCompute,
  ForwardSend,
  BackwardRecv,
  BackwardCompute,
  BackwardSend,
  OptimizerComm,  // the data-parallel gradient all-reduce
  OptimizerStep
};

const char* stream_name(Stream stream);  // DT-FM's names: "1. forward-recv" ... "8. optimizer-step"

struct TimedEvent {
  int rank = 0;
  Stream stream = Stream::ForwardCompute;
  std::string name;  // "F mb3 c1", "B mb3 c1", "send F mb3 c1", "recv B mb0 c0", "all-reduce 2/4"
  double start_s = 0;
  double duration_s = 0;
};

struct SimulationResult {
  // Synchronous: the latest end of an OptimizerStep (every rank starts at 0). Low-communication
  // mode: step_s + outer_sync_stall_s / H, the mean over a cycle of H steps.
  double iteration_s = 0;
  double step_s = 0;         // one inner step: the latest end of an OptimizerStep
  double outer_stall_s = 0;  // low-communication mode: what one outer sync adds (0 otherwise)
  std::vector<double> compute_busy_s;  // per rank: time spent in Forward and Backward
  std::vector<double> network_wait_s;  // per rank: compute idle because of communication
  double bubble_fraction = 0;          // 1 - mean(compute_busy_s) / iteration_s
  std::vector<TimedEvent> events;      // one per instruction (one per all-reduce bucket)
};

// Throws std::invalid_argument naming the problem when `timing` does not fit `spec`: stage
// count other than p, fewer hops than the schedule crosses (p-1; p for interleaved), negative
// times, or fewer than one all-reduce bucket.
void validate_pipeline_timing(const ScheduleSpec& spec, const PipelineTiming& timing);

// Model. Each rank runs Forward/Backward in list order on one compute resource; a chunk's
// forward takes stages[r].forward_s / v (backward likewise). Each direction of each hop is a
// FIFO link: a message holds it for transfer_s, then flies latency_s.
// overlap = true: sends queue on the link while compute goes on, and a compute op waits only
// for its input to have arrived; the all-reduce is split into allreduce_buckets equal buckets,
// bucket k released when (k+1)/buckets of the rank's last Backward has run, sent FIFO over one
// data-parallel link taking allreduce_s/buckets each.
// overlap = false: a send blocks the rank until the message has arrived, a receive blocks until
// it arrives, and the all-reduce runs whole after the last Backward, blocking.
// The tied table's sum between the first and last rank (embedding_allreduce_s, p > 1) runs on
// a lane of its own from the later of the first stage's table gradient (end of its last
// Backward; without overlap, after its all-reduce) and the last stage's (start of its last
// Backward; likewise); then each of the two ranks all-reduces the table (table_allreduce_s)
// on its data-parallel link after its other buckets.
// OptimizerStep (optimizer_s) follows the all-reduces once every rank has reached it and the
// world's sum (world_sync_s) is done.
// Low-communication mode (timing.outer_sync.sync_every > 0): the iteration simulated is one inner
// step; each rank's delta exchange of a sync step is recorded on its OptimizerComm stream from
// the end of its step ("outer sync", overlapping the next step when delayed), and the stall it
// causes is amortised over H (outer_sync_cost.h). Throws std::invalid_argument on bad input.
SimulationResult simulate_iteration(const ScheduleSpec& spec, const PipelineTiming& timing);

}  // namespace tessel::placement
