// The clusters of an e2e run as a user sets them up: a hub (tests/support/test_cluster.h: the
// API test server, or the real cluster TESSEL_TEST_KUBECONFIG names) with crds/ installed by the
// real kubectl, and member clusters (test servers, or the real clusters
// TESSEL_TEST_MEMBER_KUBECONFIGS names), each registered in the hub with `kubectl apply` of a
// kubeconfig Secret and a MemberCluster, as examples/trainingjobs/member-a.yaml shows.
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
#include "tests/support/test_cluster.h"

namespace tessel::testing {

struct MemberSpec {
  std::string letter;  // "a": the MemberCluster is "<run id>-a"
  std::string region;  // spec.region, and the region label of its nodes
};

class Federation {
 public:
  // Starts (or connects to) the hub and one member per spec (TestCluster::member, with the hub's
  // namespace); kubectl's cache goes under work_dir. Throws when a cluster cannot be reached.
  Federation(const std::vector<MemberSpec>& members, const std::string& work_dir);
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

  // `kubectl apply -f crds/`, then waits until both CRDs are Established. Returns kubectl's
  // output; throws with kubectl's output when a command fails.
  std::string install_crds();
  // Per member, `kubectl apply` of its kubeconfig Secret (stringData.kubeconfig: the member's
  // self-contained kubeconfig: no file references) and its MemberCluster. Returns kubectl's
  // output.
  std::string register_members();

  // The Secret and the MemberCluster register_members() applies for member `index`.
  std::vector<nlohmann::json> member_manifests(int index) const;

 private:
  std::string run_command(const std::vector<std::string>& args);

  std::vector<MemberSpec> specs_;
  std::unique_ptr<TestCluster> hub_;
  std::vector<std::unique_ptr<TestCluster>> members_;
  std::string run_id_;
  std::string work_dir_;
  std::unique_ptr<Kubectl> kubectl_;
  bool registered_ = false;
};

}  // namespace tessel::testing
