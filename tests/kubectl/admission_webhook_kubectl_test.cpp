// The real kubectl against a test server that calls an admission webhook: a webhook
// configuration applied with kubectl, and a denial printed as kubectl prints kube-apiserver's.
// Test server only: the webhook listens on this machine's loopback, which a real cluster's API
// server cannot reach.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/apiserver/test_webhook.h"
#include "tests/kubectl/kubectl_fixture.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

class AdmissionWebhookKubectl : public KubectlFixture {
 protected:
  // Applies a ValidatingWebhookConfiguration (JSON is YAML) sending ConfigMap creates and
  // updates to `webhook`.
  void apply_configuration(const TestWebhook& webhook, const std::string& name) {
    const json configuration = webhook_configuration(
        "ValidatingWebhookConfiguration", name,
        {webhook_entry("configmaps.tessel.dev",
                       {{"url", webhook.url("/validate")}, {"caBundle", webhook.ca_bundle()}},
                       {rule({"CREATE", "UPDATE"}, "", "v1", {"configmaps"})})});
    const std::string applied =
        kubectl_ok({"apply", "-f", write_file(name + ".json", configuration.dump())});
    EXPECT_EQ(applied,
              "validatingwebhookconfiguration.admissionregistration.k8s.io/" + name + " created\n");
  }
};

TEST_F(AdmissionWebhookKubectl, ADeniedApplyPrintsTheWebhooksMessage) {
  TESSEL_REQUIRE_TEST_SERVER(*cluster_, "a webhook on this machine's loopback");
  TestWebhook webhook;
  webhook.answer([](const json& request) {
    if (request["object"]["data"].value("mode", "") != "forbidden") return json{{"allowed", true}};
    return json{{"allowed", false},
                {"status",
                 {{"code", 403},
                  {"reason", "Forbidden"},
                  {"message", "data.mode: \"forbidden\" is not allowed here"}}}};
  });
  apply_configuration(webhook, random_name("deny-forbidden-mode"));

  const json config_map = {{"apiVersion", "v1"},
                           {"kind", "ConfigMap"},
                           {"metadata", {{"name", "settings"}}},
                           {"data", {{"mode", "forbidden"}}}};
  const std::string path = write_file("settings.json", config_map.dump());
  const std::string error = kubectl_fails({"apply", "-f", path});
  EXPECT_EQ(error, "Error from server (Forbidden): error when creating \"" + path +
                       "\": admission webhook \"configmaps.tessel.dev\" denied the request: "
                       "data.mode: \"forbidden\" is not allowed here\n");
  EXPECT_NE(kubectl_fails({"get", "configmap", "settings"}).find("not found"), std::string::npos);

  json allowed = config_map;
  allowed["data"]["mode"] = "fine";
  EXPECT_EQ(kubectl_ok({"apply", "-f", write_file("allowed.json", allowed.dump())}),
            "configmap/settings created\n");
  ASSERT_FALSE(webhook.requests().empty());
  EXPECT_EQ(webhook.requests().back()["operation"], "CREATE");
}

}  // namespace
}  // namespace tessel::testing
