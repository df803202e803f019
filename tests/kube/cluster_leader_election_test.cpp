// Leader election between two processes (tessel-leader-candidate) on one Lease of a cluster:
// after kill -9 of the leader the other takes over once the lease has expired, not before; a
// leader stopped cleanly releases the lease and the other takes over long before the lease would
// expire. How soon after expiry a successor takes over is the elector's arithmetic, checked on a
// fake clock in leader_election_test.cpp
// (SuccessorTakesOverAfterLeaseDurationWithCallbacksInOrder): no upper bound on the wall clock
// here, where a loaded machine may delay any process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/leader_election.h"
#include "kube/resource.h"
#include "tests/kube/cluster_test_support.h"
#include "tests/support/test_cluster.h"

extern char** environ;

namespace tessel::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using std::chrono::system_clock;
using tessel::testing::TestCluster;
using testing::kClusterTimeout;

// The candidate executable: the environment variable wins over the build's definition.
std::string candidate_binary() {
  if (const char* path = std::getenv("TESSEL_LEADER_CANDIDATE"); path && *path) return path;
#ifdef TESSEL_LEADER_CANDIDATE
  return TESSEL_LEADER_CANDIDATE;
#else
  return "";
#endif
}

// A tessel-leader-candidate child process whose stdout lines the test reads as they come.
class Candidate {
 public:
  Candidate(const TestCluster& cluster, const std::string& lease, const std::string& identity,
            int lease_seconds, double renew_deadline, double retry_period) {
    const std::vector<std::string> arguments = {candidate_binary(),
                                                "--kubeconfig",
                                                cluster.kubeconfig_path(),
                                                "--namespace",
                                                cluster.namespace_name(),
                                                "--lease",
                                                lease,
                                                "--identity",
                                                identity,
                                                "--lease-duration",
                                                std::to_string(lease_seconds),
                                                "--renew-deadline",
                                                std::to_string(renew_deadline),
                                                "--retry-period",
                                                std::to_string(retry_period)};
    std::vector<char*> argv;
    for (const std::string& argument : arguments)
      argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    const int spawned = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_fds[1]);
    output_ = pipe_fds[0];
    if (spawned != 0) {
      ::close(output_);
      throw std::runtime_error("cannot start " + arguments[0] + ": " + std::strerror(spawned));
    }
  }

  ~Candidate() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(output_);
  }

  Candidate(const Candidate&) = delete;
  Candidate& operator=(const Candidate&) = delete;

  // Reads lines until `line` comes; returns when it arrived (wall clock, to compare with the
  // lease's MicroTimes), nullopt after kClusterTimeout or at the end of the output.
  std::optional<system_clock::time_point> wait_for_line(const std::string& line) {
    const auto deadline = steady_clock::now() + kClusterTimeout;
    for (;;) {
      if (const auto end = buffer_.find('\n'); end != std::string::npos) {
        const std::string next = buffer_.substr(0, end);
        buffer_.erase(0, end + 1);
        if (next == line) return system_clock::now();
        continue;
      }
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd readable{output_, POLLIN, 0};
      if (::poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[256];
      const ssize_t got = ::read(output_, chunk, sizeof chunk);
      if (got <= 0) return std::nullopt;  // the process closed its output
      buffer_.append(chunk, static_cast<std::size_t>(got));
    }
  }

  void signal(int number) { ::kill(pid_, number); }

  // Waits for the process to exit; its exit status, or -signal when a signal ended it.
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int output_ = -1;
  std::string buffer_;
};

class ClusterLeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (candidate_binary().empty()) {
      FAIL() << "the path of tessel-leader-candidate is unknown: build the test with "
                "-DTESSEL_LEADER_CANDIDATE=\"<path>\" or set the environment variable "
                "TESSEL_LEADER_CANDIDATE";
    }
  }

  // The Lease's leader election record as the server holds it.
  LeaseRecord lease(const std::string& name) {
    static const ResourceInfo leases =
        *ResourceRegistry().find_resource("coordination.k8s.io", "leases");
    return LeaseRecord::from_lease(cluster_.admin().get(leases, cluster_.namespace_name(), name));
  }

  TestCluster cluster_;
};

TEST_F(ClusterLeaderElectionTest, KilledLeaderIsReplacedOnceTheLeaseExpires) {
  constexpr int kLeaseSeconds = 2;
  constexpr auto kLease = std::chrono::seconds(kLeaseSeconds);
  Candidate a(cluster_, "failover", "a", kLeaseSeconds, 1.5, 0.2);
  ASSERT_TRUE(a.wait_for_line("leading a"));
  Candidate b(cluster_, "failover", "b", kLeaseSeconds, 1.5, 0.2);
  ASSERT_TRUE(b.wait_for_line("new leader a"));

  a.signal(SIGKILL);
  const auto killed = system_clock::now();
  EXPECT_EQ(a.wait(), -SIGKILL);
  // a's last renewal, which the lease shows until b takes it (a lease duration later).
  const LeaseRecord last = lease("failover");
  ASSERT_EQ(last.holder_identity, "a");
  const auto renewed = parse_micro_time(last.renew_time);
  const auto took_over = b.wait_for_line("leading b");
  ASSERT_TRUE(took_over) << "b never took over";
  const auto since_renewal = *took_over - renewed;
  RecordProperty(
      "takeover_after_kill_ms",
      static_cast<int>(std::chrono::duration_cast<milliseconds>(*took_over - killed).count()));

  // b takes the lease only once it has gone a whole lease duration without a renewal (the
  // candidates' clocks are this machine's; 5 ms for the steady clock drifting from the wall
  // clock that MicroTimes are written in).
  EXPECT_GE(since_renewal, kLease - milliseconds(5));

  const LeaseRecord record = lease("failover");
  EXPECT_EQ(record.holder_identity, "b");
  EXPECT_EQ(record.lease_duration_seconds, kLeaseSeconds);
  EXPECT_EQ(record.lease_transitions, 1);
}

TEST_F(ClusterLeaderElectionTest, CleanShutdownHandsOverAtOnce) {
  // A lease longer than wait_for_line waits (kClusterTimeout): b can take over within that wait
  // only because a released the lease, never because it expired.
  constexpr int kLeaseSeconds = 60;
  static_assert(std::chrono::seconds(kLeaseSeconds) > kClusterTimeout);
  Candidate a(cluster_, "handover", "a", kLeaseSeconds, 1.5, 0.2);
  ASSERT_TRUE(a.wait_for_line("leading a"));
  Candidate b(cluster_, "handover", "b", kLeaseSeconds, 1.5, 0.2);
  ASSERT_TRUE(b.wait_for_line("new leader a"));

  a.signal(SIGTERM);
  EXPECT_TRUE(a.wait_for_line("stopped leading a"));
  EXPECT_EQ(a.wait(), 0);
  const auto took_over = b.wait_for_line("leading b");
  ASSERT_TRUE(took_over) << "b did not take over the released lease";

  const LeaseRecord record = lease("handover");
  EXPECT_EQ(record.holder_identity, "b");
  EXPECT_EQ(record.lease_transitions, 1);

  // And b, stopped in turn, leaves the lease released.
  b.signal(SIGTERM);
  EXPECT_TRUE(b.wait_for_line("stopped leading b"));
  EXPECT_EQ(b.wait(), 0);
  EXPECT_EQ(lease("handover").holder_identity, "");
}

}  // namespace
}  // namespace tessel::kube
