// `tessel local --device cuda`: the launcher runs a tiny bf16 job whose two stage processes
// both train on the CUDA backend (one GPU, or the SIMT emulator, shared by both), and its losses
// are the CPU backend's within bf16's tolerance. Built into both stage_cuda binaries: on the
// emulator the stage processes are a tessel-stage built on it (tessel-stage-simt); against the
// CUDA runtime they are tessel-stage, and the test skips without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cuda/device.h"

#ifndef TESSEL_BINARY
#error "define TESSEL_BINARY as the path of the tessel executable"
#endif
#ifndef TESSEL_STAGE_BINARY
#error "define TESSEL_STAGE_BINARY as the path of the tessel-stage executable"
#endif
#ifndef TESSEL_STAGE_CUDA_BINARY
#error "define TESSEL_STAGE_CUDA_BINARY as a tessel-stage built with the CUDA backend"
#endif

namespace {

namespace fs = std::filesystem;

// The executable a build made, or the one an environment variable names (a copy of the build on
// another machine).
std::string executable(const char* variable, const char* built) {
  const char* path = std::getenv(variable);
  return path != nullptr && *path != '\0' ? path : built;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Hidden 128 and 2 heads: head size 64, which the CUDA attention has; small enough for the
// emulator. 2 stages x 1 replica, 3 steps.
constexpr const char* kJob =
    "name: tiny-cuda\n"
    "topology: {generate: {sites: 2, seed: 1}, latency_scale: 0.01}\n"
    "model: {layers: 2, hidden: 128, heads: 2, ffn_hidden: 512, seq_len: 16, precision: bf16}\n"
    "training: {steps: 3, micro_batch: 2, global_batch: 4, learning_rate: 0.001}\n"
    "data: {synthetic: {seed: 7, bytes: 20000}}\n"
    "pipeline: {stages: 2, replicas: 1}\n"
    "placement: {evaluations: 200}\n"
    "timeouts: {connect_s: 60, io_s: 300}\n";

struct LocalRun {
  int status = -1;
  std::string out, err;
  fs::path dir;
  std::vector<double> losses;  // from the progress lines, one per step
};

// `tessel local job.yaml --device <device> --stage-binary <stage_binary>` in a fresh folder.
LocalRun run_local(const std::string& device, const std::string& stage_binary) {
  LocalRun run;
  run.dir = fs::temp_directory_path() /
            ("tessel-local-cuda-" + device + "-" + std::to_string(::getpid()));
  fs::remove_all(run.dir);
  fs::create_directories(run.dir);
  std::ofstream(run.dir / "job.yaml") << kJob;
  const std::string command =
      executable("TESSEL_BINARY", TESSEL_BINARY) + " local '" + (run.dir / "job.yaml").string() +
      "' --output '" + (run.dir / "out").string() + "' --device " + device + " --stage-binary '" +
      stage_binary + "' > '" + (run.dir / "stdout.txt").string() + "' 2> '" +
      (run.dir / "stderr.txt").string() + "'";
  const int status = std::system(command.c_str());
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_text(run.dir / "stdout.txt");
  run.err = read_text(run.dir / "stderr.txt");
  // "step 2/3  loss 5.1234  ..." (no std::regex: GCC 12 warns inside it)
  for (size_t at = run.out.find("step "); at != std::string::npos;
       at = run.out.find("step ", at + 1)) {
    int step = 0, steps = 0;
    double loss = 0;
    if (std::sscanf(run.out.c_str() + at, "step %d/%d  loss %lf ", &step, &steps, &loss) == 3 &&
        steps == 3 && step == static_cast<int>(run.losses.size()) + 1) {
      run.losses.push_back(loss);
    }
  }
  return run;
}

TEST(LocalCuda, TwoStageProcessesShareTheGpuAndTrainAsTheCpuBackendDoes) {
  if (const auto reason = tessel::kernels::cuda::gpu_unavailable_reason()) {
    GTEST_SKIP() << "no GPU: " << *reason;
  }
  // Always there in the build (a dependency of this test); a copy of the build on another
  // machine (bench/gpu) may carry the stage_cuda tests without it.
  const std::string tessel = executable("TESSEL_BINARY", TESSEL_BINARY);
  if (::access(tessel.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "no tessel executable at " << tessel << ": set TESSEL_BINARY";
  }
  const LocalRun cuda =
      run_local("cuda", executable("TESSEL_STAGE_CUDA_BINARY", TESSEL_STAGE_CUDA_BINARY));
  ASSERT_EQ(cuda.status, 0) << cuda.out << cuda.err;
  EXPECT_NE(cuda.out.find("tessel local: done: 3 of 3 steps in "), std::string::npos) << cuda.out;
  // Both ranks said they chose CUDA because they were told to; nothing about the CPU was said.
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log =
        read_text(cuda.dir / "out" / "logs" / ("rank-" + std::to_string(rank) + ".log"));
    EXPECT_NE(log.find("tessel-stage rank " + std::to_string(rank) +
                       ": device cuda: --device cuda (bf16 mixed precision)\n"),
              std::string::npos)
        << log;
  }
  EXPECT_EQ(cuda.err.find("CPU backend"), std::string::npos) << cuda.err;
  const std::string report = read_text(cuda.dir / "out" / "report.md");
  size_t on_cuda = 0;
  for (size_t at = report.find(" | cuda | exited with status 0 |"); at != std::string::npos;
       at = report.find(" | cuda | exited with status 0 |", at + 1)) {
    ++on_cuda;
  }
  EXPECT_EQ(on_cuda, 2u) << report;
  EXPECT_NE(read_text(cuda.dir / "out" / "job.json").find("\"precision\": \"bf16\""),
            std::string::npos);

  const LocalRun cpu = run_local("cpu", executable("TESSEL_STAGE_BINARY", TESSEL_STAGE_BINARY));
  ASSERT_EQ(cpu.status, 0) << cpu.out << cpu.err;
  ASSERT_EQ(cuda.losses.size(), 3u) << cuda.out;
  ASSERT_EQ(cpu.losses.size(), 3u) << cpu.out;
  for (size_t s = 0; s < 3; ++s) {
    // bf16 weights and activations against fp32: the 2 x 2 job of cuda_backend_test.cpp stays
    // 1e-4 apart over three steps; the progress line rounds to 1e-4 of a loss near 5. A missing
    // gradient or update moves step 2's loss by far more than this.
    EXPECT_NEAR(cuda.losses[s] / cpu.losses[s], 1.0, 5e-3) << "step " << s + 1;
  }
  EXPECT_LT(cuda.losses[2], cuda.losses[0]) << cuda.out;  // it trains
  fs::remove_all(cuda.dir);
  fs::remove_all(cpu.dir);
}

}  // namespace
