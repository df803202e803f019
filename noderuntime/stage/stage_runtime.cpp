#include "noderuntime/stage/stage_runtime.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string>

#include "kernels/cpu/vector_ops.h"
#include "noderuntime/stage/optimizer.h"

namespace tessel::stage {

using placement::Instruction;
using placement::Op;
using placement::Stream;

namespace {

bool is_compute(Op op) { return op == Op::Forward || op == Op::Backward; }

std::string micro_batch_name(const Instruction& in) {
  return "mb" + std::to_string(in.micro_batch) + " c" + std::to_string(in.chunk);
}

// Seconds since `start` (steady clock).
double since(double start) { return StepTrace::now_s() - start; }

const PipelineLayout& validated(const PipelineLayout& layout, const GptConfig& config,
                                const transport::Communicator& comm) {
  config.validate();
  layout.validate(config);
  if (comm.size() != layout.world_size()) {
    throw ConfigError("ranks: the communicator has " + std::to_string(comm.size()) +
                      " ranks, stages x replicas is " + std::to_string(layout.world_size()));
  }
  return layout;
}

// The replicas (by index) of each island of stage s's data-parallel group, in island order.
std::vector<std::vector<int>> replica_islands(const PipelineLayout& layout, int stage,
                                              const DataParallelIslands& islands) {
  std::vector<std::vector<int>> out;
  for (const std::vector<int>& island :
       islands_of(layout.data_parallel_group(stage), islands.island_of_rank)) {
    out.emplace_back();
    for (int rank : island) out.back().push_back(layout.tasklet_of(rank).replica);
  }
  return out;
}

}  // namespace

// Synchronous data parallelism: every replica's gradients, the world. Low-communication: the
// rank's island (the same replicas at every stage, checked), every stage of those replicas.
StageRuntime::SumGroups StageRuntime::sum_groups(const PipelineLayout& layout,
                                                 const TrainingOptions& options,
                                                 const DataParallelIslands& islands, int stage,
                                                 int replica) {
  StageRuntime::SumGroups groups;
  if (!options.low_communication.enabled) {
    groups.gradients = layout.data_parallel_group(stage);
    groups.step = layout.world();
    groups.replicas = layout.replicas;
    groups.counts_in_norm = replica == 0;
    return groups;
  }
  const std::vector<std::vector<int>> first = replica_islands(layout, 0, islands);
  for (int s = 1; s < layout.stages; ++s) {
    if (replica_islands(layout, s, islands) != first) {
      throw ConfigError(
          "ranks: island: the low-communication mode needs every stage's replicas "
          "split into the same islands; stage " +
          std::to_string(s) + "'s differ from stage 0's");
    }
  }
  for (const std::vector<int>& replicas : first) {
    if (std::find(replicas.begin(), replicas.end(), replica) == replicas.end()) continue;
    for (int r : replicas) groups.gradients.push_back(layout.rank(stage, r));
    for (int r : replicas) {
      for (int s = 0; s < layout.stages; ++s) groups.step.push_back(layout.rank(s, r));
    }
    groups.replicas = static_cast<int>(replicas.size());
    groups.counts_in_norm = replica == replicas.front();
  }
  return groups;
}

StageRuntime::StageRuntime(const GptConfig& config, const PipelineLayout& layout,
                           const TrainingOptions& options, const TokenCorpus& corpus,
                           transport::Communicator& comm, StepTrace* trace,
                           const ChunkFactory& make_chunk, const DataParallelIslands& islands)
    : config_(config),
      layout_(validated(layout, config, comm)),
      options_(options),
      corpus_(corpus),
      comm_(comm),
      trace_(trace),
      stage_(layout_.tasklet_of(comm.rank()).stage),
      replica_(layout_.tasklet_of(comm.rank()).replica),
      groups_(sum_groups(layout_, options, islands, stage_, replica_)),
      summed_replicas_(groups_.replicas),
      sync_(comm, groups_.gradients, layout_.tie_group(replica_), trace, islands) {
  options_.validate();
  const placement::ScheduleSpec spec{options_.schedule, layout_.stages, options_.micro_batches,
                                     layout_.chunks, options_.microbatch_group};
  try {
    schedule_ = placement::generate_schedule(spec).at(stage_);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("schedule: ") + e.what());
  }
  corpus_.sequences(config_.seq_len);  // throws when the corpus is too short

  for (int c = 0; c < layout_.chunks; ++c) {
    const ChunkSpec spec_c = chunk_spec(config_, layout_.layer_split, virtual_stage(c));
    chunks_.push_back(
        std::make_unique<ChunkState>(make_chunk(config_, spec_c, options_.micro_batch)));
    chunks_.back()->model.initialize(options_.seed);
  }
  next_compute_.assign(schedule_.size(), schedule_.size());
  size_t next = schedule_.size();
  for (size_t i = schedule_.size(); i-- > 0;) {
    next_compute_[i] = next;
    if (is_compute(schedule_[i].op)) next = i;
  }
  last_backward_.assign(layout_.chunks, schedule_.size());
  for (size_t i = 0; i < schedule_.size(); ++i) {
    if (schedule_[i].op == Op::Backward) last_backward_[schedule_[i].chunk] = i;
  }
  if (options_.low_communication.enabled) {
    outer_ = std::make_unique<OuterSync>(
        options_.low_communication, comm_,
        islands_of(layout_.data_parallel_group(stage_), islands.island_of_rank), layout_.world(),
        stage_, layout_.stages, trace_);
    outer_->begin(models());
  }
}

std::vector<ChunkModel*> StageRuntime::models() {
  std::vector<ChunkModel*> out;
  for (auto& chunk : chunks_) out.push_back(&chunk->model);
  return out;
}

StageRuntime::~StageRuntime() {
  if (step_failed_) comm_.close();
}

void StageRuntime::set_position(int64_t steps_done, int64_t data_position) {
  steps_done_ = steps_done;
  data_position_ = data_position;
  if (outer_) outer_->begin(models());
}

transport::TensorInfo StageRuntime::message(bool gradient, int micro_batch,
                                            int to_virtual_stage) const {
  return {gradient ? transport::Tag::kGradient : transport::Tag::kActivation,
          static_cast<uint64_t>(steps_done_),
          static_cast<uint32_t>(micro_batch),
          static_cast<uint32_t>(to_virtual_stage),
          chunks_.front()->model.wire_dtype(),
          {options_.micro_batch, config_.seq_len, config_.channels}};
}

void StageRuntime::wait(transport::Request& request) {
  flush_host_copies();
  const double start = StepTrace::now_s();
  request.wait();
  wait_s_ += since(start);
}

StepReport StageRuntime::train_step(bool stop_requested) {
  return train_step([stop_requested] { return stop_requested; });
}

StepReport StageRuntime::train_step(const std::function<bool()>& stop_requested) {
  step_failed_ = true;
  const double step_start = StepTrace::now_s();
  compute_s_ = 0;
  wait_s_ = 0;
  for (auto& chunk : chunks_) chunk->model.zero_gradients();
  const int B = options_.micro_batch, T = config_.seq_len, m = options_.micro_batches;
  inputs_.resize(int64_t{m} * B * T);
  targets_.resize(inputs_.size());
  const int64_t first = data_position_ + int64_t{replica_} * m * B;
  corpus_.read(first, m * B, T, inputs_.data(), targets_.data());
  receives_.clear();
  queued_sends_.clear();
  posted_until_ = 0;
  loss_sum_ = 0;
  stop_requested_ = stop_requested;
  report_ = StepReport{};
  for (size_t i = 0; i < schedule_.size(); ++i) {
    run_instruction(i);
    poll_in_flight();
  }
  flush_host_copies();
  for (auto& chunk : chunks_) {
    const double start = StepTrace::now_s();
    chunk->stash.wait_all();
    wait_s_ += since(start);
  }
  poll_in_flight();
  sends_in_flight_.clear();

  ++steps_done_;
  data_position_ += int64_t{layout_.replicas} * m * B;
  report_.step = steps_done_;
  report_.step_s = since(step_start);
  report_.compute_s = compute_s_;
  report_.network_wait_s = wait_s_;
  report_.bubble_fraction = report_.step_s > 0 ? 1.0 - compute_s_ / report_.step_s : 0.0;
  report_.tokens = global_tokens();
  report_.tokens_per_s = report_.step_s > 0 ? report_.tokens / report_.step_s : 0.0;
  step_failed_ = false;
  return report_;
}

void StageRuntime::run_instruction(size_t index) {
  const Instruction& in = schedule_[index];
  switch (in.op) {
    case Op::RecvActivation:
    case Op::RecvGradient:
      post_receive(in);
      if (!options_.overlap) wait_receive(in.op == Op::RecvGradient, in.micro_batch, in.chunk);
      break;
    case Op::Forward:
      if (options_.overlap) post_receives_until(next_compute_[index]);
      forward(in);
      break;
    case Op::Backward:
      if (options_.overlap) post_receives_until(next_compute_[index]);
      backward(index, in);
      break;
    case Op::SendActivation:
    case Op::SendGradient:
      send(in);
      break;
    case Op::AllReduce:  // with overlap the buckets have all started during the backward
      for (int c = 0; c < layout_.chunks; ++c) sync_.start_all(c, chunks_[c]->model);
      if (!options_.overlap) {
        flush_host_copies();
        const double start = StepTrace::now_s();
        sync_.wait_all();
        wait_s_ += since(start);
      }
      break;
    case Op::OptimizerStep:
      optimizer_step();
      break;
  }
}

void StageRuntime::post_receive(const Instruction& in) {
  const bool gradient = in.op == Op::RecvGradient;
  const RecvKey key{gradient, in.micro_batch, in.chunk};
  if (receives_.count(key)) return;
  ActivationSlot& slot = chunks_[in.chunk]->stash.acquire(in.micro_batch);
  const std::span<std::byte> buffer = chunks_[in.chunk]->model.receive_buffer(slot.act, gradient);
  PendingRecv pending;
  if (trace_) {
    pending.trace_id =
        trace_->open(gradient ? Stream::BackwardRecv : Stream::ForwardRecv,
                     std::string("recv ") + (gradient ? "B " : "F ") + micro_batch_name(in));
  }
  const int peer = layout_.rank(in.peer, replica_);
  pending.request =
      comm_.irecv(peer, message(gradient, in.micro_batch, virtual_stage(in.chunk)), buffer);
  receives_.emplace(key, std::move(pending));
}

void StageRuntime::post_receives_until(size_t end) {
  for (; posted_until_ < end; ++posted_until_) {
    const Instruction& in = schedule_[posted_until_];
    if (in.op == Op::RecvActivation || in.op == Op::RecvGradient) post_receive(in);
  }
}

void StageRuntime::wait_receive(bool gradient, int micro_batch, int chunk) {
  const auto it = receives_.find({gradient, micro_batch, chunk});
  if (it == receives_.end()) {
    throw std::logic_error("stage " + std::to_string(stage_) +
                           ": the schedule computes micro-batch " + std::to_string(micro_batch) +
                           " chunk " + std::to_string(chunk) + " before receiving its " +
                           (gradient ? "gradient" : "activation"));
  }
  if (it->second.arrived) return;
  wait(it->second.request);
  if (trace_) trace_->close(it->second.trace_id);
  it->second.arrived = true;
}

void StageRuntime::take_receive(bool gradient, int micro_batch, int chunk) {
  wait_receive(gradient, micro_batch, chunk);
  receives_.erase({gradient, micro_batch, chunk});
}

void StageRuntime::send(const Instruction& in) {
  if (!options_.overlap) {
    ChunkState& chunk = *chunks_[in.chunk];
    chunk.model.wait_host(chunk.stash.at(in.micro_batch).act);
    issue_send(in);
    return;
  }
  queued_sends_.push_back(in);
  issue_sends(false);
}

void StageRuntime::issue_sends(bool wait) {
  while (!queued_sends_.empty()) {
    const Instruction in = queued_sends_.front();
    ChunkState& chunk = *chunks_[in.chunk];
    ActivationSlot& slot = chunk.stash.at(in.micro_batch);
    if (!chunk.model.host_ready(slot.act)) {
      if (!wait) return;
      const double start = StepTrace::now_s();
      chunk.model.wait_host(slot.act);
      wait_s_ += since(start);
    }
    queued_sends_.pop_front();
    issue_send(in);
  }
}

void StageRuntime::flush_host_copies() {
  issue_sends(true);
  sync_.flush();
}

void StageRuntime::issue_send(const Instruction& in) {
  const bool gradient = in.op == Op::SendGradient;
  ChunkState& chunk = *chunks_[in.chunk];
  ActivationSlot& slot = chunk.stash.at(in.micro_batch);
  const int to = virtual_stage(in.chunk) + (gradient ? -1 : 1);
  const std::span<const std::byte> payload = chunk.model.send_payload(slot.act, gradient);
  SentMessage sent;
  if (trace_) {
    sent.trace_id =
        trace_->open(gradient ? Stream::BackwardSend : Stream::ForwardSend,
                     std::string("send ") + (gradient ? "B " : "F ") + micro_batch_name(in));
  }
  sent.request =
      comm_.isend(layout_.rank(in.peer, replica_), message(gradient, in.micro_batch, to), payload);
  if (!options_.overlap) wait(sent.request);
  slot.sends.push_back(sent.request);
  if (trace_) sends_in_flight_.push_back(std::move(sent));
  if (gradient) chunk.stash.release(in.micro_batch);
}

void StageRuntime::forward(const Instruction& in) {
  ChunkState& chunk = *chunks_[in.chunk];
  ActivationSlot& slot = chunk.stash.acquire(in.micro_batch);
  if (!chunk.model.spec().embedding) take_receive(false, in.micro_batch, in.chunk);
  const int64_t offset = int64_t{in.micro_batch} * options_.micro_batch * config_.seq_len;
  const double start = StepTrace::now_s();
  const size_t id = trace_ ? trace_->open(Stream::ForwardCompute, "F " + micro_batch_name(in)) : 0;
  loss_sum_ += chunk.model.forward(slot.act, inputs_.data() + offset, targets_.data() + offset,
                                   1.0f / static_cast<float>(summed_tokens()));
  if (trace_) trace_->close(id);
  compute_s_ += since(start);
}

void StageRuntime::backward(size_t index, const Instruction& in) {
  ChunkState& chunk = *chunks_[in.chunk];
  ActivationSlot& slot = chunk.stash.at(in.micro_batch);
  if (!chunk.model.spec().head) take_receive(true, in.micro_batch, in.chunk);
  const bool last = index == last_backward_[in.chunk];
  const ParameterLayout& layout = chunk.model.layout();
  // The head's gradients were finished by the forward (gpt_chunk.h): send them first.
  if (last && options_.overlap && chunk.model.spec().head) {
    sync_.start(in.chunk, chunk.model, layout.bucket_index("ln_f"));
    if (chunk.model.spec().head_copy()) {
      sync_.start(in.chunk, chunk.model, layout.bucket_index("lm_head"));
    }
  }
  const int64_t offset = int64_t{in.micro_batch} * options_.micro_batch * config_.seq_len;
  const double start = StepTrace::now_s();
  const size_t id = trace_ ? trace_->open(Stream::BackwardCompute, "B " + micro_batch_name(in)) : 0;
  std::function<void(int)> on_block_done;
  if (last && options_.overlap) {
    on_block_done = [&](int block) {
      sync_.start(in.chunk, chunk.model, layout.layer_bucket(block));
    };
  }
  chunk.model.backward(slot.act, inputs_.data() + offset, on_block_done);
  if (trace_) trace_->close(id);
  compute_s_ += since(start);
  if (last && options_.overlap && chunk.model.spec().embedding) {
    sync_.start(in.chunk, chunk.model, layout.bucket_index("wpe"));
    sync_.start(in.chunk, chunk.model, layout.bucket_index("wte"));
  }
  if (chunk.model.spec().embedding) chunk.stash.release(in.micro_batch);
}

void StageRuntime::optimizer_step() {
  flush_host_copies();
  {
    const double start = StepTrace::now_s();
    sync_.wait_all();
    wait_s_ += since(start);
  }
  const size_t id = trace_ ? trace_->open(Stream::OptimizerStep, "optimizer step") : 0;
  double start = StepTrace::now_s();
  double sum_of_squares = 0;
  for (auto& chunk : chunks_) sum_of_squares += chunk->model.gradient_sum_of_squares();
  compute_s_ += since(start);
  // One replica alone contributes the norm: the summed replicas hold the same reduced gradients.
  // The low-communication mode votes to stop in the outer sync.
  const bool vote = !outer_ && stop_requested_();
  float totals[3] = {groups_.counts_in_norm ? static_cast<float>(sum_of_squares) : 0.0f,
                     static_cast<float>(loss_sum_), vote ? 1.0f : 0.0f};
  {
    start = StepTrace::now_s();
    comm_.all_reduce(totals, 3, transport::DType::kF32, groups_.step);
    wait_s_ += since(start);
  }
  report_.loss = totals[1] / static_cast<double>(summed_tokens());
  report_.grad_norm = std::sqrt(static_cast<double>(totals[0]));
  report_.stop = totals[2] > 0;
  if (!std::isfinite(report_.loss) || !std::isfinite(report_.grad_norm)) {
    throw std::runtime_error("step " + std::to_string(steps_done_ + 1) +
                             ": training diverged (loss " + std::to_string(report_.loss) +
                             ", gradient norm " + std::to_string(report_.grad_norm) + ")");
  }
  const float scale = options_.grad_clip > 0
                          ? kernels::cpu::clip_scale(report_.grad_norm, options_.grad_clip)
                          : 1.0f;
  start = StepTrace::now_s();
  for (auto& chunk : chunks_) {
    if (options_.optimizer == InnerOptimizer::kSgd) {
      sgd_step(chunk->model, options_.adamw, scale);
    } else {
      chunk->model.adamw_step(options_.adamw, static_cast<int>(steps_done_ + 1), scale);
    }
  }
  compute_s_ += since(start);
  if (trace_) trace_->close(id);
  if (outer_) {
    const OuterSync::Outcome outcome =
        outer_->after_inner_step(steps_done_ + 1, models(), stop_requested_());
    wait_s_ += outcome.wait_s;
    report_.stop = outcome.stop;
  }
}

void StageRuntime::poll_in_flight() {
  issue_sends(false);
  sync_.poll();
  if (!trace_) return;
  for (SentMessage& sent : sends_in_flight_) {
    if (!sent.traced && sent.request.test()) {
      trace_->close(sent.trace_id);
      sent.traced = true;
    }
  }
}

}  // namespace tessel::stage
