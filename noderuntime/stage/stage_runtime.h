// One tasklet (stage s of replica r) training over a Communicator: its model chunks, their
// optimizer state, and the executor that runs the rank's instruction list of the schedule
// (placement/schedule.h) for every step.
//
// A step:
//   1. gradients zeroed; the replica's m micro-batches read (token_data.h says which);
//   2. the instruction list, in order. Forward/Backward of (micro-batch, chunk) on the chunk's
//      activation stash; RecvActivation/RecvGradient post an irecv into the stash (with
//      overlap, the receives of the next compute are already posted before the current one
//      runs) and the compute that needs the data waits for it; SendActivation/SendGradient
//      isend from the stash, waited only when the slot is reused or at the step's end. The
//      last micro-batch's backward of each chunk starts each block's gradient all-reduce as soon
//      as the block is done (gradient_sync.h); AllReduce starts whatever is left;
//   3. OptimizerStep: waits for the buckets, then one all-reduce over every rank of
//      [sum of squared gradients (replica 0's stages), sum of losses (every replica's last
//      stage), stop votes], so every rank gets the same global norm, the same mean loss and
//      the same decision to stop; clips by the global norm, AdamW.
// Without overlap every send and receive is waited at once and the whole all-reduce runs at
// AllReduce, after the backward.
//
// The low-communication mode (options.low_communication, outer_sync.h): the gradients are summed
// only over the rank's island of its data-parallel group (nothing across islands; a rank without
// an island sums nothing), the loss is scaled by the island's tokens, and step 3's all-reduce runs
// over the ranks of the island's replicas (every stage of them), whose norm, loss and step it
// reports; the inner optimizer step is followed by OuterSync::after_inner_step, which exchanges
// the parameter deltas every sync_every steps and decides the stop (at its vote steps). The
// islands must split every stage's replicas the same way.
//
// A chunk on a device (chunk_model.h) copies what it sends to the host while the rank goes on:
// with overlap, a send is queued until its data is on the host and issued from the polls
// between instructions; a bucket's all-reduce likewise starts once its copy is done
// (gradient_sync.h). Before the rank blocks on anything, every queued send and bucket is
// issued (their copies need only work already queued on the device), so no peer waits on a
// send this rank has not issued.
//
// Message keys: (activation or gradient, step, micro-batch, the receiving virtual stage).
// The single-process reference is this same class with P = D = 1 on a one-rank communicator,
// reading the D m micro-batches of the whole global batch: the same maths, summed in another
// order.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "noderuntime/stage/activation_pool.h"
#include "noderuntime/stage/chunk_model.h"
#include "noderuntime/stage/gradient_sync.h"
#include "noderuntime/stage/outer_sync.h"
#include "noderuntime/stage/pipeline_layout.h"
#include "noderuntime/stage/step_trace.h"
#include "noderuntime/stage/token_data.h"
#include "noderuntime/stage/training_options.h"
#include "noderuntime/transport/communicator.h"
#include "placement/schedule.h"
#include "proto/progress/step_metrics.h"

namespace tessel::stage {

// What train_step returns: the rank's metrics of the step (their one definition, also what the
// progress events carry), and whether to stop.
struct StepReport : progress::StepMetrics {
  bool stop = false;  // some rank asked to stop: every rank stops after this step
};

// The model (with its optimizer state) of one chunk on this rank, and its activation stash.
struct ChunkState {
  explicit ChunkState(std::unique_ptr<ChunkModel> chunk)
      : owned(std::move(chunk)), model(*owned), stash(model) {}
  ChunkState(const ChunkState&) = delete;
  ChunkState& operator=(const ChunkState&) = delete;

  std::unique_ptr<ChunkModel> owned;
  ChunkModel& model;
  ActivationPool stash;
};

class StageRuntime {
 public:
  // comm.rank() says which tasklet this is (layout.tasklet_of). The parameters are
  // initialised from options.seed. trace, when given, receives every event of every step.
  // make_chunk builds the chunks on their device (the CPU by default). islands splits the
  // stage's data-parallel group for the hierarchical all-reduce (gradient_sync.h; by default
  // none: the flat ring).
  // Throws ConfigError for an invalid layout, options or schedule, or islands that cannot be
  // set up.
  StageRuntime(const GptConfig& config, const PipelineLayout& layout,
               const TrainingOptions& options, const TokenCorpus& corpus,
               transport::Communicator& comm, StepTrace* trace = nullptr,
               const ChunkFactory& make_chunk = cpu_chunk_factory(),
               const DataParallelIslands& islands = {});
  // After a failed step, closes the communicator: operations still in flight name buffers
  // owned here, and closing fails them before the buffers go.
  ~StageRuntime();
  StageRuntime(const StageRuntime&) = delete;
  StageRuntime& operator=(const StageRuntime&) = delete;

  // Runs one step; stop_requested is this rank's vote to stop after it. Throws the
  // transport's error (naming the peer) when a peer fails, or std::runtime_error when the
  // loss or gradient is not finite.
  StepReport train_step(bool stop_requested = false);
  // The same, asking stop_requested for the vote as late as it can: just before the step's
  // final all-reduce, so a stop signal that arrives during the step stops every rank after
  // this step rather than the next one.
  StepReport train_step(const std::function<bool()>& stop_requested);

  int rank() const { return comm_.rank(); }
  int stage() const { return stage_; }
  int replica() const { return replica_; }
  const PipelineLayout& layout() const { return layout_; }
  const GptConfig& config() const { return config_; }
  const TrainingOptions& options() const { return options_; }
  int64_t steps_done() const { return steps_done_; }
  // The global sequence number the next step starts reading at.
  int64_t data_position() const { return data_position_; }
  std::vector<std::unique_ptr<ChunkState>>& chunks() { return chunks_; }
  const std::vector<std::unique_ptr<ChunkState>>& chunks() const { return chunks_; }
  // Continues from a checkpoint: the parameters and moments are restored by the caller. In the
  // low-communication mode the outer cycle restarts from the restored parameters.
  void set_position(int64_t steps_done, int64_t data_position);
  // The low-communication mode's outer state; null in synchronous data parallelism.
  const OuterSync* outer_sync() const { return outer_.get(); }
  OuterSync* outer_sync() { return outer_.get(); }  // a checkpoint settles and restores it

 private:
  struct PendingRecv {
    transport::Request request;
    size_t trace_id = 0;
    bool arrived = false;  // waited for (without overlap, at the Recv instruction)
  };
  using RecvKey = std::tuple<bool, int, int>;  // (gradient?, micro-batch, chunk)

  void run_instruction(size_t index);
  void post_receive(const placement::Instruction& instruction);
  void post_receives_until(size_t end);
  // Waits for a posted receive; take_receive also forgets it (its compute is running).
  void wait_receive(bool gradient, int micro_batch, int chunk);
  void take_receive(bool gradient, int micro_batch, int chunk);
  void send(const placement::Instruction& instruction);
  // Sends, in order, the queued sends whose data has reached the host (all of them, waiting,
  // when `wait`).
  void issue_sends(bool wait);
  void issue_send(const placement::Instruction& instruction);
  // Before the rank blocks: every send and every bucket all-reduce waiting for a copy from the
  // device is started, so no peer waits for what this rank has computed.
  void flush_host_copies();
  void forward(const placement::Instruction& instruction);
  void backward(size_t index, const placement::Instruction& instruction);
  void optimizer_step();
  void wait(transport::Request& request);
  void poll_in_flight();
  int virtual_stage(int chunk) const { return chunk * layout_.stages + stage_; }
  int64_t global_tokens() const {  // tokens in the global batch: every replica's micro-batches
    return int64_t{layout_.replicas} * options_.micro_batches * options_.micro_batch *
           config_.seq_len;
  }
  // Tokens whose gradients are summed each step: the global batch, or in the low-communication
  // mode the batches of the rank's island's replicas.
  int64_t summed_tokens() const {
    return int64_t{summed_replicas_} * options_.micro_batches * options_.micro_batch *
           config_.seq_len;
  }
  std::vector<ChunkModel*> models();
  transport::TensorInfo message(bool gradient, int micro_batch, int to_virtual_stage) const;

  const GptConfig config_;
  const PipelineLayout layout_;
  const TrainingOptions options_;
  const TokenCorpus& corpus_;
  transport::Communicator& comm_;
  StepTrace* trace_;
  const int stage_;
  const int replica_;
  std::vector<std::unique_ptr<ChunkState>> chunks_;
  std::vector<placement::Instruction> schedule_;
  std::vector<size_t> next_compute_;   // per index: the first compute instruction after it
  std::vector<size_t> last_backward_;  // per chunk: index of its last Backward
  // The replicas whose gradients are summed (the data-parallel group, or the rank's island of it
  // in the low-communication mode), the ranks of step 3's all-reduce, and whether this rank's
  // gradients count in the norm (the first summed replica's).
  struct SumGroups {
    std::vector<int> gradients;
    std::vector<int> step;
    int replicas = 0;
    bool counts_in_norm = false;
  };
  static SumGroups sum_groups(const PipelineLayout& layout, const TrainingOptions& options,
                              const DataParallelIslands& islands, int stage, int replica);
  const SumGroups groups_;
  const int summed_replicas_;
  GradientSync sync_;
  std::unique_ptr<OuterSync> outer_;
  int64_t steps_done_ = 0;
  int64_t data_position_ = 0;

  // Per step.
  std::vector<int> inputs_, targets_;  // (m, B, T)
  std::map<RecvKey, PendingRecv> receives_;
  struct SentMessage {
    transport::Request request;
    size_t trace_id = 0;
    bool traced = false;  // its trace event has been closed
  };
  std::vector<SentMessage> sends_in_flight_;  // for the trace only
  // With overlap: sends whose data is still on its way from the device (ChunkModel::host_ready).
  std::deque<placement::Instruction> queued_sends_;
  size_t posted_until_ = 0;               // receives posted from the list up to here
  double loss_sum_ = 0;                   // of this rank's head chunk
  std::function<bool()> stop_requested_;  // this rank's vote, asked at the optimizer step
  StepReport report_;
  double compute_s_ = 0;
  double wait_s_ = 0;
  bool step_failed_ = false;
};

}  // namespace tessel::stage
