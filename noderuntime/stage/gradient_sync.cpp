#include "noderuntime/stage/gradient_sync.h"

namespace tessel::stage {

GradientSync::InFlight GradientSync::start_all_reduce(float* data, size_t size,
                                                      const std::vector<int>& group,
                                                      const std::string& name) {
  InFlight op;
  op.name = name;
  if (trace_) op.trace_id = trace_->open(placement::Stream::OptimizerComm, name);
  op.request = comm_.iall_reduce(data, size, transport::DType::kF32, group);
  if (op.request.test()) finish(op);  // a group of one has nothing to send
  return op;
}

void GradientSync::start(int chunk_index, GptChunk& chunk, int bucket) {
  if (!started_.insert({chunk_index, bucket}).second) return;
  const GradientBucket& b = chunk.layout().buckets().at(bucket);
  float* data = chunk.grads().data() + b.offset;
  const auto size = static_cast<size_t>(b.size);
  const std::string name = "all-reduce c" + std::to_string(chunk_index) + " " + b.name;
  if (b.group == BucketGroup::kEmbedding) {
    InFlight tie = start_all_reduce(data, size, tie_group_,
                                    "tie c" + std::to_string(chunk_index) + " " + b.name);
    tie.table = data;
    tie.table_size = size;
    tie.name = name;
    in_flight_.push_back(std::move(tie));
    return;
  }
  in_flight_.push_back(start_all_reduce(data, size, data_parallel_group_, name));
}

void GradientSync::start_all(int chunk_index, GptChunk& chunk) {
  const int buckets = static_cast<int>(chunk.layout().buckets().size());
  for (int b = 0; b < buckets; ++b) start(chunk_index, chunk, b);
}

void GradientSync::finish(InFlight& op) {
  op.done = true;
  if (trace_) trace_->close(op.trace_id);
}

void GradientSync::poll() {
  for (InFlight& op : in_flight_) {
    if (!op.done && op.request.test()) finish(op);
  }
}

void GradientSync::wait_all() {
  // The ties first, then the tables' data-parallel all-reduces after every other bucket, in
  // the same order on every member of the group.
  std::vector<InFlight> tables;
  for (InFlight& op : in_flight_) {
    if (!op.done) {
      op.request.wait();
      finish(op);
    }
    if (op.table) {
      tables.push_back(start_all_reduce(op.table, op.table_size, data_parallel_group_, op.name));
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
