// The runtime with chunks whose sends and gradient buckets reach the host late, as a GPU
// backend's copies do (chunk_model.h: host_ready, gradients_on_host): each copy is done only
// after a few polls. Real sockets, one thread per rank, every schedule with overlap, 2 stages x 2
// replicas. The runtime must queue those sends and buckets, issue them from its polls in order,
// and issue every one of them before it blocks: a rank that blocked with one unsent would leave
// its peer waiting for it, and the job would stall until the I/O timeout fails it. The losses and
// weights must equal those of the same job on plain CPU chunks bit for bit (the same maths).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "noderuntime/stage/gpt_chunk.h"
#include "stage_test_support.h"

namespace tessel::stage {
namespace {

using placement::ScheduleKind;

// A CPU chunk whose host copies take `polls` calls of host_ready / gradients_on_host to land.
class LateCopyChunk final : public ChunkModel {
 public:
  LateCopyChunk(const GptConfig& config, const ChunkSpec& spec, int batch, int polls)
      : ChunkModel(config, spec, batch), inner_(config, spec, batch), polls_(polls) {}

  Device device() const override { return Device::kCpu; }
  void initialize(uint64_t seed) override { inner_.initialize(seed); }
  ChunkActivations new_activations() const override { return inner_.new_activations(); }
  double forward(ChunkActivations& act, const int* tokens, const int* targets,
                 float dloss) override {
    const double loss = inner_.forward(act, tokens, targets, dloss);
    if (!spec().head) pending_[&act] = polls_;
    return loss;
  }
  const float* output(const ChunkActivations& act) const override {
    if (pending_.count(&act)) throw std::logic_error("output() read before host_ready()");
    return inner_.output(act);
  }
  void backward(ChunkActivations& act, const int* tokens,
                const std::function<void(int)>& on_block_done) override {
    inner_.backward(act, tokens, on_block_done);
    if (!spec().embedding) pending_[&act] = polls_;
  }
  bool host_ready(ChunkActivations& act) override {
    return tick(pending_, static_cast<const ChunkActivations*>(&act));
  }
  void wait_host(ChunkActivations& act) override { pending_.erase(&act); }
  std::span<std::byte> receive_buffer(ChunkActivations& act, bool gradient) override {
    return inner_.receive_buffer(act, gradient);
  }
  std::span<const std::byte> send_payload(ChunkActivations& act, bool gradient) override {
    if (pending_.count(&act)) throw std::logic_error("send_payload() before host_ready()");
    return inner_.send_payload(act, gradient);
  }
  void zero_gradients() override { inner_.zero_gradients(); }
  void start_gradients_to_host(int bucket) override { buckets_[bucket] = polls_; }
  bool gradients_on_host(int bucket) override { return tick(buckets_, bucket); }
  void wait_gradients_on_host(int bucket) override { buckets_.erase(bucket); }
  std::span<float> host_gradients(int bucket) override {
    if (buckets_.count(bucket)) throw std::logic_error("bucket read before it reached the host");
    return inner_.host_gradients(bucket);
  }
  void gradients_reduced(int bucket) override { inner_.gradients_reduced(bucket); }
  double gradient_sum_of_squares() override { return inner_.gradient_sum_of_squares(); }
  void adamw_step(const kernels::cpu::AdamWHyperparameters& hp, int step,
                  float grad_scale) override {
    inner_.adamw_step(hp, step, grad_scale);
  }
  ConstHostState state_for_reading() const override { return inner_.state_for_reading(); }
  HostState state_for_writing() override { return inner_.state_for_writing(); }
  void state_written() override { inner_.state_written(); }

 private:
  // One poll of a pending copy: true (and forgotten) once it has been polled enough.
  template <class Key>
  static bool tick(std::map<Key, int>& pending, const Key& key) {
    const auto it = pending.find(key);
    if (it == pending.end()) return true;
    if (--it->second > 0) return false;
    pending.erase(it);
    return true;
  }

  GptChunk inner_;
  const int polls_;
  std::map<const ChunkActivations*, int> pending_;
  std::map<int, int> buckets_;
};

// Copies that land after a few polls (issued from the polls between instructions), and copies
// that land only when waited for (issued only by the flush before each blocking wait).
class DeferredCopies : public ::testing::TestWithParam<std::tuple<ScheduleKind, int>> {};

TEST_P(DeferredCopies, LateCopiesChangeNothingAndStallNothing) {
  const auto [kind, polls] = GetParam();
  const GptConfig config = testing::tiny_config(4);
  const PipelineLayout layout =
      PipelineLayout::standard(2, 2, kind == ScheduleKind::Interleaved ? 2 : 1, config.layers);
  TrainingOptions options = testing::tiny_options(kind, 4);
  options.overlap = true;
  const testing::RunResult plain = testing::run_pipeline(config, layout, options, 2);
  testing::RunHooks late;
  late.make_chunk = [polls](const GptConfig& c, const ChunkSpec& spec, int batch) {
    return std::make_unique<LateCopyChunk>(c, spec, batch, polls);
  };
  const testing::RunResult deferred = testing::run_pipeline(config, layout, options, 2, late);
  EXPECT_EQ(deferred.losses, plain.losses);
  ASSERT_EQ(deferred.weights.size(), plain.weights.size());
  for (size_t r = 0; r < plain.weights.size(); ++r) {
    EXPECT_EQ(deferred.weights[r], plain.weights[r]) << "replica " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, DeferredCopies,
    ::testing::Combine(::testing::Values(ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                                         ScheduleKind::Interleaved),
                       ::testing::Values(3, 1 << 30)),
    [](const auto& info) {
      const ScheduleKind kind = std::get<0>(info.param);
      const std::string name = kind == ScheduleKind::GPipe      ? "GPipe"
                               : kind == ScheduleKind::OneFOneB ? "OneFOneB"
                                                                : "Interleaved";
      return name + (std::get<1>(info.param) == 3 ? "_AfterThreePolls" : "_OnlyWhenWaited");
    });

}  // namespace
}  // namespace tessel::stage
