#include "noderuntime/stage/gradient_sync.h"

namespace tessel::stage {

GradientSync::InFlight GradientSync::start_all_reduce(ChunkModel& chunk, int bucket, bool last,
                                                      float* data, size_t size,
                                                      const std::vector<int>& group,
                                                      const std::string& name) {
  InFlight op;
  op.name = name;
  op.chunk = &chunk;
  op.bucket = bucket;
  op.last = last;
  if (trace_) op.trace_id = trace_->open(placement::Stream::OptimizerComm, name);
  op.request = comm_.iall_reduce(data, size, transport::DType::kF32, group);
  if (op.request.test()) finish(op);  // a group of one has nothing to send
  return op;
}

void GradientSync::start(int chunk_index, ChunkModel& chunk, int bucket) {
  if (!started_.insert({chunk_index, bucket}).second) return;
  const GradientBucket& b = chunk.layout().buckets().at(bucket);
  const bool tie = b.group == BucketGroup::kEmbedding && tie_group_.size() > 1;
  const bool data_parallel = data_parallel_group_.size() > 1;
  if (!tie && !data_parallel) return;
  chunk.start_gradients_to_host(bucket);
  waiting_.push_back({chunk_index, &chunk, bucket});
  launch_waiting(false);
}

void GradientSync::launch_waiting(bool wait) {
  while (!waiting_.empty()) {
    const Waiting w = waiting_.front();
    if (!w.chunk->gradients_on_host(w.bucket)) {
      if (!wait) return;
      w.chunk->wait_gradients_on_host(w.bucket);
    }
    waiting_.pop_front();
    launch(w.chunk_index, *w.chunk, w.bucket);
  }
}

void GradientSync::flush() { launch_waiting(true); }

void GradientSync::launch(int chunk_index, ChunkModel& chunk, int bucket) {
  const GradientBucket& b = chunk.layout().buckets().at(bucket);
  const bool tie = b.group == BucketGroup::kEmbedding && tie_group_.size() > 1;
  const bool data_parallel = data_parallel_group_.size() > 1;
  const std::span<float> gradients = chunk.host_gradients(bucket);
  float* data = gradients.data();
  const size_t size = gradients.size();
  const std::string name = "all-reduce c" + std::to_string(chunk_index) + " " + b.name;
  if (tie) {
    InFlight op = start_all_reduce(chunk, bucket, !data_parallel, data, size, tie_group_,
                                   "tie c" + std::to_string(chunk_index) + " " + b.name);
    if (data_parallel) {  // the table's data-parallel all-reduce follows, in wait_all
      op.table = data;
      op.table_size = size;
      op.name = name;
    }
    in_flight_.push_back(std::move(op));
    return;
  }
  in_flight_.push_back(
      start_all_reduce(chunk, bucket, true, data, size, data_parallel_group_, name));
}

void GradientSync::start_all(int chunk_index, ChunkModel& chunk) {
  const int buckets = static_cast<int>(chunk.layout().buckets().size());
  for (int b = 0; b < buckets; ++b) start(chunk_index, chunk, b);
}

void GradientSync::finish(InFlight& op) {
  op.done = true;
  if (trace_) trace_->close(op.trace_id);
  if (op.last) op.chunk->gradients_reduced(op.bucket);
}

void GradientSync::poll() {
  launch_waiting(false);
  for (InFlight& op : in_flight_) {
    if (!op.done && op.request.test()) finish(op);
  }
}

void GradientSync::wait_all() {
  flush();
  // The ties first, then the tables' data-parallel all-reduces after every other bucket, in
  // the same order on every member of the group.
  std::vector<InFlight> tables;
  for (InFlight& op : in_flight_) {
    if (!op.done) {
      op.request.wait();
      finish(op);
    }
    if (op.table) {
      tables.push_back(start_all_reduce(*op.chunk, op.bucket, true, op.table, op.table_size,
                                        data_parallel_group_, op.name));
    }
  }
  for (InFlight& op : tables) {
    if (op.done) continue;
    op.request.wait();
    finish(op);
  }
  in_flight_.clear();
  started_.clear();
}

}  // namespace tessel::stage
