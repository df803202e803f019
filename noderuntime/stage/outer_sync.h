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
//
// Checkpoints (checkpoint_outer_state.h) hold the outer state as it is after any step: a delayed
// exchange still in flight is waited for and decoded by settle() without being applied (waiting
// changes no value, only when the network time is spent), and its mean delta is saved with the
// rest; restore() makes it pending again, applied at the end of the next step exactly as in the
// uninterrupted run. So a checkpoint may be taken at any step, resume is bit-exact, and a rank
// resuming from a data-parallel peer's file gets the same mean (it is identical on every replica
// of the stage). A stop vote still in flight is not saved: a resumed job starts with no stop
// asked for (the signal was addressed to the processes that are gone).
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
  // The mean delta of an exchange started but not applied yet (delayed), once received and
  // decoded: identical on every replica of the stage. Empty when none is decoded.
  std::vector<float> pending;
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
  const LowCommunication& options() const { return options_; }

  // Makes state() whole for a checkpoint: waits for an exchange still in flight and decodes it
  // into `pending`, without applying it (the next step applies it as it would have).
  void settle();
  // Continues from a checkpoint, the chunks' parameters already restored: `state` per chunk, each
  // vector of the chunk's size (residual empty at 32 bits, else zeros when none was saved);
  // `pending` non-empty in every chunk or in none. A pending exchange is applied at the end of
  // the next step, the local progress since the restored parameters kept on top. Throws
  // std::logic_error for sizes that do not fit the chunks.
  void restore(const std::vector<ChunkModel*>& chunks, std::vector<OuterChunkState> state);

 private:
  struct ChunkExchange {
    std::vector<uint32_t> sent;                   // this rank's encoding
    std::vector<std::vector<uint32_t>> received;  // per island (empty for its own)
    std::vector<float> snapshot;                  // delayed: theta when the exchange started
  };
  void start_exchange(int64_t step, const std::vector<ChunkModel*>& chunks);
  // Waits for the exchange and decodes the mean delta into state_[c].pending; returns seconds
  // waited.
  double receive_exchange();
  // Receives the exchange (unless settle() or restore() did) and applies the outer step; returns
  // seconds waited.
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
  bool exchange_pending_ = false;             // started (or restored), not applied
  bool exchange_decoded_ = false;             // its mean delta is in state_[c].pending
  size_t trace_id_ = 0;
  bool traced_ = false;  // trace_id_ is open
  float control_[1] = {0};
  transport::Request control_request_;
  bool control_pending_ = false;
};

}  // namespace tessel::stage
