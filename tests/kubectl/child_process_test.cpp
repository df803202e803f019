// The process runner the kubectl tests rely on to never hang: output capture, exit codes,
// deadlines, stopping a long-running command, and a clear error for a missing program.
#include "tests/kubectl/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace tessel::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(ChildProcessTest, CapturesStdoutStderrAndTheExitCode) {
  const ProcessResult result =
      run_process({"sh", "-c", "echo out; echo err >&2; exit 3"}, seconds(10));
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.out, "out\n");
  EXPECT_EQ(result.err, "err\n");
}

// Whether `pid` has ended: gone, or a zombie its new parent has not reaped yet.
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string fields;
  if (!std::getline(stat, fields)) return true;
  const size_t after_name = fields.rfind(')');
  return after_name == std::string::npos || fields.substr(after_name + 2, 1) == "Z";
}

TEST(ChildProcessTest, KillsTheWholeProcessGroupAtTheDeadline) {
  // The shell's child (sleep) holds the pipes too; it must die with the shell.
  const ProcessResult result =
      run_process({"sh", "-c", "echo started; sleep 30 & echo $!; wait"}, milliseconds(300));
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.exit_code, 128 + 9);  // SIGKILL
  ASSERT_TRUE(result.out.starts_with("started\n")) << result.out;
  const pid_t sleeper = std::stoi(result.out.substr(std::string("started\n").size()));
  // Killed, not left to run out its 30 s (a generous wait for the kernel to finish the kill).
  const auto give_up = std::chrono::steady_clock::now() + seconds(10);
  while (!ended(sleeper) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(ended(sleeper)) << "sleep (pid " << sleeper << ") outlived the deadline";
  if (!ended(sleeper)) ::kill(sleeper, SIGKILL);
}

TEST(ChildProcessTest, ReadsUntilTheOutputShowsWhatItWaitsFor) {
  ChildProcess child({"sh", "-c", "echo first; read line; echo second"});  // stdin: /dev/null
  EXPECT_TRUE(child.read_until(
      [](const std::string& out) { return out.find("first\n") != std::string::npos; },
      seconds(10)));
  const ProcessResult result = child.wait(seconds(10));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.out, "first\nsecond\n");
}

TEST(ChildProcessTest, ReadUntilGivesUpWhenTheChildEndsWithoutIt) {
  ChildProcess child({"sh", "-c", "echo something-else"});
  EXPECT_FALSE(child.read_until(
      [](const std::string& out) { return out.find("wanted") != std::string::npos; }, seconds(10)));
}

TEST(ChildProcessTest, StopEndsALongRunningCommand) {
  ChildProcess child({"sh", "-c", "echo watching; exec sleep 30"});
  ASSERT_TRUE(child.read_until([](const std::string& out) { return !out.empty(); }, seconds(10)));
  const ProcessResult result = child.stop(seconds(5));
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 128 + 15);  // SIGTERM
}

TEST(ChildProcessTest, NamesAProgramThatCannotBeRun) {
  try {
    ChildProcess child({"tessel-no-such-program", "--flag"});
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& error) {
    EXPECT_EQ(std::string(error.what()),
              "cannot run `tessel-no-such-program --flag`: not found on $PATH");
  }
  EXPECT_EQ(find_on_path("tessel-no-such-program"), std::nullopt);
  EXPECT_NE(find_on_path("sh"), std::nullopt);

  try {
    ChildProcess child({"/etc/passwd"});
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& error) {
    EXPECT_EQ(std::string(error.what()), "cannot run `/etc/passwd`: Permission denied");
  }
}

}  // namespace
}  // namespace tessel::testing
