// What the member chart (helm/tessel-member) renders: the RBAC of the hub operator's identity
// (exactly docs/operator.md's member table) and of the prober (docs/prober.md's), the prober
// DaemonSet, its shared Secret, and the own-Node admission policy.
#include <string>
#include <vector>

#include "tests/helm/helm_fixture.h"

namespace tessel::testing::helm {
namespace {

const std::string kExamples = std::string(TESSEL_SOURCE_DIR) + "/helm/tessel-member/examples/";

// docs/operator.md, "RBAC", "In each member", with no job namespaces listed (the cluster-wide
// configmaps rule then covers the probers' peers ConfigMap: no Role of its own).
TEST(MemberChart, OperatorRbacIsExactlyTheMemberTableOfTheDocs) {
  TESSEL_SKIP_WITHOUT_HELM();
  const Grants expected = expand({
      {"*", "", {"nodes"}, {}, {"list", "watch"}},
      {"*", "", {"pods"}, {}, {"list", "watch", "create", "delete"}},
      {"*", "", {"configmaps", "secrets"}, {}, {"get", "list", "create", "update", "delete"}},
  });
  const auto objects = render_objects("tessel-member");
  const auto held = grants_of_service_account(objects, "tessel-system", "tessel-operator");
  EXPECT_EQ(held, expected) << "held:\n" << to_string(held) << "expected:\n" << to_string(expected);
  const auto token = find(objects, "Secret", "tessel-operator-token");
  EXPECT_EQ(token["type"].as<std::string>(), "kubernetes.io/service-account-token");
  EXPECT_EQ(
      token["metadata"]["annotations"]["kubernetes.io/service-account.name"].as<std::string>(),
      "tessel-operator");
}

// With operatorAccess.jobNamespaces, the jobs' ConfigMaps and Secrets are granted there only.
TEST(MemberChart, JobNamespacesNarrowTheOperatorsConfigMapAndSecretGrants) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto objects = render_objects("tessel-member", kExamples + "restricted.yaml");
  const auto held = grants_of_service_account(objects, "tessel-system", "tessel-operator");
  for (const std::string ns : {"team-a", "team-b"}) {
    EXPECT_TRUE(held.count({ns, "", "secrets", "", "create"})) << ns << "\n" << to_string(held);
    EXPECT_TRUE(held.count({ns, "", "configmaps", "", "delete"})) << ns << "\n" << to_string(held);
  }
  EXPECT_FALSE(held.count({"*", "", "secrets", "", "get"})) << to_string(held);
  EXPECT_FALSE(held.count({"*", "", "configmaps", "", "get"})) << to_string(held);
  EXPECT_TRUE(held.count({"*", "", "pods", "", "create"})) << to_string(held);
  // The probers' peers ConfigMap in the release namespace, made when missing, then kept.
  EXPECT_TRUE(held.count({"tessel-system", "", "configmaps", "", "create"})) << to_string(held);
  EXPECT_TRUE(held.count({"tessel-system", "", "configmaps", "tessel-prober-peers", "update"}))
      << to_string(held);
  EXPECT_FALSE(held.count({"tessel-system", "", "configmaps", "", "update"})) << to_string(held);
  EXPECT_TRUE(of_kind(objects, "ValidatingAdmissionPolicy").empty());
  for (const auto& secret : of_kind(objects, "Secret")) {
    EXPECT_NE(secret["type"].as<std::string>(""), "kubernetes.io/service-account-token");
  }
  // The extra subject shares the ClusterRole.
  const auto binding = find(objects, "ClusterRoleBinding", "t-tessel-member-operator");
  ASSERT_EQ(binding["subjects"].size(), 2u);
  EXPECT_EQ(binding["subjects"][1]["kind"].as<std::string>(), "Group");
  EXPECT_EQ(binding["subjects"][1]["name"].as<std::string>(), "tessel-hub-operators");
}

// docs/prober.md, "RBAC".
TEST(MemberChart, ProberRbacIsExactlyTheProberTableOfTheDocs) {
  TESSEL_SKIP_WITHOUT_HELM();
  const Grants expected = expand({
      {"tessel-system", "", {"pods"}, {}, {"list", "watch"}},
      {"tessel-system", "", {"configmaps"}, {}, {"list", "watch"}},
      {"*", "", {"nodes"}, {}, {"get", "patch"}},
  });
  const auto held =
      grants_of_service_account(render_objects("tessel-member"), "tessel-system", "tessel-prober");
  EXPECT_EQ(held, expected) << "held:\n" << to_string(held) << "expected:\n" << to_string(expected);
}

TEST(MemberChart, ProberDaemonSetAsTheDocsDescribeIt) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto objects = render_objects("tessel-member");
  const auto daemonset = find(objects, "DaemonSet");
  const auto pod = daemonset["spec"]["template"]["spec"];
  const auto container = pod["containers"][0];
  EXPECT_TRUE(pod["hostNetwork"].as<bool>());
  EXPECT_EQ(pod["dnsPolicy"].as<std::string>(), "ClusterFirstWithHostNet");
  EXPECT_EQ(pod["serviceAccountName"].as<std::string>(), "tessel-prober");
  // The label the probers' --peer-selector and the operator's --prober-selector match.
  EXPECT_EQ(daemonset["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
                .as<std::string>(),
            "tessel-prober");

  const auto port = container["ports"][0];
  EXPECT_EQ(port["name"].as<std::string>(), "probe");
  EXPECT_EQ(port["containerPort"].as<int>(), 7471);
  EXPECT_EQ(port["hostPort"].as<int>(), 7471);
  bool listens = false;
  for (const auto& a : container["args"])
    listens = listens || a.as<std::string>() == "--listen=0.0.0.0:7471";
  EXPECT_TRUE(listens) << YAML::Dump(container["args"]);

  ASSERT_EQ(container["env"].size(), 2u);
  EXPECT_EQ(container["env"][0]["name"].as<std::string>(), "NODE_NAME");
  EXPECT_EQ(container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(),
            "spec.nodeName");
  EXPECT_EQ(container["env"][1]["name"].as<std::string>(), "POD_NAMESPACE");
  EXPECT_EQ(container["env"][1]["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(),
            "metadata.namespace");

  EXPECT_EQ(container["volumeMounts"][0]["mountPath"].as<std::string>(), "/etc/tessel-prober");
  const auto volume = pod["volumes"][0]["secret"];
  EXPECT_EQ(volume["items"][0]["key"].as<std::string>(), "secret");
  // No existingSecret: the chart generates it.
  const auto secret = find(objects, "Secret", volume["secretName"].as<std::string>());
  EXPECT_GE(base64_decode(secret["data"]["secret"].as<std::string>()).size(), 16u);

  EXPECT_EQ(pod["nodeSelector"]["nvidia.com/gpu.present"].as<std::string>(), "true");
  EXPECT_EQ(pod["tolerations"][0]["key"].as<std::string>(), "nvidia.com/gpu");
  EXPECT_TRUE(container["resources"]["requests"]["cpu"]);
  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  const auto sc = container["securityContext"];
  EXPECT_TRUE(sc["readOnlyRootFilesystem"].as<bool>());
  EXPECT_FALSE(sc["allowPrivilegeEscalation"].as<bool>());
  EXPECT_EQ(sc["capabilities"]["drop"][0].as<std::string>(), "ALL");
}

TEST(MemberChart, ProberOnThePodNetworkWithAnExistingSecret) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto objects = render_objects("tessel-member", kExamples + "pod-network.yaml");
  const auto pod = find(objects, "DaemonSet")["spec"]["template"]["spec"];
  EXPECT_FALSE(pod["hostNetwork"].as<bool>());
  EXPECT_FALSE(pod["dnsPolicy"]);
  const auto port = pod["containers"][0]["ports"][0];
  EXPECT_EQ(port["containerPort"].as<int>(), 17471);
  EXPECT_FALSE(port["hostPort"]) << "no host port off the host network";
  EXPECT_EQ(pod["volumes"][0]["secret"]["secretName"].as<std::string>(), "tessel-prober-secret");
  for (const auto& secret : of_kind(objects, "Secret")) {
    EXPECT_NE(secret["metadata"]["name"].as<std::string>(), "tessel-prober-secret")
        << "an existing Secret is not rendered";
    EXPECT_TRUE(secret["type"].as<std::string>() == "kubernetes.io/service-account-token")
        << secret["metadata"]["name"].as<std::string>();
  }
  EXPECT_EQ(pod["nodeSelector"]["node.example.org/pool"].as<std::string>(), "gpu");
}

TEST(MemberChart, OwnNodePolicyNamesTheProbersServiceAccount) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto objects = render_objects("tessel-member");
  const auto policy = find(objects, "ValidatingAdmissionPolicy");
  EXPECT_EQ(policy["spec"]["failurePolicy"].as<std::string>(), "Fail");
  EXPECT_EQ(policy["spec"]["matchConditions"][0]["expression"].as<std::string>(),
            "request.userInfo.username == \"system:serviceaccount:tessel-system:tessel-prober\"");
  EXPECT_EQ(policy["spec"]["validations"].size(), 2u);
  const auto binding = find(objects, "ValidatingAdmissionPolicyBinding");
  EXPECT_EQ(binding["spec"]["policyName"].as<std::string>(),
            policy["metadata"]["name"].as<std::string>());
  EXPECT_EQ(binding["spec"]["validationActions"][0].as<std::string>(), "Deny");
}

}  // namespace
}  // namespace tessel::testing::helm
