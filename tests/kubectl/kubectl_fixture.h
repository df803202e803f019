// What every test of the real kubectl shares: the cluster of tests/support/test_cluster.h (the
// API test server, or the real cluster TESSEL_TEST_KUBECONFIG names), a namespace, a work
// folder, kubectl pointed at them, and readers of kubectl's printed tables. Tests skip visibly
// when no kubectl is on PATH.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/kubectl/child_process.h"
#include "tests/kubectl/kubectl.h"
#include "tests/support/test_cluster.h"

namespace tessel::testing {

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// The printed table's rows (after the header) whose first column is `name`, split into words.
inline std::vector<std::vector<std::string>> rows_named(const std::string& output,
                                                        const std::string& name) {
  std::vector<std::vector<std::string>> rows;
  for (const std::string& line : lines_of(output)) {
    std::vector<std::string> words = words_of(line);
    if (!words.empty() && words[0] == name) rows.push_back(std::move(words));
  }
  return rows;
}

inline std::string random_name(const std::string& prefix) {
  std::random_device device;
  return prefix + "-" + std::to_string(device() % 1000000);
}

class KubectlFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!find_on_path("kubectl")) GTEST_SKIP() << "no kubectl on PATH";
    cluster_ = std::make_unique<TestCluster>(server_options());
    work_dir_ = std::filesystem::temp_directory_path() / random_name("tessel-kubectl-test");
    std::filesystem::create_directories(work_dir_);
    kubectl_ = std::make_unique<Kubectl>(cluster_->kubeconfig_path(), namespace_name(),
                                         (work_dir_ / "cache").string());
  }

  void TearDown() override {
    if (!work_dir_.empty()) std::filesystem::remove_all(work_dir_);
  }

  // The test server's options (unused on a real cluster).
  virtual ApiTestServerOptions server_options() const { return {}; }

  const std::string& namespace_name() const { return cluster_->namespace_name(); }

  // Runs kubectl and expects it to succeed.
  std::string kubectl_ok(const std::vector<std::string>& args) {
    const ProcessResult result = kubectl_->run(args);
    EXPECT_EQ(result.exit_code, 0) << describe(result);
    return result.out;
  }

  // Runs kubectl and expects it to fail with exit code 1 (what kubectl returns for an error
  // answer); returns stderr.
  std::string kubectl_fails(const std::vector<std::string>& args) {
    const ProcessResult result = kubectl_->run(args);
    EXPECT_EQ(result.exit_code, 1) << describe(result);
    EXPECT_FALSE(result.timed_out) << describe(result);
    return result.err;
  }

  std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = (work_dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  std::unique_ptr<TestCluster> cluster_;
  std::filesystem::path work_dir_;
  std::unique_ptr<Kubectl> kubectl_;
};

}  // namespace tessel::testing
