// Test helpers for tessel-stage as real processes: a job.json for a tiny model whose ranks bind
// ports the kernel picks on 127.0.0.1 and find each other through a rendezvous this test process
// serves, and child processes whose JSON progress lines are read through a pipe (losses() reads
// the step lines with their one reader, proto/progress/step_metrics.h, which checks every key).
#pragma once

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "proto/progress/step_metrics.h"
#include "proto/rendezvous/rendezvous_server.h"

#ifndef TESSEL_STAGE_BINARY
#error "define TESSEL_STAGE_BINARY as the path of the tessel-stage executable"
#endif

namespace tessel::stage::testing {

// One rendezvous server for the test process's jobs, with a token file per job (removed when the
// process ends). A job run again (a resume, another device) starts a new generation there.
class TestRendezvous {
 public:
  static TestRendezvous& get() {
    static TestRendezvous instance;
    return instance;
  }
  ~TestRendezvous() {
    for (const std::string& path : token_files_) std::filesystem::remove(path);
  }

  // Serves a new job of `world` ranks; returns its id and the job.json "rendezvous" section.
  std::pair<uint64_t, nlohmann::json> add_job(int world) {
    const std::lock_guard lock(mutex_);
    const uint64_t job_id = 1000 + next_++;
    const std::string token =
        "test-token-" + std::to_string(::getpid()) + "-" + std::to_string(job_id) + "-0123456789";
    const std::string path =
        (std::filesystem::temp_directory_path() /
         ("tessel-test-" + std::to_string(::getpid()) + "-" + std::to_string(job_id) + ".token"))
            .string();
    std::ofstream(path) << token << "\n";
    token_files_.push_back(path);
    server_.table().add_job(job_id, world, token);
    return {job_id,
            {{"address", "127.0.0.1:" + std::to_string(server_.port())}, {"token_file", path}}};
  }

 private:
  rendezvous::RendezvousServer server_{"127.0.0.1:0", grpc::InsecureServerCredentials()};
  std::mutex mutex_;
  uint64_t next_ = 0;
  std::vector<std::string> token_files_;
};

// The job of the tiny model: the same model, options and corpus as tiny_config(layers),
// tiny_options(kind, m) and tiny_corpus(), with ranks r = replica * P + stage.
inline nlohmann::json tiny_job(int stages, int replicas, int layers, int micro_batches,
                               const std::string& schedule, int steps) {
  nlohmann::json ranks = nlohmann::json::array();
  for (int r = 0; r < replicas; ++r) {
    for (int s = 0; s < stages; ++s) {
      ranks.push_back({{"stage", s}, {"replica", r}, {"host", "127.0.0.1"}, {"port", 0}});
    }
  }
  auto [job_id, rendezvous] = TestRendezvous::get().add_job(stages * replicas);
  return {{"job_id", job_id},
          {"rendezvous", rendezvous},
          {"workload",
           {{"model",
             {{"layers", layers},
              {"hidden", 32},
              {"heads", 4},
              {"ffn_hidden", 128},
              {"seq_len", 16},
              {"vocab", 256},
              {"precision", "fp32"}}},
            {"training", {{"micro_batch", 2}, {"global_batch", 2 * micro_batches * replicas}}}}},
          {"training",
           {{"steps", steps},
            {"learning_rate", 1e-3},
            {"weight_decay", 0.1},
            {"grad_clip", 1.0},
            {"seed", 42}}},
          {"data", {{"kind", "synthetic"}, {"seed", 7}, {"bytes", 20000}}},
          {"schedule", {{"kind", schedule}}},
          {"pipeline", {{"stages", stages}, {"replicas", replicas}}},
          {"ranks", ranks},
          {"timeouts", {{"connect_s", 20}, {"io_s", 20}}}};
}

// A tessel-stage child: stdout through a pipe, read line by line; stderr into a string.
class StageProcess {
 public:
  // Runs `binary` (tessel-stage by default) with --job, --rank and the extra arguments.
  StageProcess(const std::string& job_path, int rank,
               const std::string& binary = TESSEL_STAGE_BINARY,
               const std::vector<std::string>& extra = {}) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe failed");
    }
    std::vector<std::string> args = {"tessel-stage", "--job", job_path, "--rank",
                                     std::to_string(rank)};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    out_ = out[0];
    err_ = err[0];
  }
  ~StageProcess() {
    if (pid_ > 0 && status_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
    close(err_);
  }
  StageProcess(const StageProcess&) = delete;
  StageProcess& operator=(const StageProcess&) = delete;

  pid_t pid() const { return pid_; }

  // The next progress line, or nullopt at end of output or when the deadline passes.
  std::optional<nlohmann::json> next_line(std::chrono::seconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (true) {
      const size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        const std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        lines_.push_back(nlohmann::json::parse(line));
        return lines_.back();
      }
      if (!read_some(out_, buffer_, deadline)) return std::nullopt;
    }
  }

  // Reads every remaining line, then the exit status (128 + signal when killed). Returns -1
  // when the process does not end within the limit.
  int finish(std::chrono::seconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (next_line(std::chrono::duration_cast<std::chrono::seconds>(
        deadline - std::chrono::steady_clock::now() + std::chrono::seconds(1)))) {
    }
    while (read_some(err_, stderr_, deadline)) {
    }
    if (std::chrono::steady_clock::now() > deadline) return -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return status_;
  }

  const std::vector<nlohmann::json>& lines() const { return lines_; }
  const std::string& stderr_text() const { return stderr_; }
  std::vector<double> losses() const {
    std::vector<double> out;
    for (const auto& line : lines_) {
      if (line["event"] == "step") out.push_back(progress::step_metrics_from_json(line).loss);
    }
    return out;
  }

 private:
  // Appends what fd has; false at end of file or when the deadline passes.
  static bool read_some(int fd, std::string& into, std::chrono::steady_clock::time_point deadline) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char chunk[4096];
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) return false;
    into.append(chunk, n);
    return true;
  }

  pid_t pid_ = -1;
  int out_ = -1, err_ = -1;
  int status_ = -1;
  std::string buffer_;
  std::string stderr_;
  std::vector<nlohmann::json> lines_;
};

}  // namespace tessel::stage::testing
