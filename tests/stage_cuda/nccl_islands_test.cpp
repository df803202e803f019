// The runtime's NCCL islands (noderuntime/stage/cuda/nccl_islands.h) on one GPU: a 1-stage x
// 2-replica job of CUDA chunks in one process (one thread per rank, each with its own CudaDevice
// on device 0), each rank an island of one NCCL rank (NCCL refuses two ranks of one
// communicator on one GPU), the TCP ring across through pinned memory, the NCCL id exchanged over
// the job's TCP communicator. Every bucket is summed on the device (the NCCL levels ordered after
// the chunk's stream once per bucket), the losses equal the flat ring's run of the same chunks
// (islands of one: the same ring over the same bits; 1e-4 allows for the order of the GPU's own
// atomics), and both replicas end with bit-identical weights. Only in stage_cuda_tests built with
// NCCL (not on the emulator); skipped without a GPU.
#ifdef TESSEL_HAVE_NCCL

#include "noderuntime/stage/cuda/nccl_islands.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "kernels/cuda/device.h"
#include "noderuntime/stage/cuda/gpt_chunk_cuda.h"
#include "tests/stage/stage_test_support.h"

namespace tessel::stage {
namespace {

GptConfig config() {  // head size 64, as the CUDA attention needs
  return GptConfig{/*layers=*/2, /*channels=*/128, /*heads=*/2,
                   /*ffn=*/512,  /*seq_len=*/16,
                   /*vocab=*/256};
}
constexpr int kSteps = 3;

// A CudaDevice per rank: the ranks' threads never share a stream or an op context.
ChunkFactory chunk_per_device() {
  return [](const GptConfig& c, const ChunkSpec& spec, int batch) {
    return cuda_chunk_factory(std::make_shared<CudaDevice>())(c, spec, batch);
  };
}

// The NCCL levels, counting the buckets ordered after a chunk's stream.
class Counted final : public IslandLevels {
 public:
  Counted(std::unique_ptr<IslandLevels> levels, std::atomic<int>& ready)
      : levels_(std::move(levels)), ready_(ready) {}
  bool on_device() const override { return levels_->on_device(); }
  transport::IslandCollective& inner() override { return levels_->inner(); }
  transport::CrossIslandAllReduce& cross() override { return levels_->cross(); }
  std::function<void()> ready_after(CUstream_st* stream) override {
    EXPECT_NE(stream, nullptr);
    ++ready_;
    return levels_->ready_after(stream);
  }
  void thread_started() override { levels_->thread_started(); }
  void abort() override { levels_->abort(); }

 private:
  std::unique_ptr<IslandLevels> levels_;
  std::atomic<int>& ready_;
};

TEST(NcclIslands, IslandsOfOneGpuSumOnTheDeviceLikeTheFlatRing) {
  if (const auto reason = kernels::cuda::gpu_unavailable_reason()) {
    GTEST_SKIP() << "no GPU: " << *reason;
  }
  const GptConfig c = config();
  const PipelineLayout layout = PipelineLayout::standard(1, 2, 1, c.layers);
  const TrainingOptions options = testing::tiny_options(placement::ScheduleKind::OneFOneB, 4);

  testing::RunHooks flat_hooks;
  flat_hooks.make_chunk = chunk_per_device();
  const testing::RunResult flat = testing::run_pipeline(c, layout, options, kSteps, flat_hooks);

  std::atomic<int> ready{0};
  testing::RunHooks hooks;
  hooks.make_chunk = chunk_per_device();
  const IslandLevelsFactory nccl = nccl_island_levels(std::chrono::seconds(60));
  hooks.islands.island_of_rank = {"gpu-a", "gpu-b"};
  hooks.islands.islands_of_one = true;
  hooks.islands.make_levels = [&](transport::Communicator& comm, const std::vector<int>& island,
                                  const transport::NcclIdExchange& exchange) {
    std::unique_ptr<IslandLevels> levels = nccl(comm, island, exchange);
    EXPECT_TRUE(levels->on_device());
    return std::make_unique<Counted>(std::move(levels), ready);
  };
  const testing::RunResult run = testing::run_pipeline(c, layout, options, kSteps, hooks);

  const int buckets =
      static_cast<int>(ParameterLayout(c, chunk_spec(c, layout.layer_split, 0)).buckets().size());
  EXPECT_EQ(ready.load(), 2 * kSteps * buckets);  // every bucket of both ranks, every step
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(run.losses[rank].size(), size_t{kSteps});
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_EQ(run.losses[rank][s], run.losses[0][s]) << rank << " " << s;
      EXPECT_NEAR(run.losses[rank][s], flat.losses[0][s], 1e-4 * flat.losses[0][s]) << s;
    }
  }
  EXPECT_LT(run.losses[0][kSteps - 1], run.losses[0][0]);
  EXPECT_EQ(run.weights[1], run.weights[0]);
}

}  // namespace
}  // namespace tessel::stage

#endif  // TESSEL_HAVE_NCCL
