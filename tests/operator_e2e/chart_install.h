// Installing tessel in an e2e run's clusters as a user does: `helm template` of a chart of helm/
// (tests/helm/helm_chart.h runs the real helm) applied with `kubectl apply --server-side` (the
// real kubectl), and the kubeconfigs that carry the chart's ServiceAccount tokens.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/config.h"
#include "tests/kubectl/kubectl.h"

namespace tessel::testing {

struct ChartRender {
  std::string chart;       // "tessel" (the hub's) or "tessel-member": helm/<chart>
  std::string release;     // the release name (cluster-scoped objects' names start with it)
  std::string namespace_;  // -n: the release namespace
  std::vector<std::string> set_values;  // each passed as --set key=value
  bool include_crds = false;            // --include-crds (the chart's crds/ folder)
  // Each passed as --set-json key=<JSON>, after set_values: typed values --set cannot give
  // (--set types integers and booleans only; 0.2 would be the string "0.2").
  std::vector<std::string> set_json_values;
};

// One document `helm template` printed: its text, which is what is applied (kubectl reads YAML
// 1.1, where helm's `defaultMode: 0440` is octal), and the object it holds, for the test to read.
struct RenderedObject {
  std::string text;
  nlohmann::json object;
};

// The objects `helm template` renders, in its order (empty documents dropped). Throws
// std::runtime_error with helm's output when helm fails.
std::vector<RenderedObject> render_chart(const ChartRender& render);

// `kubectl --kubeconfig <kubeconfig> apply --server-side --field-manager=helm -f <path>` of
// `objects`' texts, written to `path` as one YAML stream; no --namespace, as a user pipes
// `helm template -n NS` to kubectl: each object lands in the namespace it names (a chart may put
// some in another, e.g. Events' rights in default). Returns kubectl's output; throws
// std::runtime_error with it when it fails.
std::string apply_server_side(const std::string& kubeconfig, const std::string& cache_dir,
                              const std::vector<RenderedObject>& objects, const std::string& path);

// The objects of this kind; the one object of this kind (and name, when given): throws
// std::runtime_error naming the kind when there is none or more than one.
std::vector<nlohmann::json> objects_of_kind(const std::vector<RenderedObject>& objects,
                                            const std::string& kind);
nlohmann::json the_object(const std::vector<RenderedObject>& objects, const std::string& kind,
                          const std::string& name = "");

// Deletes the cluster-scoped objects of `objects` but CustomResourceDefinitions (which others'
// objects may use) with `kubectl delete --ignore-not-found --wait=false`; the namespaced ones go
// with the run's namespace. Best effort: returns kubectl's output, failures included.
std::string delete_cluster_scoped(const Kubectl& kubectl,
                                  const std::vector<RenderedObject>& objects);

// A kubeconfig for `cluster`'s server (its CA embedded) authenticating with `token` alone, context
// namespace `namespace_`: what stands in for a pod's service-account files, or what a
// MemberCluster's Secret holds.
std::string token_kubeconfig(const kube::ClusterConfig& cluster, const std::string& token,
                             const std::string& namespace_);

// `kubectl create token <service_account>` in kubectl's namespace (a TokenRequest): the token.
// Throws std::runtime_error with kubectl's output when it fails.
std::string create_token(const Kubectl& kubectl, const std::string& service_account);

}  // namespace tessel::testing
