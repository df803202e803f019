// Authorization::kRbac: the API test server decides as kube-apiserver's RBAC authorizer over
// the stored Roles, ClusterRoles and bindings, with the bootstrap policy every cluster has; the
// RBAC kinds' validation; the 403 worded as the captured kube-apiserver words it.
#include <gtest/gtest.h>

#include <string>

#include "tests/apiserver/api_test_client.h"
#include "tests/apiserver/plain_server.h"
#include "tests/kube/fixtures.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {
namespace {

using kube::testing::fixture;
using nlohmann::json;

const std::string kRbac = "/apis/rbac.authorization.k8s.io/v1";

ApiTestServerOptions rbac_options() {
  ApiTestServerOptions options = plain_options();
  options.authorization = Authorization::kRbac;
  return options;
}

json rule(json groups, json resources, json verbs, json names = json::array()) {
  json out = {{"apiGroups", groups}, {"resources", resources}, {"verbs", verbs}};
  if (!names.empty()) out["resourceNames"] = names;
  return out;
}

json role(const std::string& kind, const std::string& name, json rules) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", kind},
          {"metadata", {{"name", name}}},
          {"rules", rules}};
}

json binding(const std::string& kind, const std::string& name, const std::string& role_kind,
             const std::string& role_name, json subjects) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", kind},
          {"metadata", {{"name", name}}},
          {"roleRef",
           {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", role_name}}},
          {"subjects", subjects}};
}

json service_account_subject(const std::string& ns, const std::string& name) {
  return {{"kind", "ServiceAccount"}, {"name", name}, {"namespace", ns}};
}

class RbacTest : public ::testing::Test {
 protected:
  RbacTest()
      : server_(rbac_options()),
        admin_(server_.url(), "", {"admin-token", "", ""}),
        robot_(server_.url(), "", {"robot-token", "", ""}) {
    server_.add_token("robot-token", {"system:serviceaccount:a:robot",
                                      {"system:serviceaccounts", "system:serviceaccounts:a"}});
    for (const char* ns : {"a", "b"}) {
      created("/api/v1/namespaces",
              {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", ns}}}});
    }
  }

  json created(const std::string& path, const json& body) {
    const ClientResponse response = admin_.send("POST", path, body);
    EXPECT_EQ(response.status, 201) << path << ": " << response.body;
    return response.json();
  }

  long robot(const std::string& method, const std::string& path, const json& body = nullptr) {
    if (body.is_null()) return robot_.request(method, path).status;
    return robot_
        .send(method, path, body,
              method == "PATCH" ? "application/merge-patch+json" : "application/json")
        .status;
  }

  ApiTestServer server_;
  TestClient admin_;
  TestClient robot_;
};

TEST_F(RbacTest, ARoleBindingGrantsItsRoleInItsNamespaceOnly) {
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/configmaps"), 403);
  created(kRbac + "/namespaces/a/roles",
          role("Role", "read", {rule({""}, {"configmaps"}, {"get", "list"})}));
  created(kRbac + "/namespaces/a/rolebindings",
          binding("RoleBinding", "read", "Role", "read", {service_account_subject("a", "robot")}));
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/configmaps"), 200);
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/configmaps/missing"), 404);  // allowed, absent
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/configmaps?watch=true&timeoutSeconds=0"), 403);
  EXPECT_EQ(robot("POST", "/api/v1/namespaces/a/configmaps", config_map("c")), 403);
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/b/configmaps"), 403);
  EXPECT_EQ(robot("GET", "/api/v1/configmaps"), 403);  // all namespaces: the cluster scope
  // A binding names its Role by namespace: the same name elsewhere grants nothing.
  created(kRbac + "/namespaces/b/rolebindings",
          binding("RoleBinding", "read", "Role", "read", {service_account_subject("a", "robot")}));
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/b/configmaps"), 403);
}

TEST_F(RbacTest, ARoleBindingToAClusterRoleGrantsItInTheBindingsNamespace) {
  created(kRbac + "/clusterroles",
          role("ClusterRole", "pod-reader", {rule({""}, {"pods"}, {"get", "list", "watch"})}));
  created(kRbac + "/namespaces/b/rolebindings",
          binding("RoleBinding", "pods", "ClusterRole", "pod-reader",
                  // A ServiceAccount subject without a namespace is in the binding's.
                  {{{"kind", "ServiceAccount"}, {"name", "robot"}}}));
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/b/pods"), 403);  // robot is a:robot, not b:robot
  created(kRbac + "/namespaces/b/rolebindings",
          binding("RoleBinding", "pods-a", "ClusterRole", "pod-reader",
                  {service_account_subject("a", "robot")}));
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/b/pods"), 200);
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/pods"), 403);
  EXPECT_EQ(robot("GET", "/api/v1/pods"), 403);
}

TEST_F(RbacTest, AClusterRoleBindingGrantsEverywhereToUsersGroupsAndAccounts) {
  created(kRbac + "/clusterroles",
          role("ClusterRole", "nodes", {rule({""}, {"nodes", "namespaces"}, {"list"})}));
  created(kRbac + "/clusterrolebindings",
          binding("ClusterRoleBinding", "nodes", "ClusterRole", "nodes",
                  {{{"kind", "Group"}, {"name", "system:serviceaccounts:a"}}}));
  EXPECT_EQ(robot("GET", "/api/v1/nodes"), 200);
  EXPECT_EQ(robot("GET", "/api/v1/namespaces"), 200);
  EXPECT_EQ(robot("GET", "/api/v1/nodes/n1"), 403);  // list is not get
  server_.add_token("alice-token", {"alice", {}});
  TestClient alice(server_.url(), "", {"alice-token", "", ""});
  EXPECT_EQ(alice.get("/api/v1/nodes").status, 403);
  created(kRbac + "/clusterrolebindings",
          binding("ClusterRoleBinding", "alice", "ClusterRole", "nodes",
                  {{{"kind", "User"}, {"name", "alice"}}}));
  EXPECT_EQ(alice.get("/api/v1/nodes").status, 200);
  // A ClusterRoleBinding may not name a Role.
  const ClientResponse refused = admin_.send(
      "POST", kRbac + "/clusterrolebindings",
      binding("ClusterRoleBinding", "bad", "Role", "nodes", {{{"kind", "User"}, {"name", "x"}}}));
  EXPECT_EQ(refused.status, 422);
  EXPECT_EQ(refused.json()["message"],
            "ClusterRoleBinding.rbac.authorization.k8s.io \"bad\" is invalid: roleRef.kind: "
            "Unsupported value: \"Role\": supported values: \"ClusterRole\"");
}

TEST_F(RbacTest, SubresourcesAreGrantedByName) {
  created(kRbac + "/namespaces/a/roles",
          role("Role", "pods",
               {rule({""}, {"pods"}, {"patch"}), rule({""}, {"*/status"}, {"get"}),
                rule({""}, {"pods/status"}, {"update"})}));
  created(kRbac + "/namespaces/a/rolebindings",
          binding("RoleBinding", "pods", "Role", "pods", {service_account_subject("a", "robot")}));
  const std::string pod = "/api/v1/namespaces/a/pods/p";
  EXPECT_EQ(robot("PATCH", pod, json::object()), 404);              // allowed; no such Pod
  EXPECT_EQ(robot("PATCH", pod + "/status", json::object()), 403);  // "pods" is not pods/status
  const json body = {
      {"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}, {"namespace", "a"}}}};
  EXPECT_EQ(robot("PUT", pod + "/status", body), 404);
  EXPECT_EQ(robot("GET", pod + "/status"), 404);                           // "*/status"
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/services/s/status"), 404);  // "*/status"
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/services/s"), 403);
}

TEST_F(RbacTest, ResourceNamesLimitARuleToNamedObjects) {
  created("/api/v1/namespaces/a/configmaps", config_map("mine"));
  created("/api/v1/namespaces/a/configmaps", config_map("other"));
  created(kRbac + "/namespaces/a/roles",
          role("Role", "mine",
               {rule({""}, {"configmaps"}, {"get", "update", "list", "create"}, {"mine"})}));
  created(kRbac + "/namespaces/a/rolebindings",
          binding("RoleBinding", "mine", "Role", "mine", {service_account_subject("a", "robot")}));
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/configmaps/mine"), 200);
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/configmaps/other"), 403);
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/configmaps"), 403);  // a list names nothing
  EXPECT_EQ(robot("POST", "/api/v1/namespaces/a/configmaps", config_map("mine2")), 403);
  // A list or watch selecting the one name by field is a request for that name.
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/configmaps?fieldSelector=metadata.name%3Dmine"),
            200);
  EXPECT_EQ(robot("GET", "/api/v1/namespaces/a/configmaps?fieldSelector=metadata.name%3Dother"),
            403);
}

TEST_F(RbacTest, NonResourceUrlsWithWildcards) {
  EXPECT_EQ(robot("GET", "/metrics"), 403);
  created(kRbac + "/clusterroles",
          {{"apiVersion", "rbac.authorization.k8s.io/v1"},
           {"kind", "ClusterRole"},
           {"metadata", {{"name", "metrics"}}},
           {"rules", {{{"nonResourceURLs", {"/metrics", "/debug/*"}}, {"verbs", {"get"}}}}}});
  created(kRbac + "/clusterrolebindings",
          binding("ClusterRoleBinding", "metrics", "ClusterRole", "metrics",
                  {service_account_subject("a", "robot")}));
  EXPECT_EQ(robot("GET", "/metrics"), 404);  // allowed; this server has no /metrics
  EXPECT_EQ(robot("GET", "/debug/pprof/heap"), 404);
  EXPECT_EQ(robot("GET", "/metricsx"), 403);
  EXPECT_EQ(robot("POST", "/metrics", json::object()), 403);
  // A Role may not name non-resource URLs.
  const ClientResponse refused =
      admin_.send("POST", kRbac + "/namespaces/a/roles",
                  {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                   {"kind", "Role"},
                   {"metadata", {{"name", "urls"}}},
                   {"rules", {{{"nonResourceURLs", {"/metrics"}}, {"verbs", {"get"}}}}}});
  EXPECT_EQ(refused.status, 422);
  EXPECT_EQ(refused.json()["message"],
            "Role.rbac.authorization.k8s.io \"urls\" is invalid: rules[0].nonResourceURLs: "
            "Invalid value: []string{\"/metrics\"}: namespaced rules cannot apply to "
            "non-resource URLs");
}

TEST_F(RbacTest, TheBootstrapPolicyLetsEveryoneDiscoverAndMastersDoEverything) {
  for (const std::string path : {"/api", "/api/v1", "/apis", "/apis/rbac.authorization.k8s.io/v1",
                                 "/version", "/openapi/v3", "/healthz", "/readyz"}) {
    EXPECT_EQ(robot("GET", path), 200) << path;
  }
  TestClient anonymous(server_.url(), "", {});
  EXPECT_EQ(anonymous.get("/healthz").status, 200);
  EXPECT_EQ(anonymous.get("/version").status, 200);
  EXPECT_EQ(anonymous.get("/api").status, 403);
  EXPECT_EQ(anonymous.get("/api/v1/namespaces/a/pods").status, 403);
  // The bootstrap objects are there, as on a real cluster, and system:masters needs none.
  for (const char* name :
       {"cluster-admin", "system:discovery", "system:basic-user", "system:public-info-viewer"}) {
    EXPECT_EQ(admin_.get(kRbac + "/clusterroles/" + std::string(name)).status, 200) << name;
    EXPECT_EQ(admin_.get(kRbac + "/clusterrolebindings/" + std::string(name)).status, 200) << name;
  }
  EXPECT_EQ(admin_.request("DELETE", kRbac + "/clusterrolebindings/cluster-admin").status, 200);
  EXPECT_EQ(admin_.get("/api/v1/namespaces/a/pods").status, 200);
}

TEST_F(RbacTest, NobodyGrantsWhatItDoesNotHold) {
  // robot may manage Roles and RoleBindings in a, and read pods there.
  created(kRbac + "/namespaces/a/roles",
          role("Role", "rbac-admin",
               {rule({"rbac.authorization.k8s.io"}, {"roles", "rolebindings"},
                     {"create", "update", "patch", "get"}),
                rule({""}, {"pods"}, {"get", "list"})}));
  created(kRbac + "/namespaces/a/rolebindings",
          binding("RoleBinding", "rbac-admin", "Role", "rbac-admin",
                  {service_account_subject("a", "robot")}));
  const std::string roles = kRbac + "/namespaces/a/roles";
  EXPECT_EQ(robot("POST", roles, role("Role", "readers", {rule({""}, {"pods"}, {"list"})})), 201);
  const ClientResponse refused = robot_.send(
      "POST", roles,
      role("Role", "writers",
           {rule({""}, {"pods"}, {"list", "delete"}), rule({"apps"}, {"deployments"}, {"get"})}));
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.json()["message"],
            "roles.rbac.authorization.k8s.io \"writers\" is forbidden: user "
            "\"system:serviceaccount:a:robot\" (groups=[\"system:serviceaccounts\" "
            "\"system:serviceaccounts:a\" \"system:authenticated\"]) is attempting to grant RBAC "
            "permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], "
            "Verbs:[\"delete\"]}\n{APIGroups:[\"apps\"], Resources:[\"deployments\"], "
            "Verbs:[\"get\"]}");
  // A patch that would add a rule it lacks is refused too.
  EXPECT_EQ(
      robot_
          .send("PATCH", roles + "/readers",
                {{"rules", {rule({""}, {"pods"}, {"list"}), rule({""}, {"secrets"}, {"get"})}}},
                "application/merge-patch+json")
          .status,
      403);
  // Binding a role needs its rules, or bind on it.
  created(kRbac + "/clusterroles",
          role("ClusterRole", "secret-reader", {rule({""}, {"secrets"}, {"get"})}));
  const json to_secrets = binding("RoleBinding", "secrets", "ClusterRole", "secret-reader",
                                  {service_account_subject("a", "robot")});
  EXPECT_EQ(robot("POST", kRbac + "/namespaces/a/rolebindings", to_secrets), 403);
  created(
      kRbac + "/namespaces/a/roles",
      role("Role", "binder",
           {rule({"rbac.authorization.k8s.io"}, {"clusterroles"}, {"bind"}, {"secret-reader"})}));
  created(kRbac + "/namespaces/a/rolebindings", binding("RoleBinding", "binder", "Role", "binder",
                                                        {service_account_subject("a", "robot")}));
  EXPECT_EQ(robot("POST", kRbac + "/namespaces/a/rolebindings", to_secrets), 201);
}

TEST_F(RbacTest, RoleRefIsImmutable) {
  json created_binding =
      created(kRbac + "/namespaces/a/rolebindings",
              binding("RoleBinding", "b", "Role", "one", {{{"kind", "User"}, {"name", "alice"}}}));
  // Defaults: a User subject's apiGroup.
  EXPECT_EQ(created_binding["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
  created_binding["roleRef"]["name"] = "two";
  const ClientResponse refused =
      admin_.send("PUT", kRbac + "/namespaces/a/rolebindings/b", created_binding);
  EXPECT_EQ(refused.status, 422);
  EXPECT_EQ(refused.json()["message"],
            "RoleBinding.rbac.authorization.k8s.io \"b\" is invalid: roleRef: Invalid value: "
            "rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", "
            "Name:\"two\"}: cannot change roleRef");
}

// The captured 403s of a ServiceAccount without rights, and of one that may read TrainingJobs
// but not write their status.
TEST(RbacFixtures, DenialsAreWordedAsTheCapturedServer) {
  ApiTestServer server(rbac_options());
  TestClient admin(server.url(), "", {"admin-token", "", ""});
  const json crd = fixture("200-get-crd-established.json")["response"]["body"];
  ASSERT_EQ(admin
                .send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                      {{"apiVersion", "apiextensions.k8s.io/v1"},
                       {"kind", "CustomResourceDefinition"},
                       {"metadata", {{"name", crd["metadata"]["name"]}}},
                       {"spec", crd["spec"]}})
                .status,
            201);
  for (const std::string account : {"tessel-noperms", "tessel-reader"}) {
    server.add_token(account + "-token",
                     {"system:serviceaccount:default:" + account,
                      {"system:serviceaccounts", "system:serviceaccounts:default"}});
  }
  ASSERT_EQ(admin
                .send("POST", kRbac + "/namespaces/default/roles",
                      role("Role", "reader",
                           {rule({"tessel.dev"}, {"trainingjobs"}, {"get", "list", "watch"})}))
                .status,
            201);
  ASSERT_EQ(admin
                .send("POST", kRbac + "/namespaces/default/rolebindings",
                      binding("RoleBinding", "reader", "Role", "reader",
                              {service_account_subject("default", "tessel-reader")}))
                .status,
            201);
  const auto replay = [&](const std::string& file, const std::string& account) {
    const json captured = fixture(file);
    const json& request = captured["request"];
    TestClient client(server.url(), "", {account + "-token", "", ""});
    const ClientResponse response =
        request.contains("body")
            ? client.send(request["method"], request["path"], request["body"],
                          request["headers"].value("Content-Type", "application/json"))
            : client.request(request["method"], request["path"]);
    EXPECT_EQ(response.status, captured["response"]["status"]) << file;
    EXPECT_EQ(response.json(), captured["response"]["body"]) << file;
  };
  replay("403-forbidden-serviceaccount-list.json", "tessel-noperms");
  replay("403-forbidden-serviceaccount-create.json", "tessel-noperms");
  replay("403-forbidden-serviceaccount-get-node.json", "tessel-noperms");
  replay("403-forbidden-serviceaccount-status-subresource.json", "tessel-reader");
  TestClient reader(server.url(), "", {"tessel-reader-token", "", ""});
  EXPECT_EQ(reader.get("/apis/tessel.dev/v1alpha1/namespaces/default/trainingjobs").status, 200);
}

}  // namespace
}  // namespace tessel::testing
