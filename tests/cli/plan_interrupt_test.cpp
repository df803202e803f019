// Ctrl-C during a long `tessel plan`, as a user presses it: the search stops, the best
// placement found so far is printed in the requested format (a placement `tessel simulate`
// accepts), stderr says it was interrupted after how many evaluations, and the exit code is
// 130. The bounds below are generous timeouts, not timings.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

const std::string kTopology =
    std::string(TESSEL_SOURCE_DIR) + "/examples/topologies/5-worldwide-geo.yaml";

struct Interrupted {
  bool started = false;    // stderr showed the search running before the SIGINT
  bool timed_out = false;  // still running at the bound after the SIGINT (then killed)
  int raw_status = 0;
  std::string out, err;
};

// Starts tessel with args; once its stderr contains `running` (the search has begun), sends it
// SIGINT, then reads it to the end (killed at the bound).
Interrupted interrupt_tessel(const std::vector<std::string>& args, const std::string& running) {
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
    signal(SIGINT, SIG_DFL);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  Interrupted r;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_pipes = 2;
  // The search must begin within 120 s (a loaded machine), and end within 60 s of the SIGINT.
  auto deadline = Clock::now() + std::chrono::seconds(120);
  bool sent = false;
  while (open_pipes > 0) {
    if (!sent && r.err.find(running) != std::string::npos) {
      r.started = true;
      kill(pid, SIGINT);
      sent = true;
      deadline = Clock::now() + std::chrono::seconds(60);
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    if (poll(fds, 2, static_cast<int>(std::min<long>(left, 200))) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_pipes;
      }
    }
  }
  for (const pollfd& p : fds)
    if (p.fd >= 0) close(p.fd);
  if (r.timed_out) kill(pid, SIGKILL);
  waitpid(pid, &r.raw_status, 0);
  return r;
}

// A budget of ten million evaluations on one thread: minutes at the least, so the estimate
// line (printed once the rate is measured, when the budget needs more than a minute) shows
// the search running.
const std::vector<std::string> kLongPlan = {"plan", "--topology",    kTopology, "--stages",
                                            "8",    "--replicas",    "8",       "--threads",
                                            "1",    "--evaluations", "10000000"};
const std::string kRunning = "evaluations a second";

std::string shown(const Interrupted& r) {
  return "\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
}

TEST(TesselPlanInterrupt, CtrlCPrintsTheBestPlacementSoFarAsJson) {
  std::vector<std::string> args = kLongPlan;
  args.insert(args.end(), {"--format", "json"});
  const Interrupted r = interrupt_tessel(args, kRunning);
  ASSERT_TRUE(r.started) << "the search never said it was running" << shown(r);
  ASSERT_FALSE(r.timed_out) << "still running 60 s after SIGINT" << shown(r);
  ASSERT_TRUE(WIFEXITED(r.raw_status)) << "ended by signal " << WTERMSIG(r.raw_status) << shown(r);
  EXPECT_EQ(WEXITSTATUS(r.raw_status), 130) << shown(r);
  EXPECT_NE(r.err.find("tessel plan: interrupted after "), std::string::npos) << shown(r);
  EXPECT_NE(r.err.find(" of 10000000 evaluations"), std::string::npos) << shown(r);
  EXPECT_NE(r.err.find("the best placement found so far"), std::string::npos) << shown(r);
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << shown(r);

  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << shown(r);
  EXPECT_EQ(j["interrupted"], true);
  const long evaluations = j["evaluations"].get<long>();
  EXPECT_GT(evaluations, 0);
  EXPECT_LT(evaluations, 10000000);
  EXPECT_EQ(j["pipelines"].size(), 8u);

  // The placement is whole and valid: `tessel simulate` checks it and runs it.
  const std::string file = ::testing::TempDir() + "/interrupted-plan.json";
  std::ofstream(file) << r.out;
  const std::string cmd = std::string(TESSEL_BINARY) + " simulate --topology " + kTopology +
                          " --stages 8 --replicas 8 --placement " + file + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_NE(output.find("iteration: simulated"), std::string::npos) << output;
}

TEST(TesselPlanInterrupt, CtrlCWritesTheTableToTheOutputFile) {
  const std::string file = ::testing::TempDir() + "/interrupted-plan.txt";
  std::remove(file.c_str());
  std::vector<std::string> args = kLongPlan;
  args.insert(args.end(), {"--output", file});
  const Interrupted r = interrupt_tessel(args, kRunning);
  ASSERT_TRUE(r.started) << shown(r);
  ASSERT_FALSE(r.timed_out) << shown(r);
  ASSERT_TRUE(WIFEXITED(r.raw_status)) << shown(r);
  EXPECT_EQ(WEXITSTATUS(r.raw_status), 130) << shown(r);
  EXPECT_NE(r.err.find("is written to " + file), std::string::npos) << shown(r);
  std::ifstream in(file);
  const std::string table((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(table.find("(interrupted: the best placement found so far)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("predicted iteration"), std::string::npos) << table;
}

}  // namespace
