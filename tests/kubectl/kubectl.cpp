#include "tests/kubectl/kubectl.h"

#include <utility>

namespace tessel::testing {

Kubectl::Kubectl(std::string kubeconfig_path, std::string namespace_name, std::string cache_dir)
    : kubeconfig_path_(std::move(kubeconfig_path)),
      namespace_(std::move(namespace_name)),
      cache_dir_(std::move(cache_dir)) {}

std::vector<std::string> Kubectl::command_line(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"kubectl",  "--kubeconfig", kubeconfig_path_, "--namespace",
                                   namespace_, "--cache-dir",  cache_dir_};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

ProcessResult Kubectl::run(const std::vector<std::string>& args,
                           std::chrono::milliseconds timeout) const {
  return run_process(command_line(args), timeout);
}

std::unique_ptr<ChildProcess> Kubectl::start(const std::vector<std::string>& args) const {
  return std::make_unique<ChildProcess>(command_line(args));
}

std::string describe(const ProcessResult& result) {
  std::string text = "exit code " + std::to_string(result.exit_code);
  if (result.timed_out) text += " (killed: timed out)";
  return text + "\n--- stdout ---\n" + result.out + "--- stderr ---\n" + result.err;
}

}  // namespace tessel::testing
