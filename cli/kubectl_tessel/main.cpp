// kubectl-tessel: the kubectl plugin (kubectl runs it as `kubectl tessel ...` when it is on
// $PATH). It reads the clusters as kubectl does (--kubeconfig, $KUBECONFIG, ~/.kube/config,
// --context, -n/--namespace) and shows a TrainingJob's placement, its progress, or the links
// the probers measured between the member clusters' GPU nodes.
#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>

#include "cli/kubectl_tessel/cluster_reads.h"
#include "cli/kubectl_tessel/placement_view.h"
#include "cli/kubectl_tessel/plugin_error.h"
#include "cli/kubectl_tessel/top_view.h"
#include "cli/kubectl_tessel/yaml_output.h"
#include "kube/api_error.h"
#include "kube/config.h"

namespace {

using namespace tessel::kubectl_tessel;
using nlohmann::json;

struct Options {
  std::string kubeconfig, context, namespace_name, output = "text";
  std::string operator_namespace = "tessel-system";
  std::string job, cluster;
  bool rtt = false;
  int request_timeout_s = 30;
};

void print(const json& view, const std::string& output, const std::string& text) {
  if (output == "json") {
    std::cout << view.dump(2) << "\n";
  } else if (output == "yaml") {
    std::cout << to_yaml(view);
  } else {
    std::cout << text;
  }
}

int run(const std::string& command, const Options& o) {
  const tessel::kube::ClusterConfig config =
      tessel::kube::load_default_config(o.kubeconfig, o.context);
  tessel::kube::ClientOptions client_options;
  client_options.user_agent = "kubectl-tessel";
  client_options.request_timeout = std::chrono::seconds(o.request_timeout_s);
  client_options.backoff.steps = 2;  // a person is waiting: fail fast, say why
  const std::shared_ptr<tessel::kube::Client> hub =
      tessel::kube::Client::from_config(config, client_options);
  const std::string ns = o.namespace_name.empty() ? config.default_namespace : o.namespace_name;
  if (command == "placement") {
    const json view = placement_view(read_job(*hub, ns, o.job));
    print(view, o.output, o.output == "text" ? render_placement(view) : "");
  } else if (command == "top") {
    const json view = top_view(read_job(*hub, ns, o.job));
    print(view, o.output, o.output == "text" ? render_top(view) : "");
  } else {
    const json view = links_view(read_members(*hub, o.operator_namespace, client_options),
                                 o.cluster, std::chrono::system_clock::now());
    print(view, o.output, o.output == "text" ? render_links(view, o.rtt) : "");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kubectl tessel: a tessel TrainingJob's placement and progress, and the links the "
      "probers measured between the member clusters' GPU nodes",
      "kubectl-tessel"};
  app.require_subcommand(1);
  Options o;
  app.add_option("--kubeconfig", o.kubeconfig,
                 "Kubeconfig of the hub; empty: $KUBECONFIG, ~/.kube/config (as kubectl)");
  app.add_option("--context", o.context, "The kubeconfig context; empty: its current context");
  app.add_option("-n,--namespace", o.namespace_name,
                 "The TrainingJob's namespace; empty: the context's");
  app.add_option("-o,--output", o.output, "text, json or yaml")
      ->check(CLI::IsMember({"text", "json", "yaml"}));
  app.add_option("--request-timeout", o.request_timeout_s, "Seconds one API request may take")
      ->check(CLI::Range(1, 3600));
  auto* placement =
      app.add_subcommand("placement",
                         "The stage x replica grid (cluster, node, GPU; layers per stage) and the "
                         "links between consecutive stages and data-parallel neighbours");
  placement->add_option("JOB", o.job, "The TrainingJob's name")->required();
  auto* top = app.add_subcommand(
      "top", "Per stage: step time, bubble and network wait; the job's step, loss, tokens/s, ETA");
  top->add_option("JOB", o.job, "The TrainingJob's name")->required();
  auto* links = app.add_subcommand(
      "links",
      "The bandwidth matrix the probers measured between the member clusters' GPU "
      "nodes (rows: from, columns: to)");
  links->add_option("--cluster", o.cluster, "Only the rows of this member cluster's nodes");
  links->add_flag("--rtt", o.rtt, "Also the median round trips (ms)");
  links->add_option("--operator-namespace", o.operator_namespace,
                    "The operator's namespace in the hub, where the MemberClusters' kubeconfig "
                    "Secrets are");
  for (CLI::App* sub : {placement, top, links}) sub->fallthrough();
  CLI11_PARSE(app, argc, argv);
  const std::string command = app.get_subcommands().front()->get_name();
  try {
    return run(command, o);
  } catch (const PluginError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const tessel::kube::KubeConfigError& e) {
    std::cerr << "error: " << e.what() << "\n";
  } catch (const tessel::kube::ApiError& e) {
    std::cerr << "error: the hub's API server refused: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
  }
  return 1;
}
