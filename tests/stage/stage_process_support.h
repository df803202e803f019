// Test helpers for tessel-stage as real processes: a job.json for a tiny model on kernel-chosen
// ports of 127.0.0.1, and child processes whose JSON progress lines are read through a pipe.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "noderuntime/transport/socket.h"

#ifndef TESSEL_STAGE_BINARY
#error "define TESSEL_STAGE_BINARY as the path of the tessel-stage executable"
#endif

namespace tessel::stage::testing {

// Ports the kernel chose for listeners that are closed again at once, for the processes to
// bind (a port could in principle be taken in between; the kernel does not hand out a port it
// just released to the next bind(0)).
inline std::vector<int> free_ports(int n) {
  std::vector<transport::TcpListener> held;
  std::vector<int> ports;
  for (int i = 0; i < n; ++i) {
    held.push_back(transport::TcpListener::bind("127.0.0.1", 0));
    ports.push_back(held.back().port());
  }
  return ports;
}

// The job of the tiny model: the same model, options and corpus as tiny_config(layers),
// tiny_options(kind, m) and tiny_corpus(), with ranks r = replica * P + stage.
inline nlohmann::json tiny_job(int stages, int replicas, int layers, int micro_batches,
                               const std::string& schedule, int steps) {
  nlohmann::json ranks = nlohmann::json::array();
  const std::vector<int> ports = free_ports(stages * replicas);
  for (int r = 0; r < replicas; ++r) {
    for (int s = 0; s < stages; ++s) {
      ranks.push_back(
          {{"stage", s}, {"replica", r}, {"host", "127.0.0.1"}, {"port", ports[r * stages + s]}});
    }
  }
  return {{"workload",
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
      if (line["event"] == "step") out.push_back(line["loss"].get<double>());
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
