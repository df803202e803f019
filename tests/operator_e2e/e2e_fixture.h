// The fixtures of the operator's end-to-end tests.
//
// FederationE2e: everything but the operator. A hub and two member clusters (federation.h),
// the hub chart's CRDs installed with helm and the real kubectl, helm/tessel-member installed in
// each member and the members registered with its operator token (kubeconfig Secret +
// MemberCluster each), GPU nodes in both members played by process kubelets (gpu_fleet.h:
// member a and b, kNodesPerMember x kGpusPerNode each, fast links inside a cluster, a slow one
// between), and helpers that read the clusters through the API. Tests skip visibly without
// kubectl or helm on $PATH.
//
// OperatorE2e: the same, plus the rest of helm/tessel (Deployment, RBAC, Services, TLS Secret,
// webhook configurations) and tessel-operator as its own process, a replica of the chart's
// Deployment (operator_pod.h, operator_process.h) that authenticates as the chart's
// ServiceAccount; the webhook Service reaches it through the Endpoints the test writes. Tests skip
// visibly while the operator binary has not been built.
//
// Real servers (TESSEL_TEST_KUBECONFIG and TESSEL_TEST_MEMBER_KUBECONFIGS): the same cases run,
// the kubelets registering their nodes there; a job selects only its run's members and nodes, and
// each case's operator watches only its run's namespace (--watch-namespace) and MemberClusters
// (--member-selector), so cases may run side by side there too.
//
// On failure the teardown prints the tail of the operator's and the kubelets' logs and keeps the
// work folder (its path is printed); on success the folder is removed.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/kubectl/child_process.h"
#include "tests/operator_e2e/federation.h"
#include "tests/operator_e2e/gpu_fleet.h"
#include "tests/operator_e2e/operator_process.h"

namespace tessel::testing {

// Label keys of the objects the operator makes in member clusters (operator/controller/labels.h
// is the operator's; the test keeps its own copy of the contract it checks).
inline constexpr const char* kJobLabel = "tessel.dev/job";
inline constexpr const char* kJobUidLabel = "tessel.dev/job-uid";

// The fleet: per member 2 nodes of 1 GPU, 4 GPUs in all. The example job (2 stages x 2 replicas)
// needs all four, so it must span both members, across the slow link.
inline constexpr int kNodesPerMember = 2;
inline constexpr int kGpusPerNode = 1;

class FederationE2e : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // What SetUp gives the fleet: stage containers run tessel-stage; links are written by the
  // fleet (a fixture that runs real probers writes none).
  virtual FleetOptions fleet_options() const {
    FleetOptions options;
    options.stage_binary = TESSEL_STAGE_BINARY;
    return options;
  }
  // GPU nodes per member (each of kGpusPerNode GPUs).
  virtual int nodes_per_member() const { return kNodesPerMember; }
  // --set-json values of helm/tessel on top of hub_chart_values() (federation.h).
  virtual std::vector<std::string> more_hub_values() const { return {}; }

  // `kubectl <args>` against the hub, in the run's namespace.
  ProcessResult kubectl(const std::vector<std::string>& args);
  // The same, failing the test (with kubectl's output) unless it exits 0; returns stdout.
  std::string kubectl_ok(const std::vector<std::string>& args);

  // Polls `done` until it holds or `timeout` passes (an exception thrown by `done`, a transient
  // API error, counts as not yet). Returns whether it held.
  static bool wait_for(const std::function<bool()>& done, std::chrono::seconds timeout);

  // The pods of member `member` in the run's namespace with this label selector.
  std::vector<nlohmann::json> pods_in(int member, const std::string& selector);
  // What is left, in any namespace of any member, of the job with this uid: "<member>: <Kind>
  // <namespace>/<name>" for each Pod, ConfigMap and Secret labelled tessel.dev/job-uid=<uid>.
  std::vector<std::string> leftovers(const std::string& uid);

  // The TrainingJob `name` in the run's namespace as the API returns it; null when absent.
  nlohmann::json trainingjob(const std::string& name);

  // examples/trainingjobs/fables.yaml named `name`, placed only on this run's members and nodes
  // (clusterSelector, gpuSelector), with `steps` training steps, then `edit`ed; written to a file
  // in the work folder whose path is returned (for kubectl apply -f).
  std::string example_job(const std::string& name, int steps,
                          const std::function<void(nlohmann::json&)>& edit = {});

  std::string work_dir_;
  std::unique_ptr<Federation> federation_;
  std::unique_ptr<GpuFleet> fleet_;
};

class OperatorE2e : public FederationE2e {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Starts a replica of the chart's Deployment (operator_pod.h): its Pod is
  // "<deployment>-<replica>" (its identity in the Lease), its files and log under
  // <work>/<pod name>.
  OperatorProcess& start_operator(const std::string& replica);
  // Kills operators_[index] (SIGKILL, as a crashed container) and starts its process again with
  // the same settings and ports (the same Pod, identity and files), as the kubelet restarts a
  // container. Returns the new process.
  OperatorProcess& restart_operator(size_t index);
  // Points the webhook Service at this replica: its Endpoints, as the endpoints controller
  // writes them when only this replica's pod is ready. On a real hub the webhook configurations
  // are not installed: see webhook_registered().
  void register_webhook(const OperatorProcess& replica);
  // False on a real hub: its API server, elsewhere, cannot reach a webhook served on this
  // machine's 127.0.0.1, so the admission parts of the cases are skipped there (visibly).
  bool webhook_registered() const { return webhook_registered_; }

  // Waits until the job's status.phase is `phase`; fails the test with the job's status when it
  // does not get there within `timeout`.
  nlohmann::json wait_for_phase(const std::string& name, const std::string& phase,
                                std::chrono::seconds timeout);

  std::vector<std::unique_ptr<OperatorProcess>> operators_;
  bool webhook_registered_ = false;
  std::string ca_pem_;  // the CA of the chart's serving certificate
};

// The unigram entropy (nats per byte) of examples/data/fables.txt, the example's data: the loss
// of the best model that ignores context.
double example_data_entropy();

// The condition of this type in an object's status.conditions; null when absent.
nlohmann::json condition_of(const nlohmann::json& object, const std::string& type);

// The cell of `column` in the row of `name` of a table kubectl printed (columns are found by
// their offset in the header line, so cells may be empty or hold spaces); nullopt when the table
// has no such row or column.
std::optional<std::string> table_cell(const std::string& table, const std::string& name,
                                      const std::string& column);

}  // namespace tessel::testing
