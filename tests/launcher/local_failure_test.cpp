// `tessel local` through the real binaries when a stage process fails or a run resumes: the
// error names the tasklet at fault (the one that stopped answering, the one whose own state is
// bad), not the first neighbour that noticed; a resumed run reports the steps it ran and the
// step it resumed from; resuming a run that already holds its last step does nothing and
// leaves the previous report as it was. No test leaves a process behind.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <filesystem>
#include <thread>

#include "launcher_process.h"
#include "noderuntime/launcher/launcher.h"

namespace tessel::launcher {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::LauncherProcess;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The tiny 2 x 2 job with a short I/O timeout, or with a checkpoint after every step.
std::string job_with(int steps, const std::string& extra) {
  std::string text = testing::tiny_job_yaml(steps);
  const std::string timeouts = "timeouts: {connect_s: 30, io_s: 30}\n";
  text.replace(text.find(timeouts), timeouts.size(), extra);
  return text;
}

// `tessel args...` with RLIMIT_FSIZE at `limit` bytes (writes past it fail with EFBIG, as on a
// full disk): its stdout and stderr together, and its exit status (-1 past the deadline).
int run_with_file_size_limit(const std::vector<std::string>& args, rlim_t limit,
                             std::string* output) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> argv_text = {TESSEL_BINARY};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("TESSEL_STAGE_BINARY", TESSEL_STAGE_BINARY, 1);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    signal(SIGXFSZ, SIG_IGN);
    const rlimit size{limit, limit};
    setrlimit(RLIMIT_FSIZE, &size);
    execv(TESSEL_BINARY, argv.data());
    _exit(127);
  }
  close(out[1]);
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  bool timed_out = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{out[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      timed_out = true;
      break;
    }
    char chunk[4096];
    const ssize_t n = read(out[0], chunk, sizeof chunk);
    if (n <= 0) break;
    output->append(chunk, static_cast<size_t>(n));
  }
  close(out[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class LocalRunFailure : public testing::JobFolderTest {
 protected:
  // Runs `tessel local job.yaml --output out [extra...]` to its end; returns its exit status.
  int run(const std::string& job, std::vector<std::string> extra, std::string* output) {
    std::vector<std::string> args = {"local", job, "--output", out()};
    args.insert(args.end(), extra.begin(), extra.end());
    LauncherProcess launcher(args);
    const int status = launcher.finish(180s);
    *output = launcher.output();
    return status;
  }
};

TEST_F(LocalRunFailure, StoppedRankIsBlamedNotThePeersThatTimedOutOnIt) {
  // io_s 5: the peers of a stopped rank give up on it after 5 s.
  LauncherProcess launcher({"local",
                            write_job(job_with(100000, "timeouts: {connect_s: 30, io_s: 5}\n")),
                            "--output", out(), "--grace", "120"});
  ASSERT_TRUE(launcher.wait_for_line("step 2/", 120s)) << launcher.output();
  const auto children = testing::four_children(launcher.pid());
  ASSERT_EQ(children.size(), 4u);
  const pid_t victim = testing::pid_of_rank(children, 1);
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGSTOP), 0);
  // Well inside the 120 s grace: the stopped process is killed at once, not waited for.
  EXPECT_EQ(launcher.finish(90s), 1) << launcher.output();
  const std::string blamed =
      "error: stage 1 replica 0 (rank 1) (pid " + std::to_string(victim) + ") stopped answering: ";
  EXPECT_NE(launcher.output().find(blamed), std::string::npos) << launcher.output();
  EXPECT_NE(launcher.output().find("timed out waiting for it (rank "), std::string::npos)
      << launcher.output();
  EXPECT_NE(launcher.output().find(": no data for 5 s); it was stopped by SIGSTOP"),
            std::string::npos)
      << launcher.output();
  EXPECT_NE(launcher.output().find("stage 1 replica 0 (rank 1) is stopped by SIGSTOP and cannot "
                                   "stop by itself: killing it"),
            std::string::npos)
      << launcher.output();
  testing::expect_all_gone(children);
  EXPECT_NE(report().find("**failed**: stage 1 replica 0 (rank 1) (pid " + std::to_string(victim) +
                          ") stopped answering: "),
            std::string::npos)
      << report();
}

TEST_F(LocalRunFailure, ARanksTruncatedCheckpointFileIsSkippedNamingRankAndFile) {
  const std::string job = write_job(job_with(
      2, "timeouts: {connect_s: 30, io_s: 30}\ncheckpoint: {interval: 1, resume: true}\n"));
  std::string output;
  ASSERT_EQ(run(job, {}, &output), 0) << output;
  // Rank 1's file of the newest checkpoint loses its second half: it is skipped (issue 14) and
  // rank 1 loads its data-parallel peer's (rank 3's) file of the same step.
  const fs::path file = dir_ / "out" / "checkpoints" / "step-00000002" / "rank-00001.safetensors";
  ASSERT_TRUE(fs::exists(file));
  fs::resize_file(file, fs::file_size(file) / 2);
  EXPECT_EQ(run(job, {"--steps", "4"}, &output), 0) << output;
  const size_t said = output.find("tessel local: resumed from the checkpoint of step 2, skipping");
  ASSERT_NE(said, std::string::npos) << output;
  EXPECT_NE(
      output.find(
          "step 2: " + file.string() + ": " + std::to_string(fs::file_size(file)) + " bytes", said),
      std::string::npos)
      << output;
  EXPECT_NE(output.find("(rank 1)", said), std::string::npos) << output;
  EXPECT_NE(report().find("2 steps run (3 to 4 of 4), resumed from step 2, in "), std::string::npos)
      << report();
}

TEST_F(LocalRunFailure, AStagesOwnCauseComesBeforeAReportThatCannotBeWritten) {
  // 3 KiB: the launcher's job.json and topology.yaml (under 2 KB) fit, a rank's checkpoint file
  // (some 250 KB) and report.md (over 3.5 KB) do not.
  const std::string job = write_job(job_with(
      3, "timeouts: {connect_s: 30, io_s: 30}\ncheckpoint: {interval: 1, resume: true}\n"));
  std::string output;
  EXPECT_EQ(run_with_file_size_limit({"local", job, "--output", out()}, 3072, &output), 1)
      << output;
  const size_t cause = output.find(".safetensors: cannot write: File too large");
  const size_t report = output.find("tessel local: error: the report was not written: " + out() +
                                    "/report.md: cannot write: File too large");
  ASSERT_NE(cause, std::string::npos) << output;
  ASSERT_NE(report, std::string::npos) << output;
  EXPECT_LT(output.rfind("tessel local: error: stage ", cause), cause) << output;
  EXPECT_LT(cause, report) << output;
  EXPECT_FALSE(fs::exists(dir_ / "out" / "report.md"));
}

TEST_F(LocalRunFailure, ResumePastTheEndIsRefusedByTheLibraryBeforeAnythingIsWritten) {
  // A checkpoint folder whose manifest names step 5 (the launcher reads only the manifests).
  const std::string job = write_job(job_with(
      3, "timeouts: {connect_s: 30, io_s: 30}\ncheckpoint: {interval: 1, resume: true}\n"));
  const fs::path checkpoints = dir_ / "out" / "checkpoints";
  fs::create_directories(checkpoints / "step-00000005");
  std::string manifest =
      R"({"format": "tessel-stage-checkpoint-2", "step": 5, "data_position": 40, "seed": 1337, )"
      R"("world_size": 4, "files": [)";
  for (int rank = 0; rank < 4; ++rank) {
    manifest += (rank ? ", " : "") + std::string(R"({"rank": )") + std::to_string(rank) +
                R"(, "stage": )" + std::to_string(rank % 2) + R"(, "replica": )" +
                std::to_string(rank / 2) + R"(, "file": "step-00000005/rank-0000)" +
                std::to_string(rank) + R"(.safetensors", "bytes": 262584, "crc32c": "9b5bfc26"})";
  }
  manifest += "]}";
  std::ofstream(checkpoints / "manifest.json") << manifest;
  std::ofstream(checkpoints / "step-00000005" / "manifest.json") << manifest;
  std::ofstream(dir_ / "out" / "report.md") << "# the previous report\n";
  LocalRunOptions options;
  options.output_dir = out();
  options.out = nullptr;
  options.err = nullptr;
  options.stage_binary = TESSEL_STAGE_BINARY;
  try {
    run_local_job(load_local_job(job), options);
    ADD_FAILURE() << "a run past its checkpoint's step started";
  } catch (const LocalJobError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing to do: checkpoint.resume is set and the newest "
                                         "checkpoint in " +
                                         checkpoints.string() + " is at step 5"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_text(dir_ / "out" / "report.md"), "# the previous report\n");
  EXPECT_FALSE(fs::exists(dir_ / "out" / "job.json"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "logs"));
}

TEST_F(LocalRunFailure, ResumedRunReportsTheStepsItRanAndPastTheEndLeavesTheReportAlone) {
  const std::string job = write_job(job_with(
      3, "timeouts: {connect_s: 30, io_s: 30}\ncheckpoint: {interval: 1, resume: true}\n"));
  std::string output;
  ASSERT_EQ(run(job, {}, &output), 0) << output;
  EXPECT_NE(output.find("tessel local: done: 3 of 3 steps in "), std::string::npos) << output;
  EXPECT_NE(report().find("**done**: 3 of 3 steps in "), std::string::npos) << report();

  // Two more steps: the run resumes from step 3 and says it ran 2.
  ASSERT_EQ(run(job, {"--steps", "5"}, &output), 0) << output;
  EXPECT_NE(output.find(", steps 4 to 5 (resuming from the checkpoint of step 3); output "),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("step 4/5  loss "), std::string::npos) << output;
  EXPECT_EQ(output.find("step 3/5  loss "), std::string::npos) << output;
  EXPECT_NE(output.find("tessel local: done: 2 steps run (4 to 5 of 5), resumed from step 3, in "),
            std::string::npos)
      << output;
  const std::string resumed = report();
  EXPECT_NE(resumed.find("**done**: 2 steps run (4 to 5 of 5), resumed from step 3, in "),
            std::string::npos)
      << resumed;
  EXPECT_NE(resumed.find("Resumed from the checkpoint of step 3: step 4, the first of this run, "),
            std::string::npos)
      << resumed;
  const std::string svg = read_text(dir_ / "out" / "loss.svg");
  const std::string job_json = read_text(dir_ / "out" / "job.json");

  // The checkpoint holds step 5: --steps 5 (or fewer) has nothing to do.
  for (const char* steps : {"5", "4"}) {
    EXPECT_EQ(run(job, {"--steps", steps}, &output), 1) << output;
    EXPECT_NE(output.find("nothing to do: checkpoint.resume is set and the newest checkpoint in " +
                          out() + "/checkpoints is at step 5, at or past the job's last step " +
                          "(training.steps, or --steps: " + steps + ")"),
              std::string::npos)
        << output;
    EXPECT_NE(output.find(out() + "/report.md is left as it was"), std::string::npos) << output;
    EXPECT_EQ(report(), resumed);
    EXPECT_EQ(read_text(dir_ / "out" / "loss.svg"), svg);
    EXPECT_EQ(read_text(dir_ / "out" / "job.json"), job_json);
  }
}

}  // namespace
}  // namespace tessel::launcher
