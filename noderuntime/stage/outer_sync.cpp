#include "noderuntime/stage/outer_sync.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>

#include "noderuntime/stage/delta_codec.h"
#include "noderuntime/stage/gpt_config.h"

namespace tessel::stage {
namespace {

// The chunk's parameters in host memory (a copy on a device backend).
std::span<const float> parameters(const ChunkModel& chunk) {
  return {chunk.state_for_reading().params, static_cast<size_t>(chunk.layout().total())};
}

// Makes `values` the chunk's parameters; its moments stay as they are.
void set_parameters(ChunkModel& chunk, std::span<const float> values) {
  const ConstHostState now = chunk.state_for_reading();
  const HostState out = chunk.state_for_writing();
  const size_t n = values.size();
  if (out.m != now.m) std::memcpy(out.m, now.m, n * sizeof(float));
  if (out.v != now.v) std::memcpy(out.v, now.v, n * sizeof(float));
  std::memcpy(out.params, values.data(), n * sizeof(float));
  chunk.state_written();
}

transport::TensorInfo delta_message(int64_t step, size_t chunk, size_t words) {
  return {transport::Tag::kControl, static_cast<uint64_t>(step), static_cast<uint32_t>(chunk),
          kOuterSyncChunk,          transport::DType::kI32,      {static_cast<int64_t>(words)}};
}

}  // namespace

OuterSync::OuterSync(const LowCommunication& options, transport::Communicator& comm,
                     std::vector<std::vector<int>> islands, std::vector<int> world, int stage,
                     int stages, StepTrace* trace)
    : options_(options),
      comm_(comm),
      islands_(std::move(islands)),
      world_(std::move(world)),
      offset_(options.stagger ? static_cast<int>(int64_t{stage} * options.sync_every / stages) : 0),
      trace_(trace) {
  options_.validate();
  bool found = false;
  for (size_t i = 0; i < islands_.size(); ++i) {
    replicas_ += static_cast<int>(islands_[i].size());
    const auto it = std::find(islands_[i].begin(), islands_[i].end(), comm_.rank());
    if (it != islands_[i].end()) {
      island_ = static_cast<int>(i);
      position_ = static_cast<int>(it - islands_[i].begin());
      found = true;
    }
  }
  if (!found) {
    throw std::logic_error("outer sync: rank " + std::to_string(comm_.rank()) +
                           " is in none of its stage's islands");
  }
}

OuterSync::~OuterSync() {
  // The buffers of an exchange still in flight must outlive it (after a failure the runtime has
  // closed the communicator, which fails them at once).
  for (transport::Request& r : requests_) {
    try {
      r.wait();
    } catch (const std::exception&) {
    }
  }
  try {
    control_request_.wait();
  } catch (const std::exception&) {
  }
}

void OuterSync::begin(const std::vector<ChunkModel*>& chunks) {
  state_.assign(chunks.size(), {});
  exchange_.assign(chunks.size(), {});
  exchange_pending_ = false;
  exchange_decoded_ = false;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const std::span<const float> p = parameters(*chunks[c]);
    state_[c].start.assign(p.begin(), p.end());
    state_[c].momentum.assign(p.size(), 0.0f);
    if (options_.delta_bits != 32) state_[c].residual.assign(p.size(), 0.0f);
  }
}

void OuterSync::settle() {
  if (exchange_pending_ && !exchange_decoded_) receive_exchange();
}

void OuterSync::restore(const std::vector<ChunkModel*>& chunks,
                        std::vector<OuterChunkState> state) {
  if (state.size() != chunks.size()) {
    throw std::logic_error("outer sync: restoring " + std::to_string(state.size()) +
                           " chunks' outer state into " + std::to_string(chunks.size()) +
                           " chunks");
  }
  const bool pending = !state.empty() && !state[0].pending.empty();
  for (size_t c = 0; c < chunks.size(); ++c) {
    const OuterChunkState& s = state[c];
    const size_t n = static_cast<size_t>(chunks[c]->layout().total());
    const size_t residual = options_.delta_bits == 32 ? 0 : n;
    if (s.start.size() != n || s.momentum.size() != n || s.residual.size() != residual ||
        s.pending.size() != (pending ? n : 0)) {
      throw std::logic_error("outer sync: the outer state restored into chunk " +
                             std::to_string(c) + " does not fit its " + std::to_string(n) +
                             " parameters");
    }
  }
  begin(chunks);
  state_ = std::move(state);
  if (pending) {  // applied at the end of the next step, on top of the local progress since now
    for (size_t c = 0; c < chunks.size(); ++c) {
      const std::span<const float> p = parameters(*chunks[c]);
      exchange_[c].snapshot.assign(p.begin(), p.end());
    }
    exchange_pending_ = true;
    exchange_decoded_ = true;
  }
}

bool OuterSync::sync_step(int64_t step) const {
  return (step + offset_) % options_.sync_every == 0 || step == options_.final_step;
}

void OuterSync::start_exchange(int64_t step, const std::vector<ChunkModel*>& chunks) {
  if (trace_) {
    trace_id_ = trace_->open(placement::Stream::OptimizerComm, "outer sync");
    traced_ = true;
  }
  const std::vector<int>& mine = islands_[static_cast<size_t>(island_)];
  for (size_t c = 0; c < chunks.size(); ++c) {
    OuterChunkState& s = state_[c];
    ChunkExchange& x = exchange_[c];
    const std::span<const float> theta = parameters(*chunks[c]);
    const size_t n = theta.size();
    std::vector<float> delta(n);
    for (size_t i = 0; i < n; ++i) delta[i] = s.start[i] - theta[i];
    // Delayed: applied at the end of the next step, that step's local progress kept on top.
    if (options_.delayed) x.snapshot.assign(theta.begin(), theta.end());
    const size_t words = encoded_words(n, options_.delta_bits);
    x.sent.resize(words);
    encode_delta(delta, s.residual, options_.delta_bits, x.sent);
    x.received.assign(islands_.size(), {});
    const transport::TensorInfo info = delta_message(step, c, words);
    const auto payload = std::as_bytes(std::span<const uint32_t>(x.sent));
    for (size_t i = 0; i < islands_.size(); ++i) {
      if (static_cast<int>(i) == island_) continue;
      const std::vector<int>& other = islands_[i];
      // From the member of island i at my position mod its size; to the members of island i
      // whose position mod my island's size is mine.
      x.received[i].resize(words);
      const int from = other[static_cast<size_t>(position_) % other.size()];
      requests_.push_back(
          comm_.irecv(from, info, std::as_writable_bytes(std::span<uint32_t>(x.received[i]))));
      for (size_t q = 0; q < other.size(); ++q) {
        if (static_cast<int>(q % mine.size()) == position_) {
          requests_.push_back(comm_.isend(other[q], info, payload));
        }
      }
    }
  }
  exchange_pending_ = true;
}

double OuterSync::receive_exchange() {
  const double start = StepTrace::now_s();
  for (transport::Request& r : requests_) r.wait();
  requests_.clear();
  const double waited = StepTrace::now_s() - start;
  const auto replicas = static_cast<float>(replicas_);
  for (size_t c = 0; c < exchange_.size(); ++c) {
    OuterChunkState& s = state_[c];
    ChunkExchange& x = exchange_[c];
    const size_t n = s.start.size();
    std::vector<float> mean(n, 0.0f);
    for (size_t i = 0; i < islands_.size(); ++i) {
      const std::vector<uint32_t>& encoded =
          static_cast<int>(i) == island_ ? x.sent : x.received[i];
      add_decoded_delta(encoded, options_.delta_bits, static_cast<float>(islands_[i].size()), mean);
    }
    for (float& m : mean) m /= replicas;
    s.pending = std::move(mean);
    x.received.clear();
  }
  exchange_decoded_ = true;
  return waited;
}

double OuterSync::finish_exchange(const std::vector<ChunkModel*>& chunks) {
  const double waited = exchange_decoded_ ? 0.0 : receive_exchange();
  const float mu = options_.outer_momentum;
  const float lr = options_.outer_learning_rate;
  for (size_t c = 0; c < chunks.size(); ++c) {
    OuterChunkState& s = state_[c];
    ChunkExchange& x = exchange_[c];
    const size_t n = s.start.size();
    std::vector<float> theta(n);
    const std::span<const float> now = parameters(*chunks[c]);
    const bool keep_progress = !x.snapshot.empty();
    for (size_t i = 0; i < n; ++i) {
      const float g = s.pending[i];
      s.momentum[i] = mu * s.momentum[i] + g;
      const float step = options_.nesterov ? g + mu * s.momentum[i] : s.momentum[i];
      s.start[i] -= lr * step;
      // Delayed: the inner steps taken since the exchange started stay on top.
      theta[i] = keep_progress ? s.start[i] + (now[i] - x.snapshot[i]) : s.start[i];
    }
    set_parameters(*chunks[c], theta);
    s.pending.clear();
    x.snapshot.clear();
  }
  exchange_pending_ = false;
  exchange_decoded_ = false;
  if (traced_) trace_->close(trace_id_);
  traced_ = false;
  return waited;
}

double OuterSync::wait_control() {
  const double start = StepTrace::now_s();
  control_request_.wait();
  control_pending_ = false;
  return StepTrace::now_s() - start;
}

OuterSync::Outcome OuterSync::after_inner_step(int64_t step, const std::vector<ChunkModel*>& chunks,
                                               bool stop_vote) {
  Outcome out;
  if (exchange_pending_) {  // the delayed exchange of the previous step's sync
    out.wait_s += finish_exchange(chunks);
    out.synced = true;
  }
  bool stop = false;
  if (control_pending_) {  // the previous step's votes (delayed)
    out.wait_s += wait_control();
    stop = control_[0] > 0;
  }
  if (step % options_.sync_every == 0) {
    control_[0] = stop_vote ? 1.0f : 0.0f;
    control_request_ = comm_.iall_reduce(control_, 1, transport::DType::kF32, world_);
    control_pending_ = true;
    if (!options_.delayed) {
      out.wait_s += wait_control();
      stop = stop || control_[0] > 0;
    }
  }
  const bool last = stop || step == options_.final_step;
  if (last && control_pending_) {  // nothing may stay in flight past the last step
    out.wait_s += wait_control();
    stop = stop || control_[0] > 0;
  }
  if (sync_step(step) || last) {
    start_exchange(step, chunks);
    if (!options_.delayed || last) {
      out.wait_s += finish_exchange(chunks);
      out.synced = true;
    }
  }
  out.stop = stop;
  return out;
}

}  // namespace tessel::stage
