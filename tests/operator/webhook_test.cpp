// The admission webhook over real HTTPS (cpprestsdk), called as kube-apiserver calls it: a POST
// of an AdmissionReview to /validate over TLS verified against the CA of the webhook's
// certificate (what the webhook configuration's caBundle holds).
#include "operator/server/webhook.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/yaml_json.h"
#include "operator/server/https_router.h"
#include "tests/operator/https_test_client.h"
#include "tests/support/http_server.h"

namespace tessel::server {
namespace {

using nlohmann::json;
using testing::HttpsAnswer;

HttpsAnswer post(const std::string& url, const std::string& body, const std::string& ca_pem,
                 const std::string& method = "POST") {
  return testing::https_request(method, url, body, ca_pem);
}

HttpsRouter webhook_routes() {
  HttpsRouter router;
  add_webhook_routes(router);
  return router;
}

class Webhook : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::start_test_https_server(ca_, webhook_routes());
    ASSERT_TRUE(server_);
  }

  json review_of(const json& object) const {
    return {{"apiVersion", "admission.k8s.io/v1"},
            {"kind", "AdmissionReview"},
            {"request",
             {{"uid", "e911857d-c318-11e8-bbad-025000000001"},
              {"kind", {{"group", "tessel.dev"}, {"version", "v1alpha1"}, {"kind", "TrainingJob"}}},
              {"operation", "CREATE"},
              {"object", object}}}};
  }

  json example_job() const {
    const std::string path = std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/fables.yaml";
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return api::yaml_to_json(text.str(), path);
  }

  tessel::testing::TestCertificateAuthority ca_;
  std::unique_ptr<HttpsServer> server_;
};

TEST_F(Webhook, AnswersAdmissionReviewsOverVerifiedTls) {
  const HttpsAnswer good =
      post(server_->url() + "validate", review_of(example_job()).dump(), ca_.ca_pem());
  ASSERT_EQ(good.error, "");
  EXPECT_EQ(good.status, 200);
  const json allowed = json::parse(good.body);
  EXPECT_EQ(allowed["response"]["uid"], "e911857d-c318-11e8-bbad-025000000001");
  EXPECT_EQ(allowed["response"]["allowed"], true);

  json bad = example_job();
  bad["spec"]["parallelism"]["stages"] = 9;
  const json refused =
      json::parse(post(server_->url() + "validate", review_of(bad).dump(), ca_.ca_pem()).body);
  EXPECT_EQ(refused["response"]["allowed"], false);
  EXPECT_EQ(refused["response"]["status"]["message"],
            "spec.parallelism.stages: stages x virtualStages = 9 x 1 = 9 exceeds the model's 4 "
            "layers");
}

TEST_F(Webhook, WrongRequestsGetTheStatusThatSaysWhy) {
  EXPECT_EQ(post(server_->url() + "validate", "{not json", ca_.ca_pem()).status, 400);
  EXPECT_EQ(post(server_->url() + "validate", "{\"kind\": \"Pod\"}", ca_.ca_pem()).status, 400);
  EXPECT_EQ(post(server_->url() + "mutate", "{}", ca_.ca_pem()).status, 400);
  EXPECT_EQ(post(server_->url() + "mutating", "{}", ca_.ca_pem()).status, 404);
  const HttpsAnswer get = post(server_->url() + "validate", "", ca_.ca_pem(), "GET");
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.header("allow"), "POST");
  const HttpsAnswer huge =
      post(server_->url() + "validate", std::string(kMaxRequestBytes + 1, ' '), ca_.ca_pem());
  EXPECT_EQ(huge.status, 413) << huge.error;
}

TEST_F(Webhook, AClientThatDoesNotTrustTheCaIsRefused) {
  const tessel::testing::TestCertificateAuthority other;
  const HttpsAnswer answer = post(server_->url() + "validate", "{}", other.ca_pem());
  EXPECT_NE(answer.error, "");
  EXPECT_EQ(answer.status, 0);
}

TEST(HttpsServer, ABadCertificateOrKeyIsNamed) {
  try {
    start_https_server("127.0.0.1", 1, "not a certificate", "not a key", webhook_routes());
    FAIL() << "started";
  } catch (const HttpsServerError& e) {
    EXPECT_EQ(std::string(e.what()), "https://127.0.0.1:1/: the certificate is not PEM");
  }
}

}  // namespace
}  // namespace tessel::server
