// The hostile-input corpus: every case in tests/cli/hostile/*.yaml runs the real `tessel`
// binary in a fresh folder and must end the way the case says: by default a clean non-zero
// exit (never a signal, never past its time bound) with every named substring in its standard
// error, files it names left byte-identical, paths it names not created. Whatever the case,
// no run may show a crash's marks (an uncaught exception, std::bad_alloc). A case file is a
// list of cases:
//   - name: plan-replicas-overflow          # unique across the corpus
//     why: the defect this case holds shut
//     args: [plan, --topology, "{src}/examples/topologies/5-worldwide-geo.yaml", ...]
//     files: {topo.yaml: "..."}             # written into the case's folder first
//     copy: {job.yaml: examples/local/fables.yaml}   # copied from the source tree
//     exit: 0                               # when the correct answer is success
//     stderr: ["--replicas", "at most"]     # all must appear (stdout: the same for stdout)
//     unchanged: [topo.yaml]                # byte-identical after the run
//     absent: ["../escaped"]                # must not exist after the run
//     timeout_s: 60                         # the bound (default 60)
//     fsize_limit: 4096                     # RLIMIT_FSIZE for the run: a full disk
// {src} is the source tree, {dir} the case's folder; both may appear in args and stderr.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct HostileCase {
  std::string file;  // the corpus file it came from
  std::string name;
  std::vector<std::string> args;
  std::map<std::string, std::string> files;
  std::map<std::string, std::string> copies;
  int exit = -1;  // -1: any non-zero exit code
  std::vector<std::string> stderr_parts;
  std::vector<std::string> stdout_parts;
  std::vector<std::string> unchanged;
  std::vector<std::string> absent;
  double timeout_s = 60;
  long fsize_limit = 0;
};

void PrintTo(const HostileCase& c, std::ostream* out) { *out << c.file << ": " << c.name; }

std::vector<std::string> strings(const YAML::Node& node) {
  std::vector<std::string> out;
  if (node) {
    for (const auto& item : node) out.push_back(item.as<std::string>());
  }
  return out;
}

std::map<std::string, std::string> mapping(const YAML::Node& node) {
  std::map<std::string, std::string> out;
  if (node) {
    for (const auto& item : node) out[item.first.as<std::string>()] = item.second.as<std::string>();
  }
  return out;
}

std::vector<HostileCase> load_corpus() {
  std::vector<HostileCase> cases;
  std::set<std::string> names;
  std::vector<fs::path> files;
  for (const auto& entry :
       fs::directory_iterator(std::string(TESSEL_SOURCE_DIR) + "/tests/cli/hostile")) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& file : files) {
    for (const YAML::Node& node : YAML::LoadFile(file.string())) {
      HostileCase c;
      c.file = file.filename().string();
      c.name = node["name"].as<std::string>();
      if (!names.insert(c.name).second) {
        throw std::runtime_error(file.string() + ": case name '" + c.name + "' used twice");
      }
      if (!node["why"]) throw std::runtime_error(file.string() + ": " + c.name + ": no why");
      c.args = strings(node["args"]);
      c.files = mapping(node["files"]);
      c.copies = mapping(node["copy"]);
      if (node["exit"]) c.exit = node["exit"].as<int>();
      c.stderr_parts = strings(node["stderr"]);
      c.stdout_parts = strings(node["stdout"]);
      c.unchanged = strings(node["unchanged"]);
      c.absent = strings(node["absent"]);
      if (node["timeout_s"]) c.timeout_s = node["timeout_s"].as<double>();
      if (node["fsize_limit"]) c.fsize_limit = node["fsize_limit"].as<long>();
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::string substitute(std::string text, const fs::path& dir) {
  const std::map<std::string, std::string> values = {{"{src}", TESSEL_SOURCE_DIR},
                                                     {"{dir}", dir.string()}};
  for (const auto& [key, value] : values) {
    for (size_t at = text.find(key); at != std::string::npos;
         at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  }
  return text;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Run {
  bool timed_out = false;
  int raw_status = 0;
  std::string out;
  std::string err;
  double seconds = 0;
};

// Runs the tessel binary with args in dir, in its own process group, killed at the bound.
Run run_tessel(const std::vector<std::string>& args, const fs::path& dir, double timeout_s,
               long fsize_limit) {
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> argv_text = {TESSEL_BINARY};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    if (chdir(dir.c_str()) != 0) _exit(126);
    if (fsize_limit > 0) {
      signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG, as a full disk does
      rlimit limit{static_cast<rlim_t>(fsize_limit), static_cast<rlim_t>(fsize_limit)};
      setrlimit(RLIMIT_FSIZE, &limit);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  close(out_pipe[1]);
  close(err_pipe[1]);
  Run run;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&run.out, &run.err};
  int open_pipes = 2;
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  while (open_pipes > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(std::min<long>(left.count(), 1000))) < 0 && errno != EINTR)
      break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
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
  waitpid(pid, &run.raw_status, 0);
  kill(-pid, SIGKILL);  // whatever it started and left behind
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

class HostileInputs : public testing::TestWithParam<HostileCase> {};

TEST_P(HostileInputs, EndsCleanly) {
  const HostileCase& c = GetParam();
  const fs::path dir =
      fs::temp_directory_path() / ("tessel-hostile-" + std::to_string(getpid())) / c.name / "work";
  fs::remove_all(dir.parent_path());
  fs::create_directories(dir);
  for (const auto& [name, text] : c.files) {
    fs::create_directories((dir / name).parent_path());
    std::ofstream(dir / name, std::ios::binary) << substitute(text, dir);
  }
  for (const auto& [name, from] : c.copies) {
    fs::create_directories((dir / name).parent_path());
    fs::copy_file(fs::path(TESSEL_SOURCE_DIR) / from, dir / name);
  }
  std::map<std::string, std::string> before;
  for (const std::string& name : c.unchanged) before[name] = read_file(dir / name);
  std::vector<std::string> args;
  for (const std::string& a : c.args) args.push_back(substitute(a, dir));

  const struct Run run = run_tessel(args, dir, c.timeout_s, c.fsize_limit);
  const std::string shown = "\n--- stdout\n" + run.out + "\n--- stderr\n" + run.err;
  ASSERT_FALSE(run.timed_out) << "still running after " << c.timeout_s << " s" << shown;
  ASSERT_TRUE(WIFEXITED(run.raw_status))
      << "killed by signal " << WTERMSIG(run.raw_status) << shown;
  const int code = WEXITSTATUS(run.raw_status);
  if (c.exit < 0) {
    EXPECT_NE(code, 0) << shown;
  } else {
    EXPECT_EQ(code, c.exit) << shown;
  }
  for (const char* crash : {"terminate called", "bad_alloc", "what():", "Segmentation"}) {
    EXPECT_EQ(run.err.find(crash), std::string::npos) << "a crash's mark: " << crash << shown;
  }
  for (const std::string& part : c.stderr_parts) {
    EXPECT_NE(run.err.find(substitute(part, dir)), std::string::npos)
        << "stderr lacks '" << part << "'" << shown;
  }
  for (const std::string& part : c.stdout_parts) {
    EXPECT_NE(run.out.find(substitute(part, dir)), std::string::npos)
        << "stdout lacks '" << part << "'" << shown;
  }
  for (const auto& [name, text] : before) {
    EXPECT_EQ(read_file(dir / name), text) << name << " was changed" << shown;
  }
  for (const std::string& name : c.absent) {
    EXPECT_FALSE(fs::exists(dir / name)) << name << " was created" << shown;
  }
  fs::remove_all(dir.parent_path());
}

std::string case_name(const testing::TestParamInfo<HostileCase>& info) {
  std::string name = info.param.name;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, HostileInputs, testing::ValuesIn(load_corpus()), case_name);

TEST(HostileCorpus, HoldsAtLeastSixtyCases) { EXPECT_GE(load_corpus().size(), 60u); }

}  // namespace
