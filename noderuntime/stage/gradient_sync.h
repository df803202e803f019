// The step's gradient all-reduces, bucket by bucket: each bucket (a contiguous slice of a
// chunk's gradient buffer, parameter_layout.h) is summed in place over its group as soon as it
// is started, on the communicator's collective thread, while the caller goes on computing.
// Data-parallel buckets go over the stage's data-parallel group, the tied-embedding buckets
// (wte, lm_head) over the embedding group. The optimizer step waits for all of them.
//
// Every member of a group must start that group's buckets in the same order: the ranks of one
// stage run the same instruction list, and the embedding group's buckets are each rank's first
// (last stage) or last (first stage) of the step, so the order of all collectives is acyclic.
#pragma once

#include <set>
#include <utility>
#include <vector>

#include "noderuntime/stage/gpt_chunk.h"
#include "noderuntime/stage/step_trace.h"
#include "noderuntime/transport/communicator.h"

namespace tessel::stage {

class GradientSync {
 public:
  GradientSync(transport::Communicator& comm, std::vector<int> data_parallel_group,
               std::vector<int> embedding_group, StepTrace* trace)
      : comm_(comm),
        data_parallel_group_(std::move(data_parallel_group)),
        embedding_group_(std::move(embedding_group)),
        trace_(trace) {}

  // Starts the all-reduce of bucket `bucket` of `chunk` (the rank's chunk `chunk_index`),
  // unless it was started already this step.
  void start(int chunk_index, GptChunk& chunk, int bucket);
  // Starts every bucket of the chunk not yet started, in layout order.
  void start_all(int chunk_index, GptChunk& chunk);
  // Notes (for the trace) the all-reduces that have completed; throws the transport's error.
  void poll();
  // Waits for every all-reduce started this step and forgets them: the next step may start
  // the same buckets again. Throws the transport's error.
  void wait_all();

 private:
  struct InFlight {
    transport::Request request;
    size_t trace_id = 0;
    bool done = false;
  };
  void finish(InFlight& op);

  transport::Communicator& comm_;
  const std::vector<int> data_parallel_group_;
  const std::vector<int> embedding_group_;
  StepTrace* trace_;
  std::set<std::pair<int, int>> started_;  // (chunk index, bucket) this step
  std::vector<InFlight> in_flight_;
};

}  // namespace tessel::stage
