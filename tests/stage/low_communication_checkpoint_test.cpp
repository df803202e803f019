// Checkpoints of the low-communication mode (checkpoint_outer_state.h), over real sockets, one
// thread per rank, 2 stages x 2 replicas, H = 3, 8-bit deltas, delayed:
// - a run saved after every step and resumed (new communicators, new runtimes) from a step with
//   a delayed exchange in flight (3), just after one was applied (4), or mid-cycle (5) gives
//   losses and parameters bit-identical to a run never stopped at every later step, and the same
//   theta_start; saving itself changes nothing;
// - a mode job refuses a synchronous job's checkpoint naming the file and the missing outer
//   state, and a synchronous job refuses a mode checkpoint naming the mode;
// - damage of the outer-state part of a step is detected by its checksum and the previous step
//   used (still bit-identical afterwards); a rank whose own file is damaged takes its peer's
//   (theta_start and momentum of the stage, a zero residual).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <sstream>

#include "checkpoint_damage.h"
#include "noderuntime/stage/checkpoint.h"
#include "noderuntime/stage/checkpoint_resume.h"
#include "stage_test_support.h"

namespace tessel::stage {
namespace {

namespace fs = std::filesystem;
using placement::ScheduleKind;

constexpr int kSteps = 9;
constexpr int kH = 3;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TrainingOptions mode_options() {
  TrainingOptions o = testing::tiny_options(ScheduleKind::OneFOneB, 2);
  o.low_communication.enabled = true;
  o.low_communication.sync_every = kH;
  o.low_communication.delta_bits = 8;
  o.low_communication.delayed = true;
  o.low_communication.outer_learning_rate = 0.7f;
  o.low_communication.outer_momentum = 0.9f;
  o.low_communication.final_step = kSteps;
  return o;
}

// theta_start of a runtime's chunks, by tensor name (none in synchronous data parallelism).
testing::Weights outer_start(const StageRuntime& runtime) {
  testing::Weights out;
  if (!runtime.outer_sync()) return out;
  const auto& state = runtime.outer_sync()->state();
  for (size_t c = 0; c < state.size(); ++c) {
    for (const ParameterTensor& t : runtime.chunks()[c]->model.layout().tensors()) {
      out[t.name] = std::vector<float>(state[c].start.begin() + t.offset,
                                       state[c].start.begin() + t.offset + t.size);
    }
  }
  return out;
}

// Every replica's parameters and theta_start after every step, by the step's number.
struct Trajectory {
  std::mutex mu;
  std::map<int64_t, std::vector<testing::Weights>> params, start;
  std::map<int64_t, std::vector<double>> losses;  // per rank

  void record(StageRuntime& runtime) {
    testing::Weights mine;
    testing::collect_weights(runtime, mine);
    const testing::Weights outer = outer_start(runtime);
    const int64_t step = runtime.steps_done();
    std::lock_guard<std::mutex> lock(mu);
    auto& p = params[step];
    auto& s = start[step];
    p.resize(runtime.layout().replicas);
    s.resize(runtime.layout().replicas);
    for (const auto& [name, values] : mine) p[runtime.replica()][name] = values;
    for (const auto& [name, values] : outer) s[runtime.replica()][name] = values;
  }
};

class LowCommunicationCheckpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessel-lowcomm-ckpt-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }

  // Trains `steps` steps from the start (or from the checkpoint `resume` finds), recording every
  // step, saving after each when `save`. Returns every rank's resume lines.
  std::vector<std::string> run(const TrainingOptions& options, int steps, bool save, bool resume,
                               Trajectory& seen) {
    std::vector<std::string> err(layout_.world_size());
    testing::RunHooks hooks;
    if (resume) {
      hooks.before = [&](StageRuntime& runtime, transport::Communicator& comm) {
        std::ostringstream out;
        resume_from_checkpoints(dir(), CheckpointDirs::kShared, runtime, comm, out);
        err[runtime.rank()] = out.str();
      };
    }
    hooks.after_step = [&](StageRuntime& runtime, transport::Communicator& comm, int) {
      if (save) save_checkpoint(dir(), runtime, comm, {/*keep=*/kSteps, std::nullopt});
      seen.record(runtime);
    };
    const testing::RunResult result =
        testing::run_pipeline(config_, layout_, options, steps, hooks);
    for (int rank = 0; rank < layout_.world_size(); ++rank) {
      for (const StepReport& report : result.reports[rank]) {
        std::vector<double>& losses = seen.losses[report.step];
        losses.resize(layout_.world_size());
        losses[rank] = report.loss;
      }
    }
    return err;
  }

  // The names of the tensors in rank `rank`'s file of `step` that end with `suffix`.
  std::vector<std::string> tensors_ending(int64_t step, int rank, const std::string& suffix) {
    std::vector<std::string> names;
    for (const auto& [name, tensor] :
         read_safetensors(checkpoint_rank_file(dir(), step, rank)).tensors) {
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        names.push_back(name);
      }
    }
    return names;
  }

  // Steps first..last of `resumed` bit-identical to `whole`: losses, parameters, theta_start.
  void expect_same(int64_t first, int64_t last, Trajectory& resumed, Trajectory& whole) {
    for (int64_t step = first; step <= last; ++step) {
      ASSERT_TRUE(resumed.params.count(step)) << "step " << step;
      EXPECT_EQ(resumed.losses[step], whole.losses[step]) << "losses of step " << step;
      for (int r = 0; r < layout_.replicas; ++r) {
        EXPECT_TRUE(resumed.params[step][r] == whole.params[step][r])
            << "parameters of replica " << r << " after step " << step;
        EXPECT_TRUE(resumed.start[step][r] == whole.start[step][r])
            << "theta_start of replica " << r << " after step " << step;
      }
    }
  }

  fs::path dir_;
  const GptConfig config_ = testing::tiny_config(4);
  const PipelineLayout layout_ = PipelineLayout::standard(2, 2, 1, 4);
};

class LowCommunicationResume : public LowCommunicationCheckpoints,
                               public ::testing::WithParamInterface<int> {};

TEST_P(LowCommunicationResume, IsBitIdenticalToARunNeverStopped) {
  const int stop_at = GetParam();
  Trajectory whole, saved, resumed;
  run(mode_options(), kSteps, /*save=*/false, /*resume=*/false, whole);
  run(mode_options(), stop_at, /*save=*/true, /*resume=*/false, saved);
  // Saving (which waits for an exchange in flight) changed nothing.
  expect_same(1, stop_at, saved, whole);
  ASSERT_EQ(latest_checkpoint(dir()), stop_at);
  // Step 3 is a sync step: its delayed exchange is in flight and saved as its mean delta.
  const bool in_flight = stop_at % kH == 0;
  for (int rank = 0; rank < layout_.world_size(); ++rank) {
    EXPECT_EQ(tensors_ending(stop_at, rank, ".outer_pending").empty(), !in_flight)
        << "rank " << rank;
    EXPECT_FALSE(tensors_ending(stop_at, rank, ".outer_start").empty());
    EXPECT_FALSE(tensors_ending(stop_at, rank, ".outer_momentum").empty());
    EXPECT_FALSE(tensors_ending(stop_at, rank, ".outer_residual").empty());
  }
  const std::vector<std::string> err =
      run(mode_options(), kSteps - stop_at, /*save=*/false, /*resume=*/true, resumed);
  for (const std::string& e : err) {
    EXPECT_TRUE(contains(e, "resume: step " + std::to_string(stop_at) + ": state from")) << e;
  }
  expect_same(stop_at + 1, kSteps, resumed, whole);
}

INSTANTIATE_TEST_SUITE_P(StopSteps, LowCommunicationResume, ::testing::Values(3, 4, 5),
                         [](const auto& info) { return "step_" + std::to_string(info.param); });

// Some rank's error in resuming from dir() with `options` ("" when every rank resumed).
std::string resume_error(const GptConfig& config, const PipelineLayout& layout,
                         const TrainingOptions& options, const std::string& dir) {
  std::vector<std::string> errors(layout.world_size());
  testing::RunHooks hooks;
  hooks.before = [&](StageRuntime& runtime, transport::Communicator& comm) {
    std::ostringstream out;
    try {
      resume_from_checkpoints(dir, CheckpointDirs::kShared, runtime, comm, out);
    } catch (const CheckpointError& e) {
      errors[runtime.rank()] = e.what();
    }
  };
  testing::run_pipeline(config, layout, options, 0, hooks);
  return errors[0];
}

TEST_F(LowCommunicationCheckpoints, AModeJobRefusesASynchronousCheckpoint) {
  Trajectory seen;
  TrainingOptions synchronous = mode_options();
  synchronous.low_communication = {};
  run(synchronous, 2, /*save=*/true, /*resume=*/false, seen);
  const std::string error = resume_error(config_, layout_, mode_options(), dir());
  EXPECT_TRUE(contains(error, checkpoint_rank_file(dir(), 2, 0) + ": no outer state (tensor '"))
      << error;
  EXPECT_TRUE(contains(error,
                       ".outer_start' missing): written by a synchronous data-parallel "
                       "job; this job's data_parallel.mode is 'low-communication'"))
      << error;
}

TEST_F(LowCommunicationCheckpoints, ASynchronousJobRefusesAModeCheckpoint) {
  Trajectory seen;
  run(mode_options(), 2, /*save=*/true, /*resume=*/false, seen);
  TrainingOptions synchronous = mode_options();
  synchronous.low_communication = {};
  const std::string error = resume_error(config_, layout_, synchronous, dir());
  EXPECT_TRUE(contains(error, checkpoint_rank_file(dir(), 2, 0) +
                                  ": written by a job of data_parallel.mode 'low-communication'"))
      << error;
  EXPECT_TRUE(contains(error, "this job is synchronous")) << error;
}

TEST_F(LowCommunicationCheckpoints, DamagedOuterStateFallsBackToThePreviousStep) {
  constexpr int kSaved = 5;
  Trajectory whole, saved, resumed;
  run(mode_options(), kSteps, false, false, whole);
  run(mode_options(), kSaved, true, false, saved);
  // The outer momentum of both replicas of stage 0 at step 5 flipped on disk: no file of the
  // stage holds step 5, so every rank resumes step 4.
  std::string damaged;
  for (int r = 0; r < layout_.replicas; ++r) {
    const int rank = layout_.rank(0, r);
    const std::vector<std::string> names = tensors_ending(kSaved, rank, ".outer_momentum");
    ASSERT_FALSE(names.empty());
    damaged = names.front();
    testing::overwrite_float(checkpoint_rank_file(dir(), kSaved, rank), damaged, 3, 12345.0f);
  }
  const std::vector<std::string> err =
      run(mode_options(), kSteps - (kSaved - 1), false, true, resumed);
  const std::string& stage0 = err[layout_.rank(0, 0)];
  EXPECT_TRUE(contains(stage0, "skipping step 5: " + checkpoint_rank_file(dir(), kSaved, 0) +
                                   ": tensor '" + damaged + "': checksum mismatch"))
      << stage0;
  for (const std::string& e : err) EXPECT_TRUE(contains(e, "resume: step 4: state from")) << e;
  expect_same(kSaved, kSteps, resumed, whole);
}

TEST_F(LowCommunicationCheckpoints, ARankTakingItsPeersFileGetsTheStagesOuterStateAndNoResidual) {
  constexpr int kSaved = 4;
  Trajectory saved;
  run(mode_options(), kSaved, true, false, saved);
  const int lost = layout_.rank(0, 0), peer = layout_.rank(0, 1);
  const std::string file = checkpoint_rank_file(dir(), kSaved, lost);
  testing::overwrite_float(file, tensors_ending(kSaved, lost, ".outer_residual").front(), 0, 7.0f);
  std::mutex mu;
  std::map<int, OuterChunkState> restored;
  std::vector<std::string> err(layout_.world_size());
  testing::RunHooks hooks;
  hooks.before = [&](StageRuntime& runtime, transport::Communicator& comm) {
    std::ostringstream out;
    resume_from_checkpoints(dir(), CheckpointDirs::kShared, runtime, comm, out);
    std::lock_guard<std::mutex> lock(mu);
    err[runtime.rank()] = out.str();
    restored[runtime.rank()] = runtime.outer_sync()->state().at(0);
  };
  testing::run_pipeline(config_, layout_, mode_options(), 1, hooks);
  EXPECT_TRUE(contains(err[lost],
                       "resume: step 4: state from " + checkpoint_rank_file(dir(), kSaved, peer)))
      << err[lost];
  EXPECT_EQ(restored[lost].start, restored[peer].start);
  EXPECT_EQ(restored[lost].momentum, restored[peer].momentum);
  EXPECT_EQ(restored[lost].residual, std::vector<float>(restored[peer].residual.size(), 0.0f));
  // The peer resumed its own file: its residual (error feedback's debt) is not zero.
  EXPECT_NE(restored[peer].residual, restored[lost].residual);
}

}  // namespace
}  // namespace tessel::stage
