// The low-communication data-parallel mode's outer loop (DiLoCo; Streaming DiLoCo's one-step-
// delayed outer update), for the chunks of one rank. The replicas of a stage train on their own
// batches with no gradient all-reduce between them (the replicas of one island still sum their
// gradients every step, gradient_sync.h), and every H = sync_every inner steps:
//   delta   = theta_start - theta                       (per replica; + the residual of the last
//                                                        quantisation, delta_codec.h)
//   mean    = the replicas' encoded deltas, decoded and averaged (every replica sums them in the
//             same order: bit-identical results)
//   v       = mu v + mean;  step = nesterov ? mean + mu v : v
//   theta_start -= outer_lr step;  theta = theta_start  (delayed: + the local progress made since)
// With H = 1, fp32 deltas, mu = 0 and outer_lr = 1 this is the mean of the replicas' parameters
// after one inner step: synchronous data parallelism for plain SGD (equivalence_low_comm_test).
//
// The exchange is an all-gather of the encoded deltas over the stage's data-parallel group,
// island-aware: replicas of one island hold identical parameters, so each island's delta crosses
// to the other islands once per receiving rank (member p of island A sends to the members q of
// every other island with q mod |A| == p), weighted by the island's size. Messages: Tag::kControl,
// step = the sync step, micro_batch = the chunk index, chunk = kOuterSyncChunk, int32 words of the
// encoding. Per sync and rank: (islands - 1) x encoded_words(parameters, bits) x 4 bytes received.
//
// With `delayed`, a sync's exchange runs during the next inner step and is applied at its end
// (the parameters then carry that step's progress on top of the new theta_start); else it is
// waited at once. Stop votes: every H steps (t % H == 0, also with stagger) one all-reduce over
// every rank of [stop votes] (started like the exchange, waited one step later when delayed): a
// stop asked for mid-cycle takes effect at the next such step (one later when delayed). At the
// job's last step or a stop, every pending exchange is applied and one more sync is waited at
// once, so every replica ends bit-identical.
#pragma once

#include <cstdint>
#include <vector>

#include "noderuntime/stage/chunk_model.h"
#include "noderuntime/stage/step_trace.h"
#include "noderuntime/stage/training_options.h"
#include "noderuntime/transport/communicator.h"

namespace tessel::stage {

inline constexpr uint32_t kOuterSyncChunk = 0x4f555452u;  // "OUTR"

// The outer state of one chunk, in its ParameterLayout (what a checkpoint of the mode holds).
struct OuterChunkState {
  std::vector<float> start;     // theta_start: the parameters of the last applied sync
  std::vector<float> momentum;  // v
  std::vector<float> residual;  // error feedback (empty at 32 bits)
};

class OuterSync {
 public:
  // islands: this stage's data-parallel group split into islands (global ranks, in group
  // order; islands_of in gradient_sync.h), this rank in one of them. world: every rank.
  OuterSync(const LowCommunication& options, transport::Communicator& comm,
            std::vector<std::vector<int>> islands, std::vector<int> world, int stage, int stages,
            StepTrace* trace);
  ~OuterSync();
  OuterSync(const OuterSync&) = delete;
  OuterSync& operator=(const OuterSync&) = delete;

  // Takes the chunks' current parameters as theta_start (after initialisation or a restore).
  void begin(const std::vector<ChunkModel*>& chunks);

  struct Outcome {
    bool stop = false;    // every rank stops after this step
    double wait_s = 0;    // time blocked on the network
    bool synced = false;  // an exchange was applied at the end of this step
  };
  // After inner step `step` (counting from 1); stop_vote is this rank's vote (read only at the
  // steps that vote).
  Outcome after_inner_step(int64_t step, const std::vector<ChunkModel*>& chunks, bool stop_vote);

  // Whether this stage starts an exchange after `step` (also at the final step).
  bool sync_step(int64_t step) const;
  const std::vector<OuterChunkState>& state() const { return state_; }

 private:
  struct ChunkExchange {
    std::vector<uint32_t> sent;                   // this rank's encoding
    std::vector<std::vector<uint32_t>> received;  // per island (empty for its own)
    std::vector<float> snapshot;                  // delayed: theta when the exchange started
  };
  void start_exchange(int64_t step, const std::vector<ChunkModel*>& chunks);
  // Waits for the exchange and applies the outer step; returns seconds waited.
  double finish_exchange(const std::vector<ChunkModel*>& chunks);
  double wait_control();

  const LowCommunication options_;
  transport::Communicator& comm_;
  const std::vector<std::vector<int>> islands_;
  const std::vector<int> world_;
  const int offset_;  // the stage's stagger
  StepTrace* trace_;
  int island_ = 0;    // index of this rank's island
  int position_ = 0;  // this rank's index in it
  int replicas_ = 0;
  std::vector<OuterChunkState> state_;
  std::vector<ChunkExchange> exchange_;
  std::vector<transport::Request> requests_;  // of the exchange in flight
  bool exchange_pending_ = false;
  size_t trace_id_ = 0;
  float control_[1] = {0};
  transport::Request control_request_;
  bool control_pending_ = false;
};

}  // namespace tessel::stage
