// The clusters of an e2e run as a user sets them up (docs/install.md): a hub (tests/support/
// test_cluster.h: the API test server, or the real cluster TESSEL_TEST_KUBECONFIG names) where
// helm/tessel is installed (`helm template | kubectl apply --server-side`, chart_install.h), and
// member clusters (test servers, or the real clusters TESSEL_TEST_MEMBER_KUBECONFIGS names), each
// with helm/tessel-member installed the same way and registered in the hub with `kubectl apply` of
// a kubeconfig Secret and a MemberCluster, as examples/trainingjobs/member-a.yaml shows. The
// Secret's kubeconfig carries the token the member chart's token Secret holds (the member's
// token controller fills it in): the operator's identity there is the chart's ServiceAccount.
//
// Test servers run with Authorization::kRbac: the operator can do what the charts grant it and no
// more (the tests' own admin is in system:masters).
//
// Both charts are released as the run's id ("e2e-<suffix>"), so that their cluster-scoped objects
// (ClusterRoles, bindings, webhook configurations) are the run's own in a shared cluster.
//
// One namespace serves the run: the hub's test namespace holds the TrainingJobs and is the
// operator's namespace (the member kubeconfig Secrets, the Lease); the same namespace is created
// in every member, where the operator puts the jobs' pods. MemberClusters are cluster-scoped:
// they are named "<run id>-<letter>" and carry the run's label, so that jobs select only this
// run's members (spec.placement.clusterSelector) in a hub shared with others.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/kubectl/kubectl.h"
#include "tests/operator_e2e/chart_install.h"
#include "tests/support/test_cluster.h"

namespace tessel::testing {

// The operator's leader election in the e2e: short, so that a take-over fits in a test.
inline constexpr int kLeaseDurationSeconds = 6;
inline constexpr int kRenewDeadlineSeconds = 4;
inline constexpr int kRetryPeriodSeconds = 1;
// The port the hub chart gives the stage service (its default): stageService.advertise is
// "127.0.0.1:<it>", the replica pod's own address (operator_pod.h).
inline constexpr int kStageServicePort = 7443;

// The --set values of helm/tessel for a run: its hub id, namespace and MemberClusters (the
// run's label), the probers in its namespace of each member, the leases above, a status every
// second, the examples' folder as the stages' data root, and the stage service advertised at the
// replica's own address. On a real hub the replicas' pods also get a node selector no node has:
// the test runs the replicas; the hub's own controllers must not start them too.
std::vector<std::string> hub_chart_values(const std::string& namespace_, const std::string& run_id,
                                          bool real_hub);

struct MemberSpec {
  std::string letter;  // "a": the MemberCluster is "<run id>-a"
  std::string region;  // spec.region, and the region label of its nodes
};

class Federation {
 public:
  // Starts (or connects to) the hub and one member per spec (TestCluster::member, with the hub's
  // namespace); kubectl's cache goes under work_dir. `more_hub_values` are --set-json values of
  // helm/tessel ("statusIntervalSeconds=0.2"), given after hub_chart_values(), so they override
  // them. Throws when a cluster cannot be reached.
  Federation(const std::vector<MemberSpec>& members, const std::string& work_dir,
             const std::vector<std::string>& more_hub_values = {});
  // Deletes the MemberClusters register_members() made; the TestClusters delete their own
  // namespaces.
  ~Federation();
  Federation(const Federation&) = delete;
  Federation& operator=(const Federation&) = delete;

  TestCluster& hub() { return *hub_; }
  TestCluster& member(int index) { return *members_.at(index); }
  int member_count() const { return static_cast<int>(members_.size()); }
  const std::string& namespace_name() const { return hub_->namespace_name(); }
  const std::string& run_id() const { return run_id_; }
  std::string member_name(int index) const;  // the MemberCluster's name
  const std::string& member_region(int index) const { return specs_.at(index).region; }
  Kubectl& kubectl() { return *kubectl_; }  // the hub, in the run's namespace
  // Member `index`'s kubectl, in the run's namespace.
  Kubectl& member_kubectl(int index) { return *member_kubectls_.at(index); }
  // helm/tessel-member as register_members() applied it in member `index` (empty before).
  const std::vector<RenderedObject>& member_chart(int index) const {
    return member_charts_.at(index);
  }

  // helm/tessel rendered for this run (CRDs included), as the constructor rendered it once.
  const std::vector<RenderedObject>& hub_chart() const { return hub_chart_; }
  // The release name of both charts: the run's id.
  const std::string& release() const { return run_id_; }

  // Applies the hub chart's CustomResourceDefinitions (its crds/), then waits until both are
  // Established. Returns kubectl's output; throws with kubectl's output when a command fails.
  std::string install_crds();
  // Applies the rest of the hub chart: Deployment, ServiceAccount, RBAC, Services, TLS Secret,
  // PDB and the webhook configurations, these only on a test server (a real API server elsewhere
  // cannot reach a webhook served on this machine). Returns kubectl's output; throws with it.
  std::string install_hub();
  // Deletes the webhook configurations install_hub() applied (before the operator is gone for
  // good: they would refuse every write of a TrainingJob or MemberCluster). Best effort.
  void remove_webhooks();
  // Per member, applies helm/tessel-member, waits until its operator token Secret holds a token,
  // then `kubectl apply` of the member's kubeconfig Secret (stringData.kubeconfig: the member's
  // server and CA with that token: no file references) and its MemberCluster. Returns kubectl's
  // output.
  std::string register_members();

  // The Secret and the MemberCluster register_members() applies for member `index`, whose
  // kubeconfig authenticates with `token`.
  std::vector<nlohmann::json> member_manifests(int index, const std::string& token) const;

 private:
  std::string run_command(const std::vector<std::string>& args);
  // Applies helm/tessel-member in member `index`; returns the token of its operator
  // ServiceAccount once the token Secret holds one.
  std::string install_member(int index);

  std::vector<MemberSpec> specs_;
  std::unique_ptr<TestCluster> hub_;
  std::vector<std::unique_ptr<TestCluster>> members_;
  std::string run_id_;
  std::string work_dir_;
  std::unique_ptr<Kubectl> kubectl_;
  std::vector<RenderedObject> hub_chart_;
  std::vector<std::unique_ptr<Kubectl>> member_kubectls_;   // per member, in the run's namespace
  std::vector<std::vector<RenderedObject>> member_charts_;  // what install_member applied
  bool registered_ = false;
  bool webhooks_installed_ = false;
};

}  // namespace tessel::testing
