// The process runner of the process kubelet: exit codes, logs, signals to the whole process
// group, nothing of the kubelet inherited, and nothing left behind.
#include "tests/support/process_kubelet_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/kubelet/process_waits.h"

namespace tessel::testing {
namespace {

namespace fs = std::filesystem;

class ContainerProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tessel-kubelet-process-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    fifo_ = (dir_ / "fifo").string();
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ProcessSpec shell(const std::string& script) const {
    ProcessSpec spec;
    spec.executable = "/bin/sh";
    spec.arguments = {"sh", "-c", script};
    spec.environment = {"PATH=/usr/bin:/bin", "FIFO=" + fifo_};
    spec.working_directory = dir_.string();
    spec.log_path = (dir_ / "main.log").string();
    return spec;
  }

  std::string log() const {
    std::ifstream in(dir_ / "main.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // Runs to the end and returns how it ended.
  ProcessExit run(const ProcessSpec& spec) {
    ExitSignal exited;
    ContainerProcess process(spec, [&] { exited.notify(); });
    EXPECT_TRUE(exited.wait());
    return process.exit_status().value_or(ProcessExit{-1, 0, true, {}});
  }

  fs::path dir_;
  std::string fifo_;
};

TEST_F(ContainerProcessTest, ReportsExitCodeAndAppendsOutputToTheLog) {
  EXPECT_EQ(run(shell("echo out; echo err >&2; exit 3")).exit_code, 3);
  const ProcessExit second = run(shell("pwd; echo \"$FIFO\"; echo \"home=$HOME\""));
  EXPECT_EQ(second.exit_code, 0);
  EXPECT_EQ(second.signal, 0);
  EXPECT_EQ(log(), "out\nerr\n" + dir_.string() + "\n" + fifo_ + "\nhome=\n");
}

TEST_F(ContainerProcessTest, SignalledProcessReportsOneHundredTwentyEightPlusSignal) {
  ExitSignal exited;
  ContainerProcess process(shell("echo ready > \"$FIFO\"; exec sleep 1000"),
                           [&] { exited.notify(); });
  ASSERT_EQ(read_fifo(fifo_), "ready\n");
  process.signal_group(SIGTERM);
  ASSERT_TRUE(exited.wait());
  EXPECT_EQ(process.exit_status()->exit_code, 128 + SIGTERM);
  EXPECT_EQ(process.exit_status()->signal, SIGTERM);
}

TEST_F(ContainerProcessTest, SignalReachesTheWholeGroupAndItsOwnGroupOnly) {
  ExitSignal exited;
  ContainerProcess process(shell("sleep 1000 & echo $$ $! > \"$FIFO\"; wait"),
                           [&] { exited.notify(); });
  std::istringstream pids(read_fifo(fifo_));
  pid_t shell_pid = 0;
  pid_t child_pid = 0;
  pids >> shell_pid >> child_pid;
  ASSERT_GT(child_pid, 0);
  EXPECT_EQ(shell_pid, process.pid());
  EXPECT_EQ(::getpgid(child_pid), process.pid());
  EXPECT_NE(::getpgid(0), process.pid());
  process.signal_group(SIGKILL);
  ASSERT_TRUE(exited.wait());
  EXPECT_TRUE(wait_until_dead(child_pid));
}

TEST_F(ContainerProcessTest, LeftoversOfTheGroupDieWithTheMainProcess) {
  ExitSignal exited;
  ContainerProcess process(shell("sleep 1000 & echo $! > \"$FIFO\"; exit 0"),
                           [&] { exited.notify(); });
  const pid_t orphan = std::stoi(read_fifo(fifo_));
  ASSERT_TRUE(exited.wait());
  EXPECT_EQ(process.exit_status()->exit_code, 0);
  EXPECT_TRUE(wait_until_dead(orphan));
}

TEST_F(ContainerProcessTest, DestructorKillsAndReaps) {
  pid_t pid = 0;
  {
    ContainerProcess process(shell("trap '' TERM; echo ready > \"$FIFO\"; exec sleep 1000"), {});
    ASSERT_EQ(read_fifo(fifo_), "ready\n");
    pid = process.pid();
  }
  EXPECT_TRUE(is_dead(pid));  // reaped before the destructor returned
}

TEST_F(ContainerProcessTest, InheritsNoDescriptorAndNoSignalSetting) {
  const int leaked = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC
  ASSERT_GE(leaked, 3);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction previous {};
  ASSERT_EQ(::sigaction(SIGTERM, &ignore, &previous), 0);
  const ProcessExit exit =
      run(shell("ls /proc/self/fd | sort -n | tr '\\n' ' '; "
                "grep SigIgn /proc/self/status"));
  ::sigaction(SIGTERM, &previous, nullptr);
  ::close(leaked);
  EXPECT_EQ(exit.exit_code, 0);
  const std::string output = log();
  EXPECT_EQ(output.substr(0, output.find("SigIgn:")), "0 1 2 3 ");  // 3: ls's directory
  const std::string ignored = output.substr(output.find('\t') + 1);
  EXPECT_EQ((std::stoull(ignored, nullptr, 16) >> (SIGTERM - 1)) & 1, 0u) << output;
}

TEST(FindExecutableTest, SearchesThePathLikeExecvp) {
  EXPECT_EQ(find_executable("sh", "/nonexistent:/bin:/usr/bin"), "/bin/sh");
  EXPECT_EQ(find_executable("./tool", "/bin"), "./tool");
  EXPECT_THROW(find_executable("sh", "/nonexistent"), ProcessStartError);
  EXPECT_THROW(find_executable("", "/bin"), ProcessStartError);
}

TEST(ContainerProcessStartTest, MissingOrNonExecutableFileIsAStartError) {
  ProcessSpec spec;
  spec.executable = "/nonexistent/tool";
  spec.arguments = {"tool"};
  spec.working_directory = "/";
  spec.log_path = "/dev/null";
  try {
    ContainerProcess process(spec, {});
    FAIL() << "started";
  } catch (const ProcessStartError& error) {
    EXPECT_STREQ(error.what(), "exec: \"/nonexistent/tool\": no such file or directory");
  }
  spec.executable = "/etc/hostname";
  EXPECT_THROW(ContainerProcess(spec, {}), ProcessStartError);
}

TEST(ContainerProcessStartTest, AMissingNetworkNamespaceIsAStartErrorNamingIt) {
  ProcessSpec spec;
  spec.executable = "/bin/true";
  spec.arguments = {"true"};
  spec.working_directory = "/";
  spec.log_path = "/dev/null";
  spec.network_namespace = "tessel-no-such-netns";
  try {
    ContainerProcess process(spec, {});
    FAIL() << "started";
  } catch (const ProcessStartError& error) {
    EXPECT_STREQ(error.what(),
                 "failed to enter the network namespace tessel-no-such-netns: open "
                 "/var/run/netns/tessel-no-such-netns: no such file or directory");
  }
}

}  // namespace
}  // namespace tessel::testing
