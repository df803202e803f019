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
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/tessel_run.h"

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

  const tessel::cli_testing::TesselRun run =
      tessel::cli_testing::run_tessel(args, {dir.string(), c.timeout_s, c.fsize_limit, {}});
  const std::string shown = run.shown();
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
