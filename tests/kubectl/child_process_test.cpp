// The process runner the kubectl tests rely on to never hang: output capture, exit codes,
// deadlines, stopping a long-running command, and a clear error for a missing program.
#include "tests/kubectl/child_process.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

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

TEST(ChildProcessTest, KillsTheWholeProcessGroupAtTheDeadline) {
  // The shell's child (sleep) holds the pipes too; it must die with the shell.
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult result =
      run_process({"sh", "-c", "echo started; sleep 30"}, milliseconds(300));
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.exit_code, 128 + 9);  // SIGKILL
  EXPECT_EQ(result.out, "started\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
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
