// The kinds an installation writes, as the API test server serves them: apps/v1 Deployments and
// DaemonSets, policy/v1 PodDisruptionBudgets, admissionregistration.k8s.io/v1
// ValidatingAdmissionPolicies and their bindings: defaults, validation, generation, status.
#include <gtest/gtest.h>

#include <string>

#include "tests/apiserver/api_test_client.h"
#include "tests/apiserver/plain_server.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

const std::string kDeployments = "/apis/apps/v1/namespaces/default/deployments";
const std::string kDaemonSets = "/apis/apps/v1/namespaces/default/daemonsets";
const std::string kBudgets = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
const std::string kPolicies = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const std::string kPolicyBindings =
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";

json pod_template(const json& labels) {
  return {{"metadata", {{"labels", labels}}},
          {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox:1.36"}}}}}}};
}

json deployment(const std::string& name, const json& labels = {{"app", "x"}}) {
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", {{"name", name}}},
          {"spec", {{"selector", {{"matchLabels", labels}}}, {"template", pod_template(labels)}}}};
}

class InstallKindsTest : public ::testing::Test {
 protected:
  InstallKindsTest()
      : server_(plain_options()), client_(server_.url(), "", {"admin-token", "", ""}) {}

  ClientResponse post(const std::string& path, const json& body) {
    return client_.send("POST", path, body);
  }

  ApiTestServer server_;
  TestClient client_;
};

TEST_F(InstallKindsTest, ADeploymentGetsItsDefaultsAnEmptyStatusAndAGeneration) {
  json body = deployment("d");
  body["status"] = {{"replicas", 5}};
  const ClientResponse created = post(kDeployments, body);
  ASSERT_EQ(created.status, 201) << created.body;
  const json stored = created.json();
  EXPECT_EQ(stored["metadata"]["generation"], 1);
  EXPECT_EQ(stored["spec"]["replicas"], 1);
  EXPECT_EQ(stored["spec"]["revisionHistoryLimit"], 10);
  EXPECT_EQ(stored["spec"]["progressDeadlineSeconds"], 600);
  EXPECT_EQ(stored["spec"]["strategy"],
            json({{"type", "RollingUpdate"},
                  {"rollingUpdate", {{"maxUnavailable", "25%"}, {"maxSurge", "25%"}}}}));
  const json pod_spec = stored["spec"]["template"]["spec"];
  EXPECT_EQ(pod_spec["restartPolicy"], "Always");
  EXPECT_EQ(pod_spec["containers"][0]["imagePullPolicy"], "IfNotPresent");
  EXPECT_TRUE(stored["spec"]["template"]["metadata"]["creationTimestamp"].is_null());
  EXPECT_EQ(stored["status"], json::object());
  // A spec change bumps the generation; a main-resource write leaves status alone.
  json changed = stored;
  changed["spec"]["replicas"] = 3;
  changed["status"] = {{"replicas", 3}};
  const ClientResponse updated = client_.send("PUT", kDeployments + "/d", changed);
  ASSERT_EQ(updated.status, 200) << updated.body;
  EXPECT_EQ(updated.json()["metadata"]["generation"], 2);
  EXPECT_EQ(updated.json()["status"], json::object());
  const ClientResponse status =
      client_.send("PATCH", kDeployments + "/d/status", {{"status", {{"readyReplicas", 3}}}},
                   "application/merge-patch+json");
  ASSERT_EQ(status.status, 200) << status.body;
  EXPECT_EQ(status.json()["status"]["readyReplicas"], 3);
  EXPECT_EQ(status.json()["metadata"]["generation"], 2);
}

TEST_F(InstallKindsTest, ADeploymentsSelectorMustSelectItsTemplateAndStays) {
  json body = deployment("d");
  body["spec"]["template"]["metadata"]["labels"] = {{"app", "other"}};
  const ClientResponse refused = post(kDeployments, body);
  EXPECT_EQ(refused.status, 422);
  EXPECT_EQ(refused.json()["message"],
            "Deployment.apps \"d\" is invalid: spec.template.metadata.labels: Invalid value: "
            "map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`");
  body = deployment("d");
  body["spec"]["template"]["spec"]["restartPolicy"] = "Never";
  EXPECT_EQ(post(kDeployments, body).json()["message"],
            "Deployment.apps \"d\" is invalid: spec.template.spec.restartPolicy: Unsupported "
            "value: \"Never\": supported values: \"Always\"");
  body = deployment("d");
  body["spec"]["template"]["spec"]["containers"][0].erase("image");
  EXPECT_EQ(post(kDeployments, body).json()["message"],
            "Deployment.apps \"d\" is invalid: spec.template.spec.containers[0].image: Required "
            "value");
  json stored = post(kDeployments, deployment("d")).json();
  stored["spec"]["selector"]["matchLabels"] = {{"app", "x"}, {"tier", "y"}};
  stored["spec"]["template"]["metadata"]["labels"] = {{"app", "x"}, {"tier", "y"}};
  const ClientResponse moved = client_.send("PUT", kDeployments + "/d", stored);
  EXPECT_EQ(moved.status, 422);
  EXPECT_NE(moved.json()["message"].get<std::string>().find("spec.selector"), std::string::npos)
      << moved.body;
}

TEST_F(InstallKindsTest, ADaemonSetGetsItsDefaultsAndZeroStatus) {
  const json labels = {{"app", "prober"}};
  const ClientResponse created = post(
      kDaemonSets,
      {{"apiVersion", "apps/v1"},
       {"kind", "DaemonSet"},
       {"metadata", {{"name", "p"}}},
       {"spec", {{"selector", {{"matchLabels", labels}}}, {"template", pod_template(labels)}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  const json stored = created.json();
  EXPECT_EQ(stored["spec"]["updateStrategy"],
            json({{"type", "RollingUpdate"},
                  {"rollingUpdate", {{"maxUnavailable", 1}, {"maxSurge", 0}}}}));
  EXPECT_EQ(stored["spec"]["revisionHistoryLimit"], 10);
  EXPECT_EQ(stored["status"], json({{"currentNumberScheduled", 0},
                                    {"numberMisscheduled", 0},
                                    {"desiredNumberScheduled", 0},
                                    {"numberReady", 0}}));
  // No controller: the DaemonSet makes no Pods.
  EXPECT_EQ(client_.get("/api/v1/namespaces/default/pods").json()["items"].size(), 0u);
}

TEST_F(InstallKindsTest, APodDisruptionBudgetTakesOneOfMinAvailableAndMaxUnavailable) {
  const json selector = {{"matchLabels", {{"app", "x"}}}};
  const ClientResponse created =
      post(kBudgets, {{"apiVersion", "policy/v1"},
                      {"kind", "PodDisruptionBudget"},
                      {"metadata", {{"name", "b"}}},
                      {"spec", {{"minAvailable", 1}, {"selector", selector}}}});
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json()["status"]["disruptionsAllowed"], 0);
  const ClientResponse both =
      post(kBudgets, {{"apiVersion", "policy/v1"},
                      {"kind", "PodDisruptionBudget"},
                      {"metadata", {{"name", "c"}}},
                      {"spec", {{"minAvailable", 1}, {"maxUnavailable", "150%"}}}});
  EXPECT_EQ(both.status, 422);
  const std::string message = both.json()["message"];
  EXPECT_NE(message.find("minAvailable and maxUnavailable cannot be both set"), std::string::npos)
      << message;
  EXPECT_NE(message.find("spec.maxUnavailable: Invalid value: \"150%\": must not be greater than "
                         "100%"),
            std::string::npos)
      << message;
}

TEST_F(InstallKindsTest, AdmissionPoliciesAreStoredWithDefaultsAndValidated) {
  const json policy = {{"apiVersion", "admissionregistration.k8s.io/v1"},
                       {"kind", "ValidatingAdmissionPolicy"},
                       {"metadata", {{"name", "own-node"}}},
                       {"spec",
                        {{"matchConstraints",
                          {{"resourceRules",
                            {{{"apiGroups", {""}},
                              {"apiVersions", {"v1"}},
                              {"operations", {"UPDATE"}},
                              {"resources", {"nodes"}}}}}}},
                         {"validations", {{{"expression", "object.spec == oldObject.spec"}}}}}}};
  const ClientResponse created = post(kPolicies, policy);
  ASSERT_EQ(created.status, 201) << created.body;
  const json spec = created.json()["spec"];
  EXPECT_EQ(spec["failurePolicy"], "Fail");
  EXPECT_EQ(spec["matchConstraints"]["matchPolicy"], "Equivalent");
  EXPECT_EQ(spec["matchConstraints"]["resourceRules"][0]["scope"], "*");
  json empty = policy;
  empty["metadata"]["name"] = "empty";
  empty["spec"].erase("validations");
  EXPECT_EQ(post(kPolicies, empty).json()["message"],
            "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"empty\" is invalid: "
            "spec.validations: Required value: validations or auditAnnotations must contain at "
            "least one item");
  const json binding = {{"apiVersion", "admissionregistration.k8s.io/v1"},
                        {"kind", "ValidatingAdmissionPolicyBinding"},
                        {"metadata", {{"name", "own-node"}}},
                        {"spec", {{"policyName", "own-node"}, {"validationActions", {"Block"}}}}};
  EXPECT_EQ(post(kPolicyBindings, binding).json()["message"],
            "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io \"own-node\" is "
            "invalid: spec.validationActions[0]: Unsupported value: \"Block\": supported values: "
            "\"Audit\", \"Deny\", \"Warn\"");
}

TEST_F(InstallKindsTest, DiscoveryListsTheKindsWithTheirSubresources) {
  const json apps = client_.get("/apis/apps/v1").json();
  std::vector<std::string> names;
  for (const json& resource : apps["resources"]) names.push_back(resource["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"daemonsets", "daemonsets/status", "deployments",
                                             "deployments/scale", "deployments/status"}));
  EXPECT_EQ(apps["resources"][2]["shortNames"], json({"deploy"}));
  EXPECT_EQ(client_.get("/apis/policy/v1").status, 200);
  EXPECT_EQ(client_.get("/apis/rbac.authorization.k8s.io/v1").status, 200);
}

}  // namespace
}  // namespace tessel::testing
