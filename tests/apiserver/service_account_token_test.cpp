// Service-account tokens on the API test server: TokenRequests, the token Secrets the legacy
// token controller fills, what the tokens authenticate as and when they stop; impersonation and
// SelfSubjectAccessReviews, which `kubectl auth can-i` uses.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "kube/base64.h"
#include "tests/apiserver/api_test_client.h"
#include "tests/apiserver/plain_server.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const std::string kAccounts = "/api/v1/namespaces/default/serviceaccounts";

bool eventually(const std::function<bool()>& done, milliseconds timeout = milliseconds(10000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return done();
}

json token_request(json spec = json::object()) {
  return {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"}, {"spec", spec}};
}

json account(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", name}}}};
}

json self_review(json resource_attributes) {
  return {{"apiVersion", "authorization.k8s.io/v1"},
          {"kind", "SelfSubjectAccessReview"},
          {"spec", {{"resourceAttributes", resource_attributes}}}};
}

class TokenTest : public ::testing::Test {
 protected:
  TokenTest() : server_(options()), admin_(server_.url(), "", {"admin-token", "", ""}) {}

  static ApiTestServerOptions options() {
    ApiTestServerOptions options = plain_options();
    options.authorization = Authorization::kRbac;
    return options;
  }

  std::string new_token(const std::string& name, json spec = json::object()) {
    const ClientResponse response =
        admin_.send("POST", kAccounts + "/" + name + "/token", token_request(spec));
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json()["status"].value("token", "");
  }

  // Asks the server who the token is (a SelfSubjectAccessReview only needs authentication);
  // 401 once the token stops authenticating.
  long status_with(const std::string& token) {
    TestClient client(server_.url(), "", {token, "", ""});
    return client.get("/api").status;
  }

  ApiTestServer server_;
  TestClient admin_;
};

TEST_F(TokenTest, ATokenRequestAnswersATokenOfTheAccount) {
  ASSERT_EQ(admin_.send("POST", kAccounts, account("robot")).status, 201);
  const ClientResponse response = admin_.send("POST", kAccounts + "/robot/token", token_request());
  ASSERT_EQ(response.status, 201) << response.body;
  const json answer = response.json();
  EXPECT_EQ(answer["kind"], "TokenRequest");
  EXPECT_EQ(answer["metadata"]["name"], "robot");
  EXPECT_EQ(answer["spec"]["expirationSeconds"], 3600);
  EXPECT_EQ(answer["spec"]["audiences"], json({"https://kubernetes.default.svc.cluster.local"}));
  EXPECT_TRUE(answer["status"]["expirationTimestamp"].is_string());
  const std::string token = answer["status"]["token"];
  // The token authenticates as the account, with its groups.
  server_.set_authorizer([](const RequestAttributes& attributes) {
    if (attributes.resource != "configmaps") return true;
    const auto& groups = attributes.user.groups;
    return attributes.user.name == "system:serviceaccount:default:robot" &&
           groups == std::vector<std::string>{"system:serviceaccounts",
                                              "system:serviceaccounts:default",
                                              "system:authenticated"};
  });
  TestClient robot(server_.url(), "", {token, "", ""});
  EXPECT_EQ(robot.get("/api/v1/namespaces/default/configmaps").status, 200);
}

TEST_F(TokenTest, ATokenRequestForAMissingAccountOrTooShortIsRefused) {
  const ClientResponse missing = admin_.send("POST", kAccounts + "/nobody/token", token_request());
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.json()["message"], "serviceaccounts \"nobody\" not found");
  ASSERT_EQ(admin_.send("POST", kAccounts, account("robot")).status, 201);
  const ClientResponse short_lived =
      admin_.send("POST", kAccounts + "/robot/token", token_request({{"expirationSeconds", 599}}));
  EXPECT_EQ(short_lived.status, 422);
  EXPECT_EQ(short_lived.json()["message"],
            "TokenRequest.authentication.k8s.io \"robot\" is invalid: spec.expirationSeconds: "
            "Invalid value: 599: may not specify a duration less than 10 minutes");
}

TEST_F(TokenTest, ATokenStopsOnceItsAccountIsDeleted) {
  ASSERT_EQ(admin_.send("POST", kAccounts, account("robot")).status, 201);
  const std::string token = new_token("robot");
  EXPECT_EQ(status_with(token), 200);
  ASSERT_EQ(admin_.request("DELETE", kAccounts + "/robot").status, 200);
  EXPECT_EQ(status_with(token), 401);
  // An account of the same name made again is another account.
  ASSERT_EQ(admin_.send("POST", kAccounts, account("robot")).status, 201);
  EXPECT_EQ(status_with(token), 401);
  EXPECT_EQ(status_with(new_token("robot")), 200);
}

TEST_F(TokenTest, ATokenBoundToAPodStopsWithThePod) {
  ASSERT_EQ(admin_.send("POST", kAccounts, account("robot")).status, 201);
  const ClientResponse missing = admin_.send(
      "POST", kAccounts + "/robot/token",
      token_request({{"boundObjectRef", {{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", "p"}}}}));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.json()["message"], "pods \"p\" not found");
}

TEST_F(TokenTest, TheTokenControllerFillsTokenSecrets) {
  ASSERT_EQ(admin_.send("POST", kAccounts, account("robot")).status, 201);
  const json secret = {{"apiVersion", "v1"},
                       {"kind", "Secret"},
                       {"metadata",
                        {{"name", "robot-token"},
                         {"annotations", {{"kubernetes.io/service-account.name", "robot"}}}}},
                       {"type", "kubernetes.io/service-account-token"}};
  ASSERT_EQ(admin_.send("POST", "/api/v1/namespaces/default/secrets", secret).status, 201);
  const std::string path = "/api/v1/namespaces/default/secrets/robot-token";
  json filled;
  ASSERT_TRUE(eventually([&] {
    filled = admin_.get(path).json();
    return filled.value("data", json::object()).contains("token");
  })) << filled.dump();
  const json account_object = admin_.get(kAccounts + "/robot").json();
  EXPECT_EQ(filled["metadata"]["annotations"]["kubernetes.io/service-account.uid"],
            account_object["metadata"]["uid"]);
  EXPECT_EQ(kube::base64_decode(filled["data"]["namespace"].get<std::string>()), "default");
  EXPECT_TRUE(filled["data"].contains("ca.crt"));
  const std::string token = *kube::base64_decode(filled["data"]["token"].get<std::string>());
  EXPECT_EQ(status_with(token), 200);
  // The Secret's token lasts as long as the Secret.
  ASSERT_EQ(admin_.request("DELETE", path).status, 200);
  EXPECT_EQ(status_with(token), 401);
}

TEST_F(TokenTest, TheTokenControllerDeletesTokenSecretsOfMissingAccounts) {
  const json secret = {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata",
       {{"name", "orphan"}, {"annotations", {{"kubernetes.io/service-account.name", "ghost"}}}}},
      {"type", "kubernetes.io/service-account-token"}};
  ASSERT_EQ(admin_.send("POST", "/api/v1/namespaces/default/secrets", secret).status, 201);
  EXPECT_TRUE(eventually(
      [&] { return admin_.get("/api/v1/namespaces/default/secrets/orphan").status == 404; }));
}

TEST_F(TokenTest, SelfSubjectAccessReviewsAskTheAuthorizer) {
  ASSERT_EQ(admin_.send("POST", kAccounts, account("robot")).status, 201);
  TestClient robot(server_.url(), "", {new_token("robot"), "", ""});
  const std::string reviews = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
  const json pods = {{"namespace", "default"}, {"verb", "list"}, {"resource", "pods"}};
  ClientResponse answer = robot.send("POST", reviews, self_review(pods));
  ASSERT_EQ(answer.status, 201) << answer.body;
  EXPECT_EQ(answer.json()["status"]["allowed"], false);
  answer = admin_.send("POST", reviews, self_review(pods));
  EXPECT_EQ(answer.json()["status"]["allowed"], true);
  EXPECT_EQ(admin_.get(reviews).status, 405);
  const ClientResponse neither = robot.send("POST", reviews,
                                            {{"apiVersion", "authorization.k8s.io/v1"},
                                             {"kind", "SelfSubjectAccessReview"},
                                             {"spec", json::object()}});
  EXPECT_EQ(neither.status, 422);
}

TEST_F(TokenTest, SelfSubjectRulesReviewsListTheRulesHeld) {
  ASSERT_EQ(admin_.send("POST", kAccounts, account("robot")).status, 201);
  TestClient robot(server_.url(), "", {new_token("robot"), "", ""});
  const std::string reviews = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
  const json review = {{"apiVersion", "authorization.k8s.io/v1"},
                       {"kind", "SelfSubjectRulesReview"},
                       {"spec", {{"namespace", "default"}}}};
  const ClientResponse answer = robot.send("POST", reviews, review);
  ASSERT_EQ(answer.status, 201) << answer.body;
  const json status = answer.json()["status"];
  EXPECT_EQ(status["incomplete"], false);
  // The bootstrap policy only: reviews, discovery and the public endpoints.
  EXPECT_EQ(status["resourceRules"],
            json({{{"verbs", {"create"}},
                   {"apiGroups", {"authorization.k8s.io"}},
                   {"resources", {"selfsubjectaccessreviews", "selfsubjectrulesreviews"}}}}));
  EXPECT_EQ(status["nonResourceRules"].size(), 2u);
  // Under an authorizer a test set, the rules cannot be listed.
  server_.set_authorizer([](const RequestAttributes&) { return true; });
  EXPECT_EQ(robot.send("POST", reviews, review).json()["status"]["incomplete"], true);
}

TEST_F(TokenTest, ImpersonationActsAsTheNamedUserWhenAllowed) {
  ASSERT_EQ(admin_.send("POST", kAccounts, account("robot")).status, 201);
  // The admin (system:masters) may impersonate the account, which may not list pods.
  const auto as_robot = [&](const TestClient& client) {
    return client.request("GET", "/api/v1/namespaces/default/pods", "", "application/json",
                          "application/json",
                          {"Impersonate-User: system:serviceaccount:default:robot"});
  };
  const ClientResponse denied = as_robot(admin_);
  EXPECT_EQ(denied.status, 403);
  EXPECT_EQ(denied.json()["message"],
            "pods is forbidden: User \"system:serviceaccount:default:robot\" cannot list "
            "resource \"pods\" in API group \"\" in the namespace \"default\"");
  // The account itself may not impersonate anyone.
  TestClient robot(server_.url(), "", {new_token("robot"), "", ""});
  const ClientResponse refused = as_robot(robot);
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.json()["message"],
            "serviceaccounts \"robot\" is forbidden: User \"system:serviceaccount:default:robot\" "
            "cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace "
            "\"default\"");
}

}  // namespace
}  // namespace tessel::testing
