// RBAC through the real kubectl, as a user would type it: Roles and bindings applied, `kubectl
// auth can-i` (as a ServiceAccount, and with its token), `kubectl create token`, and the
// Forbidden error kubectl prints. The test server runs Authorization::kRbac.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "tests/kubectl/kubectl_fixture.h"

namespace tessel::testing {
namespace {

class RbacKubectl : public KubectlFixture {
 protected:
  ApiTestServerOptions server_options() const override {
    ApiTestServerOptions options;
    options.authorization = Authorization::kRbac;
    return options;
  }

  std::string account_user() const {
    return "system:serviceaccount:" + namespace_name() + ":robot";
  }

  // A Role that reads pods, bound to the ServiceAccount robot.
  void grant_pod_reading() {
    const std::string manifest =
        "apiVersion: rbac.authorization.k8s.io/v1\n"
        "kind: Role\n"
        "metadata: {name: pod-reader}\n"
        "rules:\n"
        "- apiGroups: [\"\"]\n"
        "  resources: [pods]\n"
        "  verbs: [get, list, watch]\n"
        "---\n"
        "apiVersion: rbac.authorization.k8s.io/v1\n"
        "kind: RoleBinding\n"
        "metadata: {name: robot-reads-pods}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}\n"
        "subjects:\n"
        "- {kind: ServiceAccount, name: robot, namespace: " +
        namespace_name() + "}\n";
    EXPECT_EQ(kubectl_ok({"apply", "--server-side", "-f", write_file("rbac.yaml", manifest)}),
              "role.rbac.authorization.k8s.io/pod-reader serverside-applied\n"
              "rolebinding.rbac.authorization.k8s.io/robot-reads-pods serverside-applied\n");
  }

  ProcessResult can_i(const std::vector<std::string>& args) {
    std::vector<std::string> command = {"auth", "can-i"};
    command.insert(command.end(), args.begin(), args.end());
    return kubectl_->run(command);
  }
};

TEST_F(RbacKubectl, CanIAsAServiceAccountFollowsItsBindings) {
  kubectl_ok({"create", "serviceaccount", "robot"});
  const std::string as = "--as=" + account_user();
  ProcessResult answer = can_i({"list", "pods", as});
  EXPECT_EQ(answer.out, "no\n") << describe(answer);
  EXPECT_EQ(answer.exit_code, 1);
  grant_pod_reading();
  answer = can_i({"list", "pods", as});
  EXPECT_EQ(answer.out, "yes\n") << describe(answer);
  EXPECT_EQ(answer.exit_code, 0);
  // --list shows the rules the account holds here, the bootstrap policy's among them.
  answer = can_i({"--list", as});
  EXPECT_EQ(answer.exit_code, 0) << describe(answer);
  const auto pods = rows_named(answer.out, "pods");
  ASSERT_EQ(pods.size(), 1u) << answer.out;
  EXPECT_EQ(pods[0], (std::vector<std::string>{"pods", "[]", "[]", "[get", "list", "watch]"}));
  EXPECT_EQ(rows_named(answer.out, "selfsubjectaccessreviews.authorization.k8s.io").size(), 1u)
      << answer.out;
  EXPECT_EQ(can_i({"delete", "pods", as}).out, "no\n");
  // The same with the imperative commands (protobuf bodies).
  kubectl_ok({"create", "role", "pod-deleter", "--verb=delete", "--resource=pods"});
  kubectl_ok({"create", "rolebinding", "robot-deletes-pods", "--role=pod-deleter",
              "--serviceaccount=" + namespace_name() + ":robot"});
  EXPECT_EQ(can_i({"delete", "pods", as}).out, "yes\n");
  EXPECT_EQ(can_i({"delete", "pods", "--subresource=status", as}).out, "no\n");
  EXPECT_EQ(can_i({"list", "pods", as, "--namespace", "default"}).out, "no\n");
  EXPECT_EQ(can_i({"list", "pods"}).out, "yes\n");  // the admin
  const std::string listed = kubectl_ok({"get", "rolebinding", "robot-reads-pods", "-o", "wide"});
  const auto rows = rows_named(listed, "robot-reads-pods");
  ASSERT_EQ(rows.size(), 1u) << listed;
  EXPECT_EQ(rows[0][1], "Role/pod-reader");
  EXPECT_EQ(rows[0].back(), namespace_name() + ":robot");
}

TEST_F(RbacKubectl, ACreatedTokenActsAsItsServiceAccount) {
  TESSEL_REQUIRE_TEST_SERVER(*cluster_, "a kubeconfig that carries a bearer token");
  kubectl_ok({"create", "serviceaccount", "robot"});
  grant_pod_reading();
  std::string token = kubectl_ok({"create", "token", "robot"});
  ASSERT_FALSE(token.empty());
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  Kubectl robot(
      cluster_->server()->write_kubeconfig((work_dir_ / "robot.kubeconfig").string(), token),
      namespace_name(), (work_dir_ / "robot-cache").string());
  ProcessResult answer = robot.run({"auth", "can-i", "list", "pods"});
  EXPECT_EQ(answer.out, "yes\n") << describe(answer);
  answer = robot.run({"get", "pods"});
  EXPECT_EQ(answer.exit_code, 0) << describe(answer);
  answer = robot.run({"get", "configmaps"});
  EXPECT_EQ(answer.exit_code, 1) << describe(answer);
  EXPECT_EQ(answer.err, "Error from server (Forbidden): configmaps is forbidden: User \"" +
                            account_user() +
                            "\" cannot list resource \"configmaps\" in API group "
                            "\"\" in the namespace \"" +
                            namespace_name() + "\"\n");
  // The token dies with its ServiceAccount.
  kubectl_ok({"delete", "serviceaccount", "robot"});
  answer = robot.run({"get", "pods"});
  EXPECT_EQ(answer.exit_code, 1) << describe(answer);
  EXPECT_NE(answer.err.find("Unauthorized"), std::string::npos) << describe(answer);
}

}  // namespace
}  // namespace tessel::testing
