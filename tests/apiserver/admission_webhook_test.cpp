// Admission webhooks called by the API test server as kube-apiserver v1.26 calls them: the
// AdmissionReview a webhook receives, allow, deny, mutate, failurePolicy on timeouts and
// unreachable or untrusted webhooks, rules and selectors, Service references routed through
// Endpoints, and the validation of the configurations themselves.
#include <gtest/gtest.h>

#include <set>

#include "tests/apiserver/api_test_client.h"
#include "tests/apiserver/plain_server.h"
#include "tests/apiserver/test_webhook.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const std::string kValidating =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const std::string kMutating = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const std::string kConfigMaps = "/api/v1/namespaces/default/configmaps";

json url_client(const TestWebhook& webhook, const std::string& path = "/validate") {
  return {{"url", webhook.url(path)}, {"caBundle", webhook.ca_bundle()}};
}

json config_map_rule(std::vector<std::string> operations = {"CREATE", "UPDATE", "DELETE"}) {
  return rule(operations, "", "v1", {"configmaps"});
}

class AdmissionWebhookTest : public ::testing::Test {
 protected:
  AdmissionWebhookTest()
      : server_(plain_options()), client_(server_.url(), "", {"admin-token", "", ""}) {}

  void install(const std::string& collection, const std::string& kind,
               const std::vector<json>& webhooks, const std::string& name = "hooks") {
    const ClientResponse response =
        client_.send("POST", collection, webhook_configuration(kind, name, webhooks));
    ASSERT_EQ(response.status, 201) << response.body;
  }
  void install_validating(const std::vector<json>& webhooks, const std::string& name = "hooks") {
    install(kValidating, "ValidatingWebhookConfiguration", webhooks, name);
  }
  void install_mutating(const std::vector<json>& webhooks, const std::string& name = "hooks") {
    install(kMutating, "MutatingWebhookConfiguration", webhooks, name);
  }

  ApiTestServer server_;
  TestClient client_;
  TestWebhook webhook_;
};

TEST_F(AdmissionWebhookTest, AnAllowedCreateIsStoredAndTheWebhookSeesTheRequest) {
  install_validating(
      {webhook_entry("check.tessel.dev", url_client(webhook_), {config_map_rule()})});
  const ClientResponse created = client_.send("POST", kConfigMaps, config_map("one"));
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(client_.get(kConfigMaps + "/one").status, 200);

  ASSERT_EQ(webhook_.requests().size(), 1u);
  EXPECT_EQ(webhook_.targets()[0], "/validate?timeout=10s");
  const json request = webhook_.requests()[0];
  EXPECT_FALSE(request.value("uid", "").empty());
  EXPECT_EQ(request["kind"], (json{{"group", ""}, {"version", "v1"}, {"kind", "ConfigMap"}}));
  EXPECT_EQ(request["resource"],
            (json{{"group", ""}, {"version", "v1"}, {"resource", "configmaps"}}));
  EXPECT_EQ(request["requestKind"], request["kind"]);
  EXPECT_EQ(request["requestResource"], request["resource"]);
  EXPECT_FALSE(request.contains("subResource"));
  EXPECT_EQ(request["name"], "one");
  EXPECT_EQ(request["namespace"], "default");
  EXPECT_EQ(request["operation"], "CREATE");
  EXPECT_EQ(request["userInfo"]["username"], "admin");
  EXPECT_EQ(request["userInfo"]["groups"], (json{"system:masters", "system:authenticated"}));
  EXPECT_EQ(request["object"]["data"], (json{{"k", "v"}}));
  // Validating webhooks see the object as it will be stored.
  EXPECT_FALSE(request["object"]["metadata"].value("uid", "").empty());
  EXPECT_TRUE(request["oldObject"].is_null());
  EXPECT_EQ(request["dryRun"], false);
  EXPECT_EQ(request["options"]["kind"], "CreateOptions");
  EXPECT_EQ(request["options"]["apiVersion"], "meta.k8s.io/v1");
}

TEST_F(AdmissionWebhookTest, ADenialAnswersTheWebhooksCodeAndMessageAndStoresNothing) {
  webhook_.answer([](const json&) {
    return json{{"allowed", false},
                {"status", {{"code", 403}, {"reason", "Forbidden"}, {"message", "no, thanks"}}}};
  });
  install_validating({webhook_entry("deny.tessel.dev", url_client(webhook_), {config_map_rule()})});
  const ClientResponse refused = client_.send("POST", kConfigMaps, config_map("one"));
  EXPECT_EQ(refused.status, 403);
  const json status = refused.json();
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["status"], "Failure");
  EXPECT_EQ(status["reason"], "Forbidden");
  EXPECT_EQ(status["code"], 403);
  EXPECT_EQ(status["message"],
            "admission webhook \"deny.tessel.dev\" denied the request: no, thanks");
  EXPECT_EQ(client_.get(kConfigMaps + "/one").status, 404);
}

TEST_F(AdmissionWebhookTest, ADenialWithoutCodeIs400AndWithoutMessageSaysSo) {
  webhook_.answer([](const json&) { return json{{"allowed", false}}; });
  install_validating({webhook_entry("deny.tessel.dev", url_client(webhook_), {config_map_rule()})});
  const ClientResponse refused = client_.send("POST", kConfigMaps, config_map("one"));
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.json()["message"],
            "admission webhook \"deny.tessel.dev\" denied the request without explanation");
  EXPECT_FALSE(refused.json().contains("reason"));
}

TEST_F(AdmissionWebhookTest, MutatingPatchesApplyBeforeValidationAndValidatingWebhooks) {
  TestWebhook mutator;
  mutator.answer([](const json& request) {
    // A mutating webhook sees the object as decoded: no uid or creationTimestamp yet.
    EXPECT_FALSE(request["object"]["metadata"].contains("uid"));
    const json patch =
        json::array({{{"op", "add"}, {"path", "/metadata/labels/mutated"}, {"value", "yes"}},
                     {{"op", "replace"}, {"path", "/data/k"}, {"value", "patched"}}});
    return json{{"allowed", true},
                {"patchType", "JSONPatch"},
                {"patch", kube::base64_encode(patch.dump())},
                {"warnings", {"mutated by the test"}}};
  });
  install_mutating(
      {webhook_entry("mutate.tessel.dev", url_client(mutator, "/mutate"), {config_map_rule()})});
  install_validating(
      {webhook_entry("check.tessel.dev", url_client(webhook_), {config_map_rule()})});
  const ClientResponse created = client_.send("POST", kConfigMaps, config_map("one"));
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.json()["metadata"]["labels"]["mutated"], "yes");
  EXPECT_EQ(created.json()["data"]["k"], "patched");
  EXPECT_EQ(created.header_values("Warning"),
            (std::vector<std::string>{"299 - \"mutated by the test\""}));
  ASSERT_EQ(webhook_.requests().size(), 1u);
  EXPECT_EQ(webhook_.requests()[0]["object"]["metadata"]["labels"]["mutated"], "yes");
  EXPECT_EQ(client_.get(kConfigMaps + "/one").json()["data"]["k"], "patched");
}

TEST_F(AdmissionWebhookTest, AnIfNeededWebhookIsCalledAgainWhenALaterOneChangedTheObject) {
  TestWebhook adder;
  adder.answer([](const json& request) {
    if (request["object"]["metadata"]["labels"].contains("added")) return json{{"allowed", true}};
    const json patch =
        json::array({{{"op", "add"}, {"path", "/metadata/labels/added"}, {"value", "yes"}}});
    return json{{"allowed", true},
                {"patchType", "JSONPatch"},
                {"patch", kube::base64_encode(patch.dump())}};
  });
  json first =
      webhook_entry("first.tessel.dev", url_client(webhook_, "/mutate"), {config_map_rule()});
  first["reinvocationPolicy"] = "IfNeeded";
  install_mutating({first}, "a-first");
  install_mutating(
      {webhook_entry("adder.tessel.dev", url_client(adder, "/mutate"), {config_map_rule()})},
      "b-adder");
  ASSERT_EQ(client_.send("POST", kConfigMaps, config_map("one")).status, 201);
  const std::vector<json> calls = webhook_.requests();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_FALSE(calls[0]["object"]["metadata"]["labels"].contains("added"));
  EXPECT_EQ(calls[1]["object"]["metadata"]["labels"]["added"], "yes");
  EXPECT_EQ(adder.requests().size(), 1u);

  // Nothing changed after it: a webhook is called once, IfNeeded or not.
  ASSERT_EQ(client_.send("POST", kConfigMaps, config_map("two", {{"added", "already"}})).status,
            201);
  EXPECT_EQ(webhook_.requests().size(), 3u);
}

TEST_F(AdmissionWebhookTest, APatchThatDoesNotApplyIsAnInternalError) {
  TestWebhook mutator;
  mutator.answer([](const json&) {
    const json patch = json::array({{{"op", "remove"}, {"path", "/spec/missing"}}});
    return json{{"allowed", true},
                {"patchType", "JSONPatch"},
                {"patch", kube::base64_encode(patch.dump())}};
  });
  install_mutating(
      {webhook_entry("mutate.tessel.dev", url_client(mutator, "/mutate"), {config_map_rule()})});
  const ClientResponse refused = client_.send("POST", kConfigMaps, config_map("one"));
  EXPECT_EQ(refused.status, 500) << refused.body;
  EXPECT_EQ(refused.json()["reason"], "InternalError");
  EXPECT_EQ(client_.get(kConfigMaps + "/one").status, 404);
}

TEST_F(AdmissionWebhookTest, AResponseKubeApiserverWouldNotAcceptIsAFailedCall) {
  webhook_.answer([](const json&) {
    return json{
        {"allowed", true}, {"patchType", "JSONPatch"}, {"patch", kube::base64_encode("[]")}};
  });
  install_validating(
      {webhook_entry("patcher.tessel.dev", url_client(webhook_), {config_map_rule()})});
  const ClientResponse failed = client_.send("POST", kConfigMaps, config_map("one"));
  EXPECT_EQ(failed.status, 500);
  EXPECT_EQ(failed.json()["message"],
            "Internal error occurred: failed calling webhook \"patcher.tessel.dev\": received "
            "invalid webhook response: validating webhook may not return response.patch or "
            "response.patchType");
}

TEST_F(AdmissionWebhookTest, UpdatesPatchesAndDeletesCarryTheOldObjectAndTheirOptions) {
  ASSERT_EQ(client_.send("POST", kConfigMaps, config_map("one")).status, 201);
  install_validating(
      {webhook_entry("check.tessel.dev", url_client(webhook_), {config_map_rule()})});
  const ClientResponse patched = client_.send(
      "PATCH", kConfigMaps + "/one", json{{"data", {{"k", "w"}}}}, "application/merge-patch+json");
  ASSERT_EQ(patched.status, 200) << patched.body;
  ASSERT_EQ(client_.send("DELETE", kConfigMaps + "/one", nullptr).status, 200);

  const std::vector<json> requests = webhook_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0]["operation"], "UPDATE");
  EXPECT_EQ(requests[0]["object"]["data"]["k"], "w");
  EXPECT_EQ(requests[0]["oldObject"]["data"]["k"], "v");
  EXPECT_EQ(requests[0]["options"]["kind"], "UpdateOptions");
  EXPECT_EQ(requests[1]["operation"], "DELETE");
  EXPECT_TRUE(requests[1]["object"].is_null());
  EXPECT_EQ(requests[1]["oldObject"]["data"]["k"], "w");
  EXPECT_EQ(requests[1]["options"]["kind"], "DeleteOptions");
}

TEST_F(AdmissionWebhookTest, ADryRunIsSentAsOneAndStoresNothing) {
  install_validating(
      {webhook_entry("check.tessel.dev", url_client(webhook_), {config_map_rule()})});
  const ClientResponse created =
      client_.send("POST", kConfigMaps + "?dryRun=All", config_map("one"));
  ASSERT_EQ(created.status, 201) << created.body;
  ASSERT_EQ(webhook_.requests().size(), 1u);
  EXPECT_EQ(webhook_.requests()[0]["dryRun"], true);
  EXPECT_EQ(webhook_.requests()[0]["options"]["dryRun"], json{"All"});
  EXPECT_EQ(client_.get(kConfigMaps + "/one").status, 404);
}

TEST_F(AdmissionWebhookTest, ATimeoutFailsTheRequestUnderFailAndIsSkippedUnderIgnore) {
  webhook_.delay(milliseconds(2500));
  json slow = webhook_entry("slow.tessel.dev", url_client(webhook_), {config_map_rule({"CREATE"})});
  slow["timeoutSeconds"] = 1;
  install_validating({slow});
  const ClientResponse failed = client_.send("POST", kConfigMaps, config_map("one"));
  EXPECT_EQ(failed.status, 500);
  const std::string reason =
      "failed calling webhook \"slow.tessel.dev\": failed to call webhook: Post \"" +
      webhook_.url("/validate") + "?timeout=1s\": context deadline exceeded";
  EXPECT_EQ(failed.json()["reason"], "InternalError");
  EXPECT_EQ(failed.json()["message"], "Internal error occurred: " + reason);
  EXPECT_EQ(failed.json()["details"]["causes"][0]["message"], reason);
  EXPECT_EQ(client_.get(kConfigMaps + "/one").status, 404);

  slow["name"] = "ignored.tessel.dev";
  slow["failurePolicy"] = "Ignore";
  ASSERT_EQ(client_.send("DELETE", kValidating + "/hooks", nullptr).status, 200);
  install_validating({slow});
  EXPECT_EQ(client_.send("POST", kConfigMaps, config_map("two")).status, 201);
}

TEST_F(AdmissionWebhookTest, AnUnreachableWebhookFollowsItsFailurePolicy) {
  // Port 1 on loopback: nothing listens there, the connection is refused.
  const json unreachable = {{"url", "https://127.0.0.1:1/validate"},
                            {"caBundle", webhook_.ca_bundle()}};
  json fail = webhook_entry("down.tessel.dev", unreachable, {config_map_rule({"CREATE"})});
  json ignore = fail;
  ignore["name"] = "down-ignored.tessel.dev";
  ignore["failurePolicy"] = "Ignore";
  install_validating({ignore}, "a-ignored");
  EXPECT_EQ(client_.send("POST", kConfigMaps, config_map("one")).status, 201);
  install_validating({fail}, "b-failing");
  const ClientResponse failed = client_.send("POST", kConfigMaps, config_map("two"));
  EXPECT_EQ(failed.status, 500);
  EXPECT_EQ(failed.json()["message"],
            "Internal error occurred: failed calling webhook \"down.tessel.dev\": failed to call "
            "webhook: Post \"https://127.0.0.1:1/validate?timeout=10s\": dial tcp 127.0.0.1:1: "
            "connect: connection refused");
}

TEST_F(AdmissionWebhookTest, AWebhookWhoseCertificateTheCaBundleDoesNotSignIsNotTrusted) {
  const TestWebhook other;  // another CA
  install_validating({webhook_entry(
      "untrusted.tessel.dev", {{"url", webhook_.url("/validate")}, {"caBundle", other.ca_bundle()}},
      {config_map_rule()})});
  const ClientResponse failed = client_.send("POST", kConfigMaps, config_map("one"));
  EXPECT_EQ(failed.status, 500);
  EXPECT_EQ(failed.json()["message"],
            "Internal error occurred: failed calling webhook \"untrusted.tessel.dev\": failed to "
            "call webhook: Post \"" +
                webhook_.url("/validate") +
                "?timeout=10s\": x509: certificate signed by unknown authority");
  EXPECT_TRUE(webhook_.requests().empty());
}

TEST_F(AdmissionWebhookTest, RulesThatDoNotNameTheRequestLeaveTheWebhookUncalled) {
  install_validating(
      {webhook_entry("secrets.tessel.dev", url_client(webhook_),
                     {rule({"CREATE"}, "", "v1", {"secrets"})}),
       webhook_entry("updates.tessel.dev", url_client(webhook_), {config_map_rule({"UPDATE"})}),
       webhook_entry("apps.tessel.dev", url_client(webhook_), {rule({"*"}, "apps", "*", {"*"})}),
       webhook_entry("cluster.tessel.dev", url_client(webhook_),
                     {json{{"operations", {"*"}},
                           {"apiGroups", {"*"}},
                           {"apiVersions", {"*"}},
                           {"resources", {"*"}},
                           {"scope", "Cluster"}}}),
       webhook_entry("status.tessel.dev", url_client(webhook_),
                     {rule({"*"}, "*", "*", {"*/status"})})});
  ASSERT_EQ(client_.send("POST", kConfigMaps, config_map("one")).status, 201);
  EXPECT_TRUE(webhook_.requests().empty());

  // "*/*" names every resource and subresource; "*" only resources.
  install_validating(
      {webhook_entry("all.tessel.dev", url_client(webhook_), {rule({"*"}, "*", "*", {"*/*"})})},
      "all");
  ASSERT_EQ(client_.send("POST", kConfigMaps, config_map("two")).status, 201);
  EXPECT_EQ(webhook_.requests().size(), 1u);
}

TEST_F(AdmissionWebhookTest, SubresourceRulesNameOnlyThatSubresource) {
  install_validating({webhook_entry("status.tessel.dev", url_client(webhook_),
                                    {rule({"UPDATE"}, "", "v1", {"namespaces/status"})})});
  const json namespace_ = {
      {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "sub"}}}};
  ASSERT_EQ(client_.send("POST", "/api/v1/namespaces", namespace_).status, 201);
  ASSERT_EQ(
      client_
          .send("PATCH", "/api/v1/namespaces/sub", json{{"metadata", {{"labels", {{"a", "b"}}}}}},
                "application/merge-patch+json")
          .status,
      200);
  EXPECT_TRUE(webhook_.requests().empty());
  const ClientResponse status = client_.send("PATCH", "/api/v1/namespaces/sub/status",
                                             json{{"status", {{"conditions", json::array()}}}},
                                             "application/merge-patch+json");
  ASSERT_EQ(status.status, 200) << status.body;
  ASSERT_EQ(webhook_.requests().size(), 1u);
  EXPECT_EQ(webhook_.requests()[0]["subResource"], "status");
  EXPECT_EQ(webhook_.requests()[0]["namespace"], "sub");
}

TEST_F(AdmissionWebhookTest, NamespaceAndObjectSelectorsPickTheRequests) {
  for (const auto& [name, labels] :
       {std::pair{"watched", json{{"admission", "on"}}}, {"unwatched", json::object()}}) {
    const json namespace_ = {{"apiVersion", "v1"},
                             {"kind", "Namespace"},
                             {"metadata", {{"name", name}, {"labels", labels}}}};
    ASSERT_EQ(client_.send("POST", "/api/v1/namespaces", namespace_).status, 201);
  }
  json by_namespace = webhook_entry("ns.tessel.dev", url_client(webhook_), {config_map_rule()});
  by_namespace["namespaceSelector"] = {{"matchLabels", {{"admission", "on"}}}};
  json by_object = webhook_entry("object.tessel.dev", url_client(webhook_), {config_map_rule()});
  by_object["objectSelector"] = {
      {"matchExpressions", {{{"key", "checked"}, {"operator", "In"}, {"values", {"yes"}}}}}};
  install_validating({by_namespace, by_object});

  ASSERT_EQ(client_.send("POST", "/api/v1/namespaces/unwatched/configmaps", config_map("a")).status,
            201);
  EXPECT_TRUE(webhook_.requests().empty());
  ASSERT_EQ(client_.send("POST", "/api/v1/namespaces/watched/configmaps", config_map("b")).status,
            201);
  ASSERT_EQ(client_
                .send("POST", "/api/v1/namespaces/unwatched/configmaps",
                      config_map("c", {{"checked", "yes"}}))
                .status,
            201);
  const std::vector<json> requests = webhook_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0]["name"], "b");
  EXPECT_EQ(requests[1]["name"], "c");
}

TEST_F(AdmissionWebhookTest, AServiceReferenceIsRoutedToTheServicesEndpoints) {
  TestWebhook in_cluster({"hook.webhooks.svc"});
  const json namespace_ = {
      {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "webhooks"}}}};
  ASSERT_EQ(client_.send("POST", "/api/v1/namespaces", namespace_).status, 201);
  const json service_client = {
      {"service", {{"namespace", "webhooks"}, {"name", "hook"}, {"path", "/validate"}}},
      {"caBundle", in_cluster.ca_bundle()}};
  install_validating({webhook_entry("svc.tessel.dev", service_client, {config_map_rule()})});

  // No Service yet: the call fails as kube-apiserver's resolver does.
  ClientResponse failed = client_.send("POST", kConfigMaps, config_map("one"));
  EXPECT_EQ(failed.status, 500);
  EXPECT_EQ(failed.json()["message"],
            "Internal error occurred: failed calling webhook \"svc.tessel.dev\": failed to call "
            "webhook: Post \"https://hook.webhooks.svc:443/validate?timeout=10s\": service "
            "\"hook\" not found");

  const json service = {
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", {{"name", "hook"}}},
      {"spec", {{"ports", {{{"name", "https"}, {"port", 443}, {"targetPort", 9443}}}}}}};
  ASSERT_EQ(client_.send("POST", "/api/v1/namespaces/webhooks/services", service).status, 201);
  failed = client_.send("POST", kConfigMaps, config_map("one"));
  EXPECT_EQ(failed.status, 500);
  EXPECT_NE(failed.json()["message"].get<std::string>().find("endpoints \"hook\" not found"),
            std::string::npos)
      << failed.body;

  const json endpoints = {{"apiVersion", "v1"},
                          {"kind", "Endpoints"},
                          {"metadata", {{"name", "hook"}}},
                          {"subsets",
                           {{{"addresses", {{{"ip", "127.0.0.1"}}}},
                             {"ports", {{{"name", "https"}, {"port", in_cluster.port()}}}}}}}};
  const ClientResponse stored =
      client_.send("POST", "/api/v1/namespaces/webhooks/endpoints", endpoints);
  ASSERT_EQ(stored.status, 201) << stored.body;
  EXPECT_EQ(stored.json()["subsets"][0]["ports"][0]["protocol"], "TCP");
  ASSERT_EQ(client_.send("POST", kConfigMaps, config_map("one")).status, 201);
  ASSERT_EQ(in_cluster.targets(), (std::vector<std::string>{"/validate?timeout=10s"}));
}

TEST_F(AdmissionWebhookTest, ConfigurationsAreDefaultedAsTheRealServerDefaultsThem) {
  install_validating(
      {webhook_entry("check.tessel.dev", url_client(webhook_), {config_map_rule()})});
  const json hook = client_.get(kValidating + "/hooks").json()["webhooks"][0];
  EXPECT_EQ(hook["failurePolicy"], "Fail");
  EXPECT_EQ(hook["matchPolicy"], "Equivalent");
  EXPECT_EQ(hook["timeoutSeconds"], 10);
  EXPECT_EQ(hook["namespaceSelector"], json::object());
  EXPECT_EQ(hook["objectSelector"], json::object());
  EXPECT_EQ(hook["rules"][0]["scope"], "*");

  install_mutating({webhook_entry("mutate.tessel.dev",
                                  {{"service", {{"namespace", "default"}, {"name", "hook"}}}},
                                  {config_map_rule()})});
  const json mutating = client_.get(kMutating + "/hooks").json()["webhooks"][0];
  EXPECT_EQ(mutating["reinvocationPolicy"], "Never");
  EXPECT_EQ(mutating["clientConfig"]["service"]["port"], 443);
}

TEST_F(AdmissionWebhookTest, AStrategicMergePatchMergesWebhooksByName) {
  install_validating({webhook_entry("one.tessel.dev", url_client(webhook_), {config_map_rule()}),
                      webhook_entry("two.tessel.dev", url_client(webhook_), {config_map_rule()})});
  const json patch = {{"webhooks", {{{"name", "two.tessel.dev"}, {"timeoutSeconds", 5}}}}};
  const ClientResponse patched = client_.send("PATCH", kValidating + "/hooks", patch,
                                              "application/strategic-merge-patch+json");
  ASSERT_EQ(patched.status, 200) << patched.body;
  const json webhooks = patched.json()["webhooks"];
  ASSERT_EQ(webhooks.size(), 2u);
  EXPECT_EQ(webhooks[0]["name"], "one.tessel.dev");
  EXPECT_EQ(webhooks[0]["timeoutSeconds"], 10);
  EXPECT_EQ(webhooks[1]["timeoutSeconds"], 5);
  EXPECT_EQ(webhooks[1]["clientConfig"]["url"], webhook_.url("/validate"));
}

std::set<std::pair<std::string, std::string>> causes_of(const json& status) {
  std::set<std::pair<std::string, std::string>> causes;
  for (const json& cause : status["details"]["causes"]) {
    causes.insert({cause.value("field", ""), cause.value("message", "")});
  }
  return causes;
}

TEST_F(AdmissionWebhookTest, InvalidConfigurationsAreRefusedWithEveryCause) {
  json bad_url = webhook_entry("short", {{"url", "http://user@example.com/x?a=b"}},
                               {rule({"CREATE", "*"}, "", "", {"*/*", "pods"})});
  bad_url.erase("sideEffects");
  bad_url["timeoutSeconds"] = 31;
  bad_url["failurePolicy"] = "Sometimes";
  bad_url["admissionReviewVersions"] = {"v2"};
  json both = webhook_entry(
      "both.tessel.dev",
      {{"url", "https://example.com/"}, {"service", {{"namespace", "default"}, {"name", "hook"}}}},
      {config_map_rule()});
  both["sideEffects"] = "Some";
  json no_service_name =
      webhook_entry("service.tessel.dev",
                    {{"service", {{"namespace", "default"}, {"port", 70000}, {"path", "x"}}}},
                    {config_map_rule()});
  no_service_name["namespaceSelector"] = {
      {"matchExpressions", {{{"key", "a"}, {"operator", "In"}}}}};
  json duplicate =
      webhook_entry("both.tessel.dev", {{"url", "https://example.com/"}}, {config_map_rule()});
  const ClientResponse refused =
      client_.send("POST", kValidating,
                   webhook_configuration("ValidatingWebhookConfiguration", "bad",
                                         {bad_url, both, no_service_name, duplicate}));
  ASSERT_EQ(refused.status, 422) << refused.body;
  const json status = refused.json();
  EXPECT_EQ(status["reason"], "Invalid");
  EXPECT_EQ(status["details"]["kind"], "ValidatingWebhookConfiguration");
  EXPECT_EQ(status["details"]["group"], "admissionregistration.k8s.io");
  const std::set<std::pair<std::string, std::string>> expected = {
      {"webhooks[0].name",
       "Invalid value: \"short\": should be a domain with at least three segments separated by "
       "dots"},
      {"webhooks[0].rules[0].operations",
       "Invalid value: []string{\"CREATE\", \"*\"}: if '*' is present, must not specify other "
       "operations"},
      {"webhooks[0].rules[0].apiVersions[0]", "Required value"},
      {"webhooks[0].rules[0].resources",
       "Invalid value: []string{\"*/*\", \"pods\"}: if '*/*' is present, must not specify other "
       "resources"},
      {"webhooks[0].failurePolicy",
       "Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\""},
      {"webhooks[0].sideEffects", "Required value: must specify one of None, NoneOnDryRun"},
      {"webhooks[0].timeoutSeconds",
       "Invalid value: 31: the timeout value must be between 1 and 30 seconds"},
      {"webhooks[0].clientConfig.url",
       "Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: "
       "https://host[/path]"},
      {"webhooks[0].clientConfig.url",
       "Invalid value: \"user\": user information is not permitted in the URL"},
      {"webhooks[0].clientConfig.url",
       "Invalid value: \"a=b\": query parameters are not permitted in the URL"},
      {"webhooks[0].admissionReviewVersions",
       "Invalid value: []string{\"v2\"}: must include at least one of v1, v1beta1"},
      {"webhooks[1].sideEffects",
       "Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\""},
      {"webhooks[1].clientConfig", "Required value: exactly one of url or service is required"},
      {"webhooks[2].namespaceSelector.matchExpressions[0].values",
       "Required value: must be specified when `operator` is 'In' or 'NotIn'"},
      {"webhooks[2].clientConfig.service.name", "Required value: service name is required"},
      {"webhooks[2].clientConfig.service.port",
       "Invalid value: 70000: port is not valid: must be between 1 and 65535, inclusive"},
      {"webhooks[2].clientConfig.service.path", "Invalid value: \"x\": must start with a '/'"},
      // kube-apiserver then checks the path's segments after its first character: none left.
      {"webhooks[2].clientConfig.service.path",
       "Invalid value: \"x\": segment[0] may not be empty"},
      {"webhooks[3].name", "Duplicate value: \"both.tessel.dev\""},
  };
  EXPECT_EQ(causes_of(status), expected) << status.dump(2);
  EXPECT_EQ(client_.get(kValidating + "/bad").status, 404);
}

TEST_F(AdmissionWebhookTest, ConfigurationsThatDoNotDecodeAreBadRequests) {
  json bad_ca = webhook_entry("check.tessel.dev",
                              {{"url", webhook_.url("/validate")}, {"caBundle", "no*base64"}},
                              {config_map_rule()});
  ClientResponse refused =
      client_.send("POST", kValidating,
                   webhook_configuration("ValidatingWebhookConfiguration", "bad", {bad_ca}));
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.json()["message"],
            "ValidatingWebhookConfiguration in version \"v1\" cannot be handled as a "
            "ValidatingWebhookConfiguration: illegal base64 data at input byte 2");
  json rules_not_a_list = webhook_entry("check.tessel.dev", url_client(webhook_), {});
  rules_not_a_list["rules"] = config_map_rule();
  refused = client_.send(
      "POST", kMutating,
      webhook_configuration("MutatingWebhookConfiguration", "bad", {rules_not_a_list}));
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.json()["message"],
            "MutatingWebhookConfiguration in version \"v1\" cannot be handled as a "
            "MutatingWebhookConfiguration: json: cannot unmarshal object into Go struct field "
            "MutatingWebhook.webhooks.rules of type []v1.RuleWithOperations");
}

TEST_F(AdmissionWebhookTest, ConfigurationsAreServedAndListedInDiscovery) {
  const json group = client_.get("/apis/admissionregistration.k8s.io/v1").json();
  std::set<std::string> names;
  for (const json& resource : group["resources"]) names.insert(resource["name"]);
  EXPECT_TRUE(names.count("validatingwebhookconfigurations"));
  EXPECT_TRUE(names.count("mutatingwebhookconfigurations"));
  install_validating(
      {webhook_entry("check.tessel.dev", url_client(webhook_), {config_map_rule()})});
  const json list = client_.get(kValidating).json();
  EXPECT_EQ(list["kind"], "ValidatingWebhookConfigurationList");
  ASSERT_EQ(list["items"].size(), 1u);
  // The configurations themselves are never sent to webhooks, whatever their rules.
  install_validating({webhook_entry("everything.tessel.dev", url_client(webhook_),
                                    {rule({"*"}, "*", "*", {"*/*"})})},
                     "everything");
  ASSERT_EQ(client_.send("DELETE", kValidating + "/hooks", nullptr).status, 200);
  EXPECT_TRUE(webhook_.requests().empty());
}

}  // namespace
}  // namespace tessel::testing
