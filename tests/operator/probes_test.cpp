// The operator's one HTTPS server with every route (operator_endpoint): /healthz, /readyz and
// /metrics as the kubelet's probes and Prometheus call them, beside the webhooks; unknown paths
// and wrong methods get the status that says so.
#include "operator/server/probes.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "operator/server/endpoint.h"
#include "tests/operator/https_test_client.h"
#include "tests/support/http_server.h"

namespace tessel::server {
namespace {

using testing::HttpsAnswer;

class Probes : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_.reconcile_total.inc({"trainingjob", "success"});
    server_ = testing::start_test_https_server(ca_, operator_endpoint(metrics_.registry, ready_));
    ASSERT_TRUE(server_);
  }

  HttpsAnswer call(const std::string& method, const std::string& path,
                   const std::string& body = "") const {
    return testing::https_request(method, server_->url() + path, body, ca_.ca_pem());
  }

  tessel::testing::TestCertificateAuthority ca_;
  OperatorMetrics metrics_;
  Readiness ready_{"informers not synced"};
  std::unique_ptr<HttpsServer> server_;
};

TEST_F(Probes, HealthzAnswersOkWhileTheProcessServes) {
  const HttpsAnswer answer = call("GET", "healthz");
  ASSERT_EQ(answer.error, "");
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.body, "ok\n");
}

TEST_F(Probes, ReadyzSaysWhyUntilTheOperatorIsReady) {
  const HttpsAnswer before = call("GET", "readyz");
  EXPECT_EQ(before.status, 503);
  EXPECT_EQ(before.body, "not ready: informers not synced\n");
  ready_.set_ready();
  const HttpsAnswer ready = call("GET", "readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ok\n");
  ready_.set_not_ready("lost the lease");
  EXPECT_EQ(call("GET", "readyz").body, "not ready: lost the lease\n");
}

TEST_F(Probes, MetricsServesTheRegistryInTheTextFormat) {
  const HttpsAnswer answer = call("GET", "metrics");
  ASSERT_EQ(answer.error, "");
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.header("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(answer.body, metrics_.registry.render());
  EXPECT_NE(
      answer.body.find("tessel_reconcile_total{controller=\"trainingjob\",result=\"success\"} 1\n"),
      std::string::npos)
      << answer.body;
}

TEST_F(Probes, UnknownPathsAre404AndWrongMethods405WithAllow) {
  const HttpsAnswer missing = call("GET", "livez");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, "/livez: not found\n");
  const HttpsAnswer post = call("POST", "metrics", "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.header("allow"), "GET");
  EXPECT_EQ(post.body, "/metrics: POST is not served; use GET\n");
  EXPECT_EQ(call("DELETE", "healthz").status, 405);
  const HttpsAnswer get_webhook = call("GET", "mutate");
  EXPECT_EQ(get_webhook.status, 405);
  EXPECT_EQ(get_webhook.header("allow"), "POST");
  // The webhooks share the server.
  EXPECT_EQ(call("POST", "validate", "{not json").status, 400);
  EXPECT_EQ(call("POST", "mutate", "{not json").status, 400);
}

TEST(HttpsRouterRoutes, ARouteDefinedTwiceIsRefused) {
  HttpsRouter router;
  router.route("GET", "/healthz", [](const HttpsRequest&) { return HttpsResponse{}; });
  try {
    router.route("GET", "/healthz", [](const HttpsRequest&) { return HttpsResponse{}; });
    FAIL() << "defined twice";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "HTTPS route GET /healthz is defined twice");
  }
}

}  // namespace
}  // namespace tessel::server
