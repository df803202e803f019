// tessel's own admission webhooks (operator/server/webhook.h) behind the API test server, as a
// cluster runs them: registered with admissionregistration.k8s.io/v1 configurations applied by
// the real kubectl, a good TrainingJob defaulted and admitted, a bad one refused by
// `kubectl apply` with the field named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "api/yaml_json.h"
#include "kube/base64.h"
#include "operator/server/https_router.h"
#include "operator/server/webhook.h"
#include "tests/kubectl/child_process.h"
#include "tests/kubectl/kubectl.h"
#include "tests/operator/https_test_client.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

const std::string kSource = TESSEL_SOURCE_DIR;

json rules_for(const std::string& resource) {
  return json::array({{{"operations", {"CREATE", "UPDATE"}},
                       {"apiGroups", {"tessel.dev"}},
                       {"apiVersions", {"v1alpha1"}},
                       {"resources", {resource}}}});
}

json configuration(const std::string& kind, const std::string& name, const std::string& url,
                   const std::string& ca_pem) {
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", kind},
          {"metadata", {{"name", name}}},
          {"webhooks",
           {{{"name", name},
             {"clientConfig", {{"url", url}, {"caBundle", kube::base64_encode(ca_pem)}}},
             {"rules", rules_for("trainingjobs")},
             {"sideEffects", "None"},
             {"admissionReviewVersions", {"v1"}}}}}};
}

class TesselWebhookKubectl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!find_on_path("kubectl")) GTEST_SKIP() << "no kubectl on PATH";
    ApiTestServerOptions options;
    options.crd_directory = kSource + "/crds";
    server_ = std::make_unique<ApiTestServer>(options);
    std::random_device random;
    work_dir_ = std::filesystem::temp_directory_path() /
                ("tessel-webhook-kubectl-" + std::to_string(random()));
    std::filesystem::create_directories(work_dir_);
    kubectl_ =
        std::make_unique<Kubectl>(server_->write_kubeconfig((work_dir_ / "kubeconfig").string()),
                                  "default", (work_dir_ / "cache").string());
    server::HttpsRouter router;
    server::add_webhook_routes(router);
    webhooks_ = server::testing::start_test_https_server(ca_, router);
    ASSERT_TRUE(webhooks_);
  }

  void TearDown() override {
    if (!work_dir_.empty()) std::filesystem::remove_all(work_dir_);
  }

  std::string write_file(const std::string& name, const std::string& text) const {
    const std::string path = (work_dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // The example TrainingJob, named `name`, with `edit` applied.
  std::string example_job(const std::string& name, const std::function<void(json&)>& edit) const {
    const std::string path = kSource + "/examples/trainingjobs/fables.yaml";
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    json job = api::yaml_to_json(text.str(), path);
    job["metadata"]["name"] = name;
    edit(job);
    return write_file(name + ".json", job.dump());
  }

  ProcessResult kubectl(const std::vector<std::string>& args) const { return kubectl_->run(args); }

  TestCertificateAuthority ca_;
  std::unique_ptr<ApiTestServer> server_;
  std::filesystem::path work_dir_;
  std::unique_ptr<Kubectl> kubectl_;
  std::unique_ptr<server::HttpsServer> webhooks_;
};

TEST_F(TesselWebhookKubectl, ABadTrainingJobIsRefusedByKubectlApplyNamingTheField) {
  for (const auto& [kind, name, path] :
       {std::tuple{"MutatingWebhookConfiguration", "default.trainingjobs.tessel.dev", "/mutate"},
        {"ValidatingWebhookConfiguration", "validate.trainingjobs.tessel.dev", "/validate"}}) {
    std::string base = webhooks_->url();  // "https://127.0.0.1:<port>/"
    if (!base.empty() && base.back() == '/') base.pop_back();
    const json config = configuration(kind, name, base + path, ca_.ca_pem());
    const ProcessResult applied =
        kubectl({"apply", "-f", write_file(std::string(name) + ".json", config.dump())});
    ASSERT_EQ(applied.exit_code, 0) << describe(applied);
  }

  const ProcessResult good = kubectl({"apply", "-f", example_job("fables", [](json&) {})});
  EXPECT_EQ(good.exit_code, 0) << describe(good);
  EXPECT_EQ(good.out, "trainingjob.tessel.dev/fables created\n");

  // 15 sequences a step cannot be split into 2 replicas x micro-batches of 4.
  const std::string bad_path =
      example_job("uneven", [](json& job) { job["spec"]["batch"]["globalBatch"] = 15; });
  const ProcessResult bad = kubectl({"apply", "-f", bad_path});
  EXPECT_EQ(bad.exit_code, 1) << describe(bad);
  const std::string denied = "error when creating \"" + bad_path +
                             "\": admission webhook \"validate.trainingjobs.tessel.dev\" denied "
                             "the request: ";
  // The webhook refuses with 422 Invalid and no causes, which kubectl prints this way.
  EXPECT_EQ(bad.err.rfind("The request is invalid: " + denied, 0), 0u) << describe(bad);
  EXPECT_NE(bad.err.find("spec.batch.globalBatch"), std::string::npos) << describe(bad);
  const ProcessResult missing = kubectl({"get", "trainingjob", "uneven"});
  EXPECT_NE(missing.err.find("not found"), std::string::npos) << describe(missing);
}

}  // namespace
}  // namespace tessel::testing
