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
#pragma once

#include <deque>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "noderuntime/stage/chunk_model.h"
#include "noderuntime/stage/step_trace.h"
#include "noderuntime/transport/communicator.h"

namespace tessel::stage {

class GradientSync {
 public:
  GradientSync(transport::Communicator& comm, std::vector<int> data_parallel_group,
               std::vector<int> tie_group, StepTrace* trace)
      : comm_(comm),
        data_parallel_group_(std::move(data_parallel_group)),
        tie_group_(std::move(tie_group)),
        trace_(trace) {}

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
  struct InFlight {
    transport::Request request;
    size_t trace_id = 0;
    bool done = false;
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
};

}  // namespace tessel::stage
