// What one iteration of a pipeline costs, stage by stage and hop by hop: the input shared by
// the closed-form iteration model (full cost model) and the discrete-event simulator.
#pragma once

#include <string>
#include <vector>

namespace tessel::placement {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved };

const char* to_string(ScheduleKind kind);  // "gpipe", "1f1b", "interleaved"
ScheduleKind parse_schedule_kind(
    const std::string&);  // throws std::invalid_argument naming the value

struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int stages = 1;         // p: pipeline ranks (devices of one replica)
  int micro_batches = 1;  // m: micro-batches per iteration and replica
  int chunks = 1;         // v: model chunks per rank (interleaved only; 1 otherwise)
  // Interleaved only: G, consecutive micro-batches run per chunk before switching chunks
  // (Megatron's microbatch_group_size_per_vp_stage); 0 means p, Megatron's default.
  int microbatch_group = 0;
};

// Per micro-batch costs of one stage (all of its chunks together; a chunk takes 1/v).
struct StageTiming {
  double forward_s = 0;
  double backward_s = 0;   // includes recomputation when activations are recomputed
  double allreduce_s = 0;  // the stage's data-parallel gradient all-reduce, whole iteration
  // First and last stage (p > 1): the tied token table's data-parallel all-reduce, which runs
  // after the table's copies were summed (embedding_allreduce_s) and after allreduce_s.
  double table_allreduce_s = 0;
  // Low-communication mode only: the stage's delta exchange of one outer sync (every
  // outer_sync.sync_every steps; allreduce_s is then its island's per-step all-reduce).
  double delta_exchange_s = 0;
};

// One message (activations forward or their gradients backward; both have the same size)
// crossing one hop: arrival = send start + transfer_s (link busy) + latency_s (in flight).
// Each direction of a hop is its own link (full duplex).
struct HopTiming {
  double latency_s = 0;
  double transfer_s = 0;
};

// The low-communication mode's outer sync (data_parallel_mode.h), every sync_every steps: each
// stage's delta exchange (StageTiming::delta_exchange_s) and the stop vote over every rank run
// during the next inner step when delayed (the job stalls by what exceeds that step), else they
// are waited at once; then the outer step is applied. outer_sync_cost.h amortises it over H.
struct OuterSyncTiming {
  int sync_every = 0;  // H; 0: synchronous data parallelism, nothing of this applies
  bool delayed = true;
  double vote_s = 0;        // the stop vote's all-reduce of one float over every rank
  double outer_step_s = 0;  // decoding the deltas and the outer step (memory-bound)
};

struct PipelineTiming {
  std::vector<StageTiming> stages;  // p entries, in pipeline order
  // hops[j] joins stage j and stage j+1: p-1 entries; the interleaved schedule also uses
  // hops[p-1], from the last stage back to the first (p entries).
  std::vector<HopTiming> hops;
  double optimizer_s = 0;  // optimizer step after the all-reduce
  // The tied token table (p > 1): each replica's first-stage copy and last-stage copy are
  // summed between the two devices (the slowest replica's pair), on a lane of its own, once
  // both gradients exist: the end of the first stage's last backward and the start of the
  // last stage's. Then both stages all-reduce the sum over their groups (table_allreduce_s).
  double embedding_allreduce_s = 0;
  // Before the optimizer step every rank sums the loss, the gradient norm and the stop vote
  // with every other rank in one round (each sends to all): the longest latency between any
  // two of the job's devices. No rank steps before every rank has reached it.
  double world_sync_s = 0;
  // true: sends, receives and the all-reduce run on their own streams while compute goes
  // on, and the all-reduce starts bucket by bucket during the last backward;
  // false: every communication blocks the compute of its stage.
  bool overlap = true;
  int allreduce_buckets = 4;
  OuterSyncTiming outer_sync;
};

// Whether the tied table is summed at all: more than one stage and some cost to it. (Timings
// built by hand leave it out with zeros.)
inline bool sums_tied_table(const PipelineTiming& timing) {
  const size_t p = timing.stages.size();
  return p > 1 && (timing.embedding_allreduce_s > 0 || timing.stages[0].table_allreduce_s > 0 ||
                   timing.stages[p - 1].table_allreduce_s > 0);
}

}  // namespace tessel::placement
