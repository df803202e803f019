// The real `tessel` binary run as a user runs it, for tests/cli: in its own process group, in a
// given folder, stdout and stderr read apart, killed (with whatever it started) at a bound.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::cli_testing {

struct TesselRun {
  bool timed_out = false;
  int raw_status = 0;  // waitpid's
  std::string out, err;

  std::string shown() const { return "\n--- stdout\n" + out + "\n--- stderr\n" + err; }
};

struct TesselRunOptions {
  std::string dir;        // working folder ("" for this one)
  double timeout_s = 60;  // the bound, from the start
  long fsize_limit = 0;   // RLIMIT_FSIZE for the run (> 0): writes past it fail, as on a full disk
  // Called each time stderr grows, with the process's pid; returning true restarts the bound
  // from now (e.g. after sending the process a signal).
  std::function<bool(pid_t, const std::string& err)> on_stderr;
};

inline TesselRun run_tessel(const std::vector<std::string>& args, const TesselRunOptions& options) {
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> text = {TESSEL_BINARY};
  text.insert(text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : text) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    signal(SIGINT, SIG_DFL);
    if (!options.dir.empty() && chdir(options.dir.c_str()) != 0) _exit(126);
    if (options.fsize_limit > 0) {
      signal(SIGXFSZ, SIG_IGN);
      const rlimit limit{static_cast<rlim_t>(options.fsize_limit),
                         static_cast<rlim_t>(options.fsize_limit)};
      setrlimit(RLIMIT_FSIZE, &limit);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  close(out_pipe[1]);
  close(err_pipe[1]);
  TesselRun run;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open_pipes = 2;
  using Clock = std::chrono::steady_clock;
  const auto bound =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.timeout_s));
  auto deadline = Clock::now() + bound;
  while (open_pipes > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      run.timed_out = true;
      break;
    }
    if (poll(fds, 2, static_cast<int>(std::min<long>(left, 200))) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
        if (i == 1 && options.on_stderr && options.on_stderr(pid, run.err))
          deadline = Clock::now() + bound;
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_pipes;
      }
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  if (run.timed_out) kill(-pid, SIGKILL);
  waitpid(pid, &run.raw_status, 0);
  kill(-pid, SIGKILL);  // whatever it started and left behind
  return run;
}

}  // namespace tessel::cli_testing
