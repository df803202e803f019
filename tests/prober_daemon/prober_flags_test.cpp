// The tessel-prober's flags: defaults (from the environment where the DaemonSet sets it), every
// bad value refused naming the flag, the value and the limit; --emulate-link parsed; the secret
// file read with clear errors that never show the secret; the binary's --help.
#include "noderuntime/prober/app/prober_flags.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "api/prober_peers.h"
#include "noderuntime/prober/app/emulated_link.h"

namespace tessel::prober {
namespace {

std::string test_environment(const char* name) {
  const std::string key = name;
  if (key == "NODE_NAME") return "gpu-node-1";
  if (key == "POD_NAMESPACE") return "probers";
  return "";
}

std::string empty_environment(const char*) { return ""; }

// Parses `args` (after the program name); returns the flags.
ProberFlags parse(std::initializer_list<std::string> args,
                  EnvironmentLookup environment = test_environment) {
  std::vector<std::string> storage = {"tessel-prober"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  ProberFlags flags;
  EXPECT_TRUE(parse_prober_flags(static_cast<int>(argv.size()), argv.data(), flags, environment));
  return flags;
}

std::string error_of(std::initializer_list<std::string> args,
                     EnvironmentLookup environment = test_environment) {
  try {
    parse(args, environment);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ProberFlags, DefaultsComeFromTheEnvironmentAndThePlan) {
  const ProberFlags flags = parse({});
  EXPECT_EQ(flags.node_name, "gpu-node-1");
  EXPECT_EQ(flags.namespace_name, "probers");
  EXPECT_EQ(flags.listen_host, "0.0.0.0");
  EXPECT_EQ(flags.listen_port, api::kDefaultProbePort);
  EXPECT_EQ(flags.secret_file, "/etc/tessel-prober/secret");
  EXPECT_EQ(flags.peer_selector, api::kProberSelector);
  EXPECT_EQ(flags.peers_configmap, api::kProberPeersConfigMap);
  EXPECT_DOUBLE_EQ(flags.budget, 0.01);
  EXPECT_EQ(flags.check_interval, std::chrono::seconds(60));
  EXPECT_EQ(flags.refresh_interval, std::chrono::seconds(1200));
  EXPECT_EQ(flags.peer_ttl, std::chrono::seconds(900));
  EXPECT_EQ(flags.max_listed_peers, 256u);
  EXPECT_DOUBLE_EQ(flags.link_capacity_gbps, 10);
  EXPECT_TRUE(flags.emulated_links.empty());
  EXPECT_EQ(flags.log_level, "info");

  // Without $POD_NAMESPACE: tessel-system; without $NODE_NAME the flag is required.
  EXPECT_EQ(parse({"--node-name", "n1"}, empty_environment).namespace_name, "tessel-system");
  EXPECT_NE(error_of({}, empty_environment).find("--node-name: empty and $NODE_NAME is unset"),
            std::string::npos);
}

TEST(ProberFlags, EveryFlagIsTaken) {
  const ProberFlags flags = parse({"--kubeconfig",       "/k",
                                   "--node-name",        "gpu-7.zone-a",
                                   "--namespace",        "ns-2",
                                   "--listen",           "[::1]:9000",
                                   "--secret-file",      "/s",
                                   "--peer-selector",    "app=p,tier in (a)",
                                   "--peers-configmap",  "peers",
                                   "--budget",           "0.05",
                                   "--check-interval",   "2m",
                                   "--refresh-interval", "1h",
                                   "--peer-ttl",         "600s",
                                   "--max-listed-peers", "10",
                                   "--link-capacity-gbps", "25",
                                   "--emulate-link",     "member-b/=0.2/40",
                                   "--emulate-link",     "gpu-=1/0.5",
                                   "--log-level",        "debug"});
  EXPECT_EQ(flags.kubeconfig, "/k");
  EXPECT_EQ(flags.node_name, "gpu-7.zone-a");
  EXPECT_EQ(flags.namespace_name, "ns-2");
  EXPECT_EQ(flags.listen_host, "::1");
  EXPECT_EQ(flags.listen_port, 9000);
  EXPECT_EQ(flags.secret_file, "/s");
  EXPECT_EQ(flags.peer_selector, "app=p,tier in (a)");
  EXPECT_EQ(flags.peers_configmap, "peers");
  EXPECT_DOUBLE_EQ(flags.budget, 0.05);
  EXPECT_EQ(flags.check_interval, std::chrono::seconds(120));
  EXPECT_EQ(flags.refresh_interval, std::chrono::seconds(3600));
  EXPECT_EQ(flags.peer_ttl, std::chrono::seconds(600));
  EXPECT_EQ(flags.max_listed_peers, 10u);
  EXPECT_DOUBLE_EQ(flags.link_capacity_gbps, 25);
  ASSERT_EQ(flags.emulated_links.size(), 2u);
  EXPECT_EQ(flags.emulated_links[0].prefix, "member-b/");
  EXPECT_DOUBLE_EQ(flags.emulated_links[0].shape.bytes_per_s, 0.2e9 / 8);
  EXPECT_DOUBLE_EQ(flags.emulated_links[0].shape.latency_s, 0.040);
  EXPECT_EQ(flags.emulated_links[1].prefix, "gpu-");
  EXPECT_EQ(flags.log_level, "debug");
}

TEST(ProberFlags, BadValuesAreRefusedNamingFlagValueAndLimit) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> expected;  // every one in the message
  };
  const std::vector<Case> cases = {
      {{"--node-name", "Gpu_1"}, {"--node-name", "'Gpu_1'", "DNS subdomain"}},
      {{"--namespace", "a.b"}, {"--namespace", "'a.b'", "63"}},
      {{"--listen", "0.0.0.0"}, {"--listen", "'0.0.0.0'", "HOST:PORT"}},
      {{"--listen", "0.0.0.0:0"}, {"--listen", "port 0", "1..65535"}},
      {{"--listen", "0.0.0.0:70000"}, {"--listen", "70000", "1..65535"}},
      {{"--listen", "h:7x"}, {"--listen", "'h:7x'"}},
      {{"--secret-file", ""}, {"--secret-file", "empty"}},
      {{"--peer-selector", ""}, {"--peer-selector", "empty"}},
      {{"--peer-selector", "a in (b"}, {"--peer-selector", "'a in (b'"}},
      {{"--peers-configmap", "Bad_Name"}, {"--peers-configmap", "'Bad_Name'"}},
      {{"--budget", "0"}, {"--budget", "0 is outside (0, 0.5]"}},
      {{"--budget", "0.6"}, {"--budget", "0.6 is outside (0, 0.5]"}},
      {{"--check-interval", "ten"}, {"--check-interval", "'ten'", "whole seconds"}},
      {{"--check-interval", "1.5"}, {"--check-interval", "'1.5'"}},
      {{"--check-interval", "0"}, {"--check-interval", "0s is outside 1s..86400s"}},
      {{"--check-interval", "2d"}, {"--check-interval", "'2d'"}},
      {{"--check-interval", "5", "--refresh-interval", "5s"},
       {"--refresh-interval", "5s is outside 10s..86400s"}},
      {{"--check-interval", "5m", "--refresh-interval", "1m"},
       {"--refresh-interval", "60s is outside 300s..86400s"}},
      {{"--refresh-interval", "25h"}, {"--refresh-interval", "90000s", "86400s"}},
      {{"--check-interval", "60", "--peer-ttl", "100"},
       {"--peer-ttl", "100s is outside 120s..86400s"}},
      {{"--max-listed-peers", "0"}, {"--max-listed-peers", "0 is outside 1..2000"}},
      {{"--link-capacity-gbps", "0"}, {"--link-capacity-gbps", "0 is outside 1e-06..100000"}},
      {{"--max-listed-peers", "2001"}, {"--max-listed-peers", "2001 is outside 1..2000"}},
      {{"--emulate-link", "a=1"}, {"--emulate-link", "'a=1'", "PREFIX=GBPS/MS"}},
      {{"--emulate-link", "a=x/1"}, {"--emulate-link", "GBPS 'x'", "Gbit/s"}},
      {{"--emulate-link", "a=-1/1"}, {"--emulate-link", "GBPS '-1'"}},
      {{"--emulate-link", "a=1e6/1"}, {"--emulate-link", "GBPS '1e6'", "100000"}},
      {{"--emulate-link", "a=1/-2"}, {"--emulate-link", "MS '-2'", "0..60000 ms"}},
      {{"--emulate-link", "a=1/nan"}, {"--emulate-link", "MS 'nan'"}},
      {{"--emulate-link", "a=1/1", "--emulate-link", "a=2/2"},
       {"--emulate-link", "'a' given twice"}},
      {{"--log-level", "loud"}, {"--log-level", "loud"}},
      {{"--no-such-flag"}, {"--no-such-flag"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> storage = {"tessel-prober"};
    storage.insert(storage.end(), c.args.begin(), c.args.end());
    std::vector<char*> argv;
    for (std::string& arg : storage) argv.push_back(arg.data());
    ProberFlags flags;
    std::string error = "(accepted)";
    try {
      parse_prober_flags(static_cast<int>(argv.size()), argv.data(), flags, test_environment);
    } catch (const std::invalid_argument& e) {
      error = e.what();
    }
    for (const std::string& part : c.expected) {
      EXPECT_NE(error.find(part), std::string::npos)
          << "args " << ::testing::PrintToString(c.args) << ": '" << part << "' not in: " << error;
    }
  }
}

TEST(EmulatedLink, LongestMatchingPrefixShapesAPeer) {
  const std::vector<EmulatedLink> links = {parse_emulated_link("member-b/=0.2/40"),
                                           parse_emulated_link("member-b/gpu-1=1/5"),
                                           parse_emulated_link("=0/2")};
  EXPECT_DOUBLE_EQ(emulated_shape(links, "member-b/gpu-1").latency_s, 0.005);
  EXPECT_DOUBLE_EQ(emulated_shape(links, "member-b/gpu-2").latency_s, 0.040);
  // The empty prefix matches every peer; GBPS 0 leaves the rate unlimited.
  EXPECT_DOUBLE_EQ(emulated_shape(links, "gpu-3").latency_s, 0.002);
  EXPECT_EQ(emulated_shape(links, "gpu-3").bytes_per_s, 0);
  EXPECT_FALSE(emulated_shape({links[0]}, "member-c/gpu-1").shaped());
  EXPECT_FALSE(emulated_shape({links[0]}, "member-b").shaped());  // shorter than the prefix
}

// A file of its own per test process (ctest runs cases as parallel processes).
class SecretFile : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("tessel-prober-flags-" + std::to_string(getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::string write(const std::string& name, const std::string& content) {
    const std::string path = (directory_ / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  static std::string error_of(const std::string& path) {
    try {
      read_probe_secret(path);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "(read)";
  }

  std::filesystem::path directory_;
};

TEST_F(SecretFile, IsReadWithoutItsTrailingNewline) {
  EXPECT_EQ(read_probe_secret(write("plain", "0123456789abcdef")), "0123456789abcdef");
  EXPECT_EQ(read_probe_secret(write("newline", "0123456789abcdef\n")), "0123456789abcdef");
  EXPECT_EQ(read_probe_secret(write("crlf", "0123456789abcdef\r\n")), "0123456789abcdef");
}

TEST_F(SecretFile, BadFilesGiveErrorsNamingTheFileNeverTheSecret) {
  const std::string missing = (directory_ / "missing").string();
  const std::string missing_error = error_of(missing);
  EXPECT_NE(missing_error.find("--secret-file " + missing + ": cannot read it"), std::string::npos)
      << missing_error;

  const std::string short_secret = "tooshort-secret";  // 15 bytes
  const std::string short_path = write("short", short_secret + "\n");
  const std::string short_error = error_of(short_path);
  EXPECT_NE(short_error.find("--secret-file " + short_path), std::string::npos) << short_error;
  EXPECT_NE(short_error.find("15 bytes"), std::string::npos) << short_error;
  EXPECT_NE(short_error.find("16 to 4096"), std::string::npos) << short_error;
  EXPECT_EQ(short_error.find(short_secret), std::string::npos) << "the secret was printed";

  const std::string empty_path = write("empty", "");
  EXPECT_NE(error_of(empty_path).find("0 bytes"), std::string::npos);

  const std::string long_path = write("long", std::string(5000, 'x'));
  const std::string long_error = error_of(long_path);
  EXPECT_NE(long_error.find("--secret-file " + long_path), std::string::npos) << long_error;
  EXPECT_EQ(long_error.find("xxxxxxxxxxxxxxxx"), std::string::npos) << "the secret was printed";

  if (geteuid() != 0) {  // root reads every file
    const std::string unreadable = write("unreadable", "0123456789abcdef");
    std::filesystem::permissions(unreadable, std::filesystem::perms::none);
    EXPECT_NE(error_of(unreadable).find("cannot read it"), std::string::npos);
  }
  // A directory is no secret file either.
  EXPECT_NE(error_of(directory_.string()).find("--secret-file " + directory_.string()),
            std::string::npos);
}

// The binary itself: --help lists every flag with its default; a bad flag exits 2 naming it.
std::pair<int, std::string> run_prober(const std::string& args) {
  const std::string command = std::string(TESSEL_PROBER_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer{};
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST(ProberBinary, HelpListsEveryFlagWithItsDefault) {
  const auto [code, help] = run_prober("--help");
  EXPECT_EQ(code, 0) << help;
  for (const char* flag : {"--kubeconfig", "--node-name", "--namespace", "--listen",
                           "--secret-file", "--peer-selector", "--peers-configmap", "--budget",
                           "--check-interval", "--refresh-interval", "--peer-ttl",
                           "--max-listed-peers", "--link-capacity-gbps", "--emulate-link",
                           "--log-level"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag << " missing from:\n" << help;
  }
  for (const char* value :
       {"0.0.0.0:7471", "/etc/tessel-prober/secret", "app.kubernetes.io/name=tessel-prober",
        "tessel-prober-peers", "0.01", "60s", "1200s", "900s", "256", "info"}) {
    EXPECT_NE(help.find(value), std::string::npos) << value << " missing from:\n" << help;
  }
}

TEST(ProberBinary, BadFlagExitsTwoNamingIt) {
  const auto [code, output] = run_prober("--node-name n1 --budget 2");
  EXPECT_EQ(code, 2) << output;
  EXPECT_NE(output.find("--budget: 2 is outside"), std::string::npos) << output;
  const auto [secret_code, secret_output] =
      run_prober("--node-name n1 --secret-file /nonexistent/tessel-prober-secret");
  EXPECT_EQ(secret_code, 1) << secret_output;
  EXPECT_NE(secret_output.find("--secret-file /nonexistent/tessel-prober-secret: cannot read it"),
            std::string::npos)
      << secret_output;
}

}  // namespace
}  // namespace tessel::prober
