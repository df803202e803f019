// The kinds a Helm install writes, through the real kubectl: a Deployment, a DaemonSet, a
// PodDisruptionBudget, a Role and a RoleBinding applied with `kubectl apply --server-side` (twice:
// the second apply changes nothing), then listed with `kubectl get deploy,ds,pdb,role` as a user
// checks an install.
#include <gtest/gtest.h>

#include <string>

#include "tests/kubectl/kubectl_fixture.h"

namespace tessel::testing {
namespace {

const char* const kManifest = R"(apiVersion: apps/v1
kind: Deployment
metadata: {name: op}
spec:
  replicas: 2
  selector: {matchLabels: {app: op}}
  template:
    metadata: {labels: {app: op}}
    spec:
      containers:
      - name: operator
        image: tessel/operator:0.1.0
        args: [--leader-elect]
        ports: [{name: https, containerPort: 9443}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: prober}
spec:
  selector: {matchLabels: {app: prober}}
  template:
    metadata: {labels: {app: prober}}
    spec:
      nodeSelector: {nvidia.com/gpu.present: "true"}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - {name: prober, image: tessel/prober:0.1.0}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: op}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: op}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: op}
rules:
- {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get, create, update]}
)";

class InstallKindsKubectl : public KubectlFixture {};

TEST_F(InstallKindsKubectl, AppliedServerSideAndListedAsAUserChecksAnInstall) {
  const std::string file = write_file("install.yaml", kManifest);
  const std::string expected =
      "deployment.apps/op serverside-applied\n"
      "daemonset.apps/prober serverside-applied\n"
      "poddisruptionbudget.policy/op serverside-applied\n"
      "role.rbac.authorization.k8s.io/op serverside-applied\n";
  EXPECT_EQ(kubectl_ok({"apply", "--server-side", "-f", file}), expected);
  EXPECT_EQ(kubectl_ok({"apply", "--server-side", "-f", file}), expected);
  const std::string listed = kubectl_ok({"get", "deploy,ds,pdb,role"});
  auto rows = rows_named(listed, "deployment.apps/op");
  ASSERT_EQ(rows.size(), 1u) << listed;
  EXPECT_EQ(rows[0][1], "0/2");  // nothing runs the Deployment's pods here
  rows = rows_named(listed, "daemonset.apps/prober");
  ASSERT_EQ(rows.size(), 1u) << listed;
  EXPECT_EQ(rows[0][6], "nvidia.com/gpu.present=true");
  rows = rows_named(listed, "poddisruptionbudget.policy/op");
  ASSERT_EQ(rows.size(), 1u) << listed;
  EXPECT_EQ(rows[0][1], "1");
  EXPECT_EQ(rows[0][2], "N/A");
  EXPECT_EQ(rows_named(listed, "role.rbac.authorization.k8s.io/op").size(), 1u) << listed;
  // The applied fields are the manager's; a spec change bumps the generation.
  EXPECT_EQ(kubectl_ok({"get", "deploy", "op", "-o", "jsonpath={.metadata.generation}"}), "1");
  kubectl_ok({"scale", "deploy", "op", "--replicas=3"});
  EXPECT_EQ(kubectl_ok({"get", "deploy", "op", "-o", "jsonpath={.metadata.generation}"}), "2");
}

}  // namespace
}  // namespace tessel::testing
