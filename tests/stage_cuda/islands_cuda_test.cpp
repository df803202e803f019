// The CUDA backend with data-parallel islands and the TCP ring at both levels (a tessel-stage
// built without NCCL: the emulator's): a 2-stage x 4-replica job of tessel-stage processes, two
// islands of two ranks per data-parallel group, its buckets through host memory into the
// hierarchical all-reduce. Every rank reports the same losses, within the CUDA backend's
// tolerance of the CPU backend's flat-ring run. Skipped where tessel-stage has NCCL (its ranks of
// an island would be two NCCL ranks on the one GPU, which NCCL refuses; nccl_islands_test.cpp
// covers NCCL).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/device.h"
#include "tests/stage/stage_process_support.h"

#ifndef TESSEL_STAGE_CUDA_BINARY
#error "define TESSEL_STAGE_CUDA_BINARY as a tessel-stage built with the CUDA backend"
#endif

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;

std::string binary(const char* variable, const char* built) {
  const char* path = std::getenv(variable);
  return path != nullptr && *path != '\0' ? path : built;
}

// The losses of every rank (each must exit 0 and report kSteps losses).
std::vector<std::vector<double>> run_job(const nlohmann::json& job, const std::string& executable,
                                         const std::string& device, const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("tessel-islands-cuda-" + name + "-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "job.json").string();
  std::ofstream(path) << job.dump();
  const int ranks = static_cast<int>(job["ranks"].size());
  std::vector<std::unique_ptr<testing::StageProcess>> processes;
  for (int r = 0; r < ranks; ++r) {
    processes.push_back(std::make_unique<testing::StageProcess>(
        path, r, executable, std::vector<std::string>{"--device", device}));
  }
  std::vector<std::vector<double>> losses;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(processes[r]->finish(std::chrono::seconds(600)), 0)
        << "rank " << r << ": " << processes[r]->stderr_text();
    losses.push_back(processes[r]->losses());
  }
  fs::remove_all(dir);
  return losses;
}

TEST(CudaIslands, TcpLevelsTrainAsTheCpuFlatRingDoes) {
#ifdef TESSEL_HAVE_NCCL
  GTEST_SKIP() << "this tessel-stage sums islands with NCCL (nccl_islands_test.cpp)";
#endif
  if (const auto reason = kernels::cuda::gpu_unavailable_reason()) {
    GTEST_SKIP() << "no GPU: " << *reason;
  }
  constexpr int kSteps = 3;
  nlohmann::json job = testing::tiny_job(2, 4, 2, 2, "1f1b", kSteps);
  auto& model = job["workload"]["model"];
  model["hidden"] = 128;
  model["heads"] = 2;
  model["ffn_hidden"] = 512;
  model["precision"] = "bf16";
  const std::vector<std::vector<double>> cpu =
      run_job(job, binary("TESSEL_STAGE_BINARY", TESSEL_STAGE_BINARY), "cpu", "flat");
  for (auto& rank : job["ranks"]) {
    rank["island"] = rank["replica"].get<int>() < 2 ? "node-a" : "node-b";
  }
  const std::vector<std::vector<double>> cuda =
      run_job(job, binary("TESSEL_STAGE_CUDA_BINARY", TESSEL_STAGE_CUDA_BINARY), "cuda", "islands");
  ASSERT_EQ(cpu[0].size(), size_t{kSteps});
  for (size_t r = 0; r < cuda.size(); ++r) {
    ASSERT_EQ(cuda[r], cuda[0]) << "rank " << r << " saw other losses";
  }
  ASSERT_EQ(cuda[0].size(), size_t{kSteps});
  for (int s = 0; s < kSteps; ++s) {
    std::printf("step %d: cuda with islands %.6f, cpu flat %.6f\n", s + 1, cuda[0][s], cpu[0][s]);
    // cuda_backend_test.cpp's bound for this model and these steps (bf16 against fp32).
    EXPECT_NEAR(cuda[0][s] / cpu[0][s], 1.0, 5e-3) << "step " << s + 1;
  }
  EXPECT_LT(cuda[0][kSteps - 1], cuda[0][0]);
}

}  // namespace
}  // namespace tessel::stage
