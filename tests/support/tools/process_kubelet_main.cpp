// tessel-process-kubelet: plays the kubelet of one or more Nodes against the API server named by
// a kubeconfig, running their Pods' containers as local processes (tests/support/
// process_kubelet.h), until SIGINT or SIGTERM, then kills every process it started.
//
//   tessel-process-kubelet --kubeconfig kc.yaml --node gpu-node-a --node gpu-node-b --gpus 8
//       --label nvidia.com/gpu.product=NVIDIA-H200 --image tessel/stage=build/tessel-stage
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <exception>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/config.h"
#include "tests/support/process_kubelet.h"

namespace {

// "key=value" -> {key, value}; throws naming the flag and the text.
std::pair<std::string, std::string> split_pair(const std::string& text, const std::string& flag) {
  const std::size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw CLI::ValidationError(flag, "\"" + text + "\" is not KEY=VALUE");
  }
  return {text.substr(0, equals), text.substr(equals + 1)};
}

std::map<std::string, std::string> pairs(const std::vector<std::string>& texts,
                                         const std::string& flag) {
  std::map<std::string, std::string> out;
  for (const std::string& text : texts) out.insert(split_pair(text, flag));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Plays the kubelet of Nodes, running their Pods as local processes",
               "tessel-process-kubelet"};
  std::string kubeconfig;
  std::string context;
  std::vector<std::string> node_names;
  int gpus = 0;
  std::vector<std::string> labels;
  std::vector<std::string> annotations;
  std::vector<std::string> images;
  tessel::testing::ProcessKubeletOptions options;
  int backoff_ms = static_cast<int>(options.restart_backoff_initial.count());
  app.add_option("--kubeconfig", kubeconfig, "kubeconfig of the API server")->required();
  app.add_option("--context", context, "kubeconfig context (default: the current one)");
  app.add_option("--node", node_names, "a Node to play (repeat for several)")->required();
  app.add_option("--gpus", gpus, "nvidia.com/gpu capacity of each node")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--label", labels, "KEY=VALUE label of each node (repeatable)");
  app.add_option("--annotation", annotations, "KEY=VALUE annotation of each node (repeatable)");
  app.add_option("--image", images,
                 "IMAGE=PATH: the entrypoint of an image, for containers without a command");
  app.add_option("--work-dir", options.work_dir, "pod directories and container logs");
  app.add_option("--address", options.address, "InternalIP of the nodes and IP of the pods");
  app.add_option("--restart-backoff-ms", backoff_ms, "first crash-loop back-off")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  // Signals are taken by sigwait below; every thread started from here inherits the mask
  // (the containers get a clean one).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  try {
    const auto node_labels = pairs(labels, "--label");
    const auto node_annotations = pairs(annotations, "--annotation");
    options.image_entrypoints = pairs(images, "--image");
    options.restart_backoff_initial = std::chrono::milliseconds(backoff_ms);
    for (const std::string& name : node_names) {
      tessel::testing::ProcessNodeOptions node;
      node.name = name;
      node.gpus = gpus;
      node.labels = node_labels;
      node.annotations = node_annotations;
      options.nodes.push_back(node);
    }
    const auto config = tessel::kube::load_kubeconfig(kubeconfig, context);
    tessel::kube::ClientOptions client_options;
    client_options.user_agent = "tessel-process-kubelet";
    client_options.qps = 50;
    client_options.burst = 100;
    auto client = tessel::kube::Client::from_config(config, client_options);
    tessel::testing::ProcessKubelet kubelet(client, options);
    kubelet.start();
    std::cerr << "tessel-process-kubelet: running " << node_names.size() << " node(s); work dir "
              << kubelet.work_dir() << "\n";
    int received = 0;
    sigwait(&signals, &received);
    std::cerr << "tessel-process-kubelet: " << (received == SIGINT ? "SIGINT" : "SIGTERM")
              << ": stopping\n";
    kubelet.stop();
  } catch (const CLI::Error& error) {
    return app.exit(error);
  } catch (const std::exception& error) {
    std::cerr << "tessel-process-kubelet: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
