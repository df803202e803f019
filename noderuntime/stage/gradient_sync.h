// The step's gradient all-reduces, bucket by bucket: each bucket (a contiguous slice of a
// chunk's gradient buffer, parameter_layout.h) is summed in place over the stage's
// data-parallel group as soon as it is started, on the communicator's lane for that group,
// while the caller goes on computing. The optimizer step waits for all of them.
//
// The tied token table (wte on the first stage, lm_head on the last), as Megatron sums it:
// when its bucket starts, the replica's two copies are summed between the first and the last
// stage (the tie group, a lane of its own, so the wait for the other end holds up no other
// bucket); once that is done, in wait_all, the sum is all-reduced over the data-parallel
// group like any bucket. Every copy ends as the sum over all copies, bit for bit the same.
//
// The buckets are summed in host memory. A bucket whose gradients are on a device starts its
// copy to the host when it is started, and its all-reduce once the copy is done: poll() starts
// those that are ready, in the order they were started (so every member of a group still
// starts the group's all-reduces in the same order), and flush() waits for the copies and
// starts them all; the runtime flushes before it blocks on anything. A group of one rank has
// nothing to sum, so its buckets are left where they are and nothing is traced for them.
//
// Every member of a group must start that group's buckets in the same order: the ranks of one
// stage run the same instruction list, and the table's data-parallel all-reduce is each
// rank's last.
//
// Islands (DataParallelIslands below): the data-parallel group may be split into islands, the
// ranks whose GPUs NCCL reaches (one node, or one cluster). When some island has more than one
// member, every data-parallel all-reduce is the hierarchical one (hierarchical_all_reduce.h:
// reduce-scatter inside each island, ring across the islands, all-gather inside), run in start
// order by a thread of this object, so a bucket still starts as soon as it is final and the
// backward goes on. Its two levels (IslandLevels) are the TCP stand-ins over host memory by
// default (the buckets reach the host as above), or NCCL inside the island over the chunk's
// device gradients (ChunkModel::device_gradients: no copy to the host; the inner level starts on
// the GPU after the work queued so far on the chunk's stream) with the TCP ring across
// (noderuntime/stage/cuda/nccl_islands.h). Every member ends with bit-identical sums. Without
// such an island (no labels, or islands of one) the flat ring sums the buckets, as it always did.
// The tie group and the optimizer's world all-reduce are not affected.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "noderuntime/stage/chunk_model.h"
#include "noderuntime/stage/step_trace.h"
#include "noderuntime/transport/communicator.h"
#include "noderuntime/transport/hierarchical_all_reduce.h"
#include "noderuntime/transport/nccl_group.h"

namespace tessel::stage {

// The two levels of the hierarchical all-reduce for this rank's island.
class IslandLevels {
 public:
  virtual ~IslandLevels() = default;
  // True: the buckets are summed in the chunk's device memory (ChunkModel::device_gradients);
  // false: in host memory (ChunkModel::host_gradients).
  virtual bool on_device() const = 0;
  virtual transport::IslandCollective& inner() = 0;
  virtual transport::CrossIslandAllReduce& cross() = 0;
  // On device, on the runtime's thread when a bucket is final: `stream` is the chunk's
  // (DeviceGradients::stream). Returns what the all-reduce thread runs just before that
  // bucket's all-reduce, so that the inner level starts after the work queued on `stream` by
  // now. Must be safe to destroy without being run.
  virtual std::function<void()> ready_after(CUstream_st* /*stream*/) { return {}; }
  // Runs first on the all-reduce thread (a device backend selects its device there).
  virtual void thread_started() {}
  // Called when the sync is destroyed while an all-reduce is still running (after a failure,
  // the runtime's communicator is closed already): fails it at once instead of at its timeout.
  virtual void abort() {}
};

// Makes this rank's levels; `island` lists the island's global ranks in order (this rank among
// them, more than one). Called in the GradientSync's constructor, on every rank of the island
// at about the same time. `id_exchange` is how the island's members agree on set-up data such
// as NCCL's unique id (nccl_group.h): through the job's rendezvous when it has one.
using IslandLevelsFactory = std::function<std::unique_ptr<IslandLevels>(
    transport::Communicator& comm, const std::vector<int>& island,
    const transport::NcclIdExchange& id_exchange)>;

// The exchange for one island: the rendezvous's (rendezvous_id_exchange) or, where the job has
// none, the job's communicator's (communicator_id_exchange).
using IdExchangeFor = std::function<transport::NcclIdExchange(transport::Communicator& comm,
                                                              const std::vector<int>& island)>;

// The TCP stand-ins for both levels over host memory: CommunicatorIslandCollective inside,
// CommunicatorCrossAllReduce (the ring) across.
IslandLevelsFactory tcp_island_levels();

struct DataParallelIslands {
  // Per global rank (index = rank), the label of its island; an empty label, or a rank past
  // the end, is an island of its own. Empty: every rank is alone (the flat ring).
  std::vector<std::string> island_of_rank;
  // Null: tcp_island_levels().
  IslandLevelsFactory make_levels;
  // Tests: the hierarchical all-reduce even when every island has one rank (NCCL on one GPU).
  bool islands_of_one = false;
  // Null: communicator_id_exchange over the runtime's communicator.
  IdExchangeFor id_exchange = nullptr;
};

// The islands of `group`: its members with the same non-empty label form one island (members
// in group order, islands in the order of their first member); a member without one is alone.
std::vector<std::vector<int>> islands_of(const std::vector<int>& group,
                                         const std::vector<std::string>& island_of_rank);

class GradientSync {
 public:
  // Throws ConfigError when the islands cannot be set up (the levels' error).
  GradientSync(transport::Communicator& comm, std::vector<int> data_parallel_group,
               std::vector<int> tie_group, StepTrace* trace,
               const DataParallelIslands& islands = {});
  // Waits for the hierarchical all-reduce's thread (aborting a running all-reduce).
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Whether the data-parallel all-reduce is the hierarchical one (some island has more than one
  // member), and whether it sums on the device.
  bool hierarchical() const { return hierarchical_ != nullptr; }
  bool on_device() const;

  // Starts the all-reduce of bucket `bucket` of `chunk` (the rank's chunk `chunk_index`),
  // unless it was started already this step.
  void start(int chunk_index, ChunkModel& chunk, int bucket);
  // Starts every bucket of the chunk not yet started, in layout order.
  void start_all(int chunk_index, ChunkModel& chunk);
  // Starts the all-reduces whose buckets have reached the host, and notes (for the trace) the
  // all-reduces that have completed; throws the transport's error.
  void poll();
  // Starts every all-reduce still waiting for its bucket to reach the host (waiting for the
  // copies, which depend on no other rank).
  void flush();
  // Waits for every all-reduce started this step and forgets them: the next step may start
  // the same buckets again. Throws the transport's error.
  void wait_all();

 private:
  class Hierarchical;  // the all-reduce thread and the levels

  struct InFlight {
    transport::Request request;
    size_t trace_id = 0;
    bool done = false;
    bool on_device = false;  // summed in the device's memory: nothing to take back
    // The bucket this sums: once the last all-reduce of it is done, the chunk is told.
    ChunkModel* chunk = nullptr;
    int bucket = 0;
    bool last = true;  // false for a tie of the table whose data-parallel all-reduce follows
    // A tie of the table: its data-parallel all-reduce follows (wait_all).
    float* table = nullptr;
    size_t table_size = 0;
    std::string name;
  };
  // Starts an all-reduce of data[0, size) over the group, traced under `name`.
  InFlight start_all_reduce(ChunkModel& chunk, int bucket, bool last, float* data, size_t size,
                            const std::vector<int>& group, const std::string& name);
  // Starts the data-parallel all-reduce of a bucket: the flat ring or the hierarchical one over
  // host memory at data[0, size), or the hierarchical one over the device's gradients.
  InFlight start_data_parallel(ChunkModel& chunk, int bucket, float* data, size_t size,
                               const std::string& name);
  // Whether the bucket goes to the host before its first all-reduce.
  bool via_host(const GradientBucket& b) const;
  void finish(InFlight& op);
  // Starts the all-reduce of a bucket that is in host memory.
  void launch(int chunk_index, ChunkModel& chunk, int bucket);
  // Launches the waiting buckets in order: those whose copy is done, or all when `wait`.
  void launch_waiting(bool wait);

  struct Waiting {  // started, its gradients on their way to the host
    int chunk_index;
    ChunkModel* chunk;
    int bucket;
  };

  transport::Communicator& comm_;
  const std::vector<int> data_parallel_group_;
  const std::vector<int> tie_group_;
  StepTrace* trace_;
  std::set<std::pair<int, int>> started_;  // (chunk index, bucket) this step
  std::vector<InFlight> in_flight_;
  std::deque<Waiting> waiting_;
  std::unique_ptr<Hierarchical> hierarchical_;
};

}  // namespace tessel::stage
