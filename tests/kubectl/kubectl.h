// The real `kubectl` on $PATH, pointed at one cluster and namespace with a cache directory of
// its own (discovery and OpenAPI documents are cached there, as in a user's ~/.kube/cache), so
// that tests do not share, or read, anyone else's cache.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tests/kubectl/child_process.h"

namespace tessel::testing {

// How long one kubectl command may take before the test fails (it is then killed). Far above
// what a command needs against the test server; a real cluster may be slower.
inline constexpr std::chrono::seconds kKubectlTimeout{60};

class Kubectl {
 public:
  Kubectl(std::string kubeconfig_path, std::string namespace_name, std::string cache_dir);

  // `kubectl --kubeconfig K --namespace N --cache-dir C <args...>`.
  std::vector<std::string> command_line(const std::vector<std::string>& args) const;

  // Runs one command to completion.
  ProcessResult run(const std::vector<std::string>& args,
                    std::chrono::milliseconds timeout = kKubectlTimeout) const;

  // Starts a command that keeps running (`get -w`); the caller reads and stops it.
  std::unique_ptr<ChildProcess> start(const std::vector<std::string>& args) const;

 private:
  std::string kubeconfig_path_;
  std::string namespace_;
  std::string cache_dir_;
};

// A command's result for failure messages: exit code, stdout and stderr.
std::string describe(const ProcessResult& result);

}  // namespace tessel::testing
