#include "noderuntime/stage/gradient_sync.h"

namespace tessel::stage {

void GradientSync::start(int chunk_index, GptChunk& chunk, int bucket) {
  if (!started_.insert({chunk_index, bucket}).second) return;
  const GradientBucket& b = chunk.layout().buckets().at(bucket);
  const auto& group = b.group == BucketGroup::kEmbedding ? embedding_group_ : data_parallel_group_;
  InFlight op;
  if (trace_) {
    op.trace_id = trace_->open(placement::Stream::OptimizerComm,
                               "all-reduce c" + std::to_string(chunk_index) + " " + b.name);
  }
  op.request = comm_.iall_reduce(chunk.grads().data() + b.offset, static_cast<size_t>(b.size),
                                 transport::DType::kF32, group);
  if (op.request.test()) finish(op);  // a group of one has nothing to send
  in_flight_.push_back(std::move(op));
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
  for (InFlight& op : in_flight_) {
    if (op.done) continue;
    op.request.wait();
    finish(op);
  }
  in_flight_.clear();
  started_.clear();
}

}  // namespace tessel::stage
