// Test helpers for `tessel local` as a real process: the launcher with its stdout read line by
// line through a pipe, its stage processes found through /proc (children whose command line
// names tessel-stage), and a small job on kernel-chosen ports.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifndef TESSEL_BINARY
#error "define TESSEL_BINARY as the path of the tessel executable"
#endif
#ifndef TESSEL_STAGE_BINARY
#error "define TESSEL_STAGE_BINARY as the path of the tessel-stage executable"
#endif

namespace tessel::launcher::testing {

// A job of a tiny model (2 x 2 by default) on a generated two-site network with short
// latencies, trained on a synthetic corpus.
inline std::string tiny_job_yaml(int steps, int stages = 2, int replicas = 2) {
  return "name: tiny\n"
         "topology: {generate: {sites: 2, seed: 1}, latency_scale: 0.01}\n"
         "model: {layers: 2, hidden: 32, heads: 4, seq_len: 16}\n"
         "training: {steps: " +
         std::to_string(steps) + ", micro_batch: 2, global_batch: " + std::to_string(4 * replicas) +
         ", learning_rate: 0.001}\n"
         "data: {synthetic: {seed: 7, bytes: 20000}}\n"
         "pipeline: {stages: " +
         std::to_string(stages) + ", replicas: " + std::to_string(replicas) +
         "}\n"
         "placement: {evaluations: 200}\n"
         "timeouts: {connect_s: 30, io_s: 30}\n";
}

// The tessel-stage processes whose parent is `parent`, as (pid, rank).
inline std::vector<std::pair<pid_t, int>> stage_children(pid_t parent) {
  std::vector<std::pair<pid_t, int>> found;
  DIR* proc = opendir("/proc");
  if (!proc) return found;
  while (const dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close_paren = text.rfind(')');
    if (close_paren == std::string::npos) continue;
    std::istringstream fields(text.substr(close_paren + 2));
    char state;
    pid_t ppid = 0;
    fields >> state >> ppid;
    if (ppid != parent) continue;
    std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
    std::vector<std::string> args;
    for (std::string arg; std::getline(cmdline, arg, '\0');) args.push_back(arg);
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "--rank") found.emplace_back(pid, std::stoi(args[i + 1]));
    }
  }
  closedir(proc);
  return found;
}

// True while the process runs: false once it is gone or a zombie (dead, not yet reaped).
inline bool process_running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close_paren = text.rfind(')');
  return close_paren != std::string::npos && close_paren + 2 < text.size() &&
         text[close_paren + 2] != 'Z' && text[close_paren + 2] != 'X';
}

// `tessel local ...` as a child: stdout and stderr through one pipe, read line by line.
class LauncherProcess {
 public:
  explicit LauncherProcess(std::vector<std::string> args) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    args.insert(args.begin(), TESSEL_BINARY);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      setenv("TESSEL_STAGE_BINARY", TESSEL_STAGE_BINARY, 1);
      dup2(out[1], STDOUT_FILENO);
      dup2(out[1], STDERR_FILENO);
      execv(TESSEL_BINARY, argv.data());
      _exit(127);
    }
    close(out[1]);
    out_ = out[0];
  }
  ~LauncherProcess() {
    if (status_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }
  LauncherProcess(const LauncherProcess&) = delete;
  LauncherProcess& operator=(const LauncherProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }

  // Reads until a line starting with `prefix` has arrived; false at the deadline or the end.
  bool wait_for_line(const std::string& prefix, std::chrono::seconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (true) {
      std::istringstream lines(output_);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind(prefix, 0) == 0) return true;
      }
      if (!read_some(deadline)) return false;
    }
  }

  // Reads to the end, then the exit status (128 + signal when killed); -1 past the deadline.
  int finish(std::chrono::seconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (read_some(deadline)) {
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return status_;
  }

 private:
  bool read_some(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{out_, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char chunk[4096];
    const ssize_t n = read(out_, chunk, sizeof chunk);
    if (n <= 0) return false;
    output_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  int status_ = -1;
  std::string output_;
};

// Waits (up to 30 s) for the launcher's four stage processes to be running; empty if they
// never are.
inline std::vector<std::pair<pid_t, int>> four_children(pid_t launcher) {
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    const auto children = stage_children(launcher);
    if (children.size() == 4) return children;
  }
  return {};
}

// The pid of `rank` among stage_children's, or -1.
inline pid_t pid_of_rank(const std::vector<std::pair<pid_t, int>>& children, int rank) {
  for (const auto& [pid, r] : children) {
    if (r == rank) return pid;
  }
  return -1;
}

// Every one of them ends within 10 s (the kernel kills orphans of a dead launcher).
inline void expect_all_gone(const std::vector<std::pair<pid_t, int>>& children) {
  for (const auto& [pid, rank] : children) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (process_running(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_FALSE(process_running(pid))
        << "rank " << rank << " (pid " << pid << ") outlived the launcher";
  }
}

// A fresh folder per test (named after the suite, the test and this process) for a job file and
// the run's output folder `out`.
class JobFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("tessel-" + std::string(test->test_suite_name()) + "-" + std::to_string(::getpid()) +
            "-" + test->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write_job(const std::string& text) const {
    std::ofstream(dir_ / "job.yaml") << text;
    return (dir_ / "job.yaml").string();
  }
  std::string out() const { return (dir_ / "out").string(); }
  std::string report() const {
    std::ifstream in(dir_ / "out" / "report.md");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  std::filesystem::path dir_;
};

}  // namespace tessel::launcher::testing
