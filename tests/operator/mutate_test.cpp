// The defaulting webhook (/mutate): the JSON Patch it answers with, applied by an RFC 6902
// implementation of its own (the API test server's), gives the object api/ defaults; an object
// with nothing missing gets no patch; malformed reviews are answered as /validate answers them.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/crds.h"
#include "api/trainingjob.h"
#include "api/yaml_json.h"
#include "kube/base64.h"
#include "operator/server/admission.h"
#include "operator/server/https_router.h"
#include "operator/server/webhook.h"
#include "tests/operator/example_job.h"
#include "tests/operator/https_test_client.h"
#include "tests/support/api_patch.h"
#include "tests/support/http_server.h"

namespace tessel::server {
namespace {

using nlohmann::json;

json review(const std::string& operation, const json& object,
            const std::string& kind = "TrainingJob", const std::string& sub_resource = "") {
  json request = {{"uid", "0df28fbd-5f5f-11e8-bc74-36e6bb280816"},
                  {"kind", {{"group", "tessel.dev"}, {"version", "v1alpha1"}, {"kind", kind}}},
                  {"operation", operation},
                  {"object", object}};
  if (!sub_resource.empty()) request["subResource"] = sub_resource;
  return {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}};
}

// The operations of a response's patch (base64 of a JSON array).
json patch_of(const json& response) {
  EXPECT_EQ(response.value("patchType", ""), "JSONPatch");
  const std::optional<std::string> text = kube::base64_decode(response.value("patch", ""));
  EXPECT_TRUE(text.has_value());
  return json::parse(text.value_or("[]"));
}

json defaulted_job(json job) {
  EXPECT_TRUE(api::trainingjob_errors(job).empty());
  return job;
}

TEST(Mutate, ThePatchAddsWhatDefaultingFillsIn) {
  const json job = example_job();
  const json answer = review_defaulting(review("CREATE", job));
  EXPECT_EQ(answer["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(answer["kind"], "AdmissionReview");
  const json response = answer["response"];
  EXPECT_EQ(response["uid"], "0df28fbd-5f5f-11e8-bc74-36e6bb280816");
  EXPECT_EQ(response["allowed"], true);
  const json operations = patch_of(response);
  ASSERT_TRUE(operations.is_array());
  ASSERT_FALSE(operations.empty());
  for (const json& operation : operations) EXPECT_EQ(operation["op"], "add") << operation;

  const json patched = tessel::testing::json_patch(job, operations);
  EXPECT_EQ(patched, defaulted_job(job));
  EXPECT_EQ(patched["spec"]["parallelism"]["virtualStages"], 1);
  EXPECT_EQ(patched["spec"]["parallelism"]["overlap"], true);
  EXPECT_EQ(patched["spec"]["training"]["beta2"], 0.95);
  EXPECT_EQ(patched["spec"]["placement"]["costModel"], "full");
  EXPECT_EQ(patched["spec"]["failurePolicy"]["startTimeoutSeconds"], 600);
  EXPECT_EQ(patched["spec"]["suspend"], false);
  // What the manifest says is kept.
  EXPECT_EQ(patched["spec"]["placement"]["evaluations"], 2000);
}

TEST(Mutate, AnObjectWithNothingMissingGetsNoPatch) {
  const json response =
      review_defaulting(review("UPDATE", defaulted_job(example_job())))["response"];
  EXPECT_EQ(response["allowed"], true);
  EXPECT_FALSE(response.contains("patch"));
  EXPECT_FALSE(response.contains("patchType"));
}

TEST(Mutate, DeletionsSubresourcesAndOtherKindsPassUntouched) {
  const json job = example_job();
  json pod = review("CREATE", job);
  pod["request"]["kind"] = {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}};
  for (const json& untouched :
       {review("DELETE", job), review("UPDATE", job, "TrainingJob", "status"), pod}) {
    const json response = review_defaulting(untouched)["response"];
    EXPECT_EQ(response["allowed"], true);
    EXPECT_FALSE(response.contains("patch")) << untouched.dump();
  }
}

TEST(Mutate, AnInvalidJobIsDefaultedAndLeftToValidation) {
  json job = example_job();
  job["spec"]["parallelism"]["stages"] = 9;  // more stages than layers
  const json response = review_defaulting(review("CREATE", job))["response"];
  EXPECT_EQ(response["allowed"], true);
  const json patched = tessel::testing::json_patch(job, patch_of(response));
  EXPECT_EQ(patched["spec"]["parallelism"]["virtualStages"], 1);
  EXPECT_EQ(review_admission(review("CREATE", patched))["response"]["allowed"], false);
}

TEST(Mutate, MemberClustersGetTheirSchemaDefaults) {
  const json member = {{"apiVersion", "tessel.dev/v1alpha1"},
                       {"kind", "MemberCluster"},
                       {"metadata", {{"name", "member-a"}}},
                       {"spec", {{"kubeconfigSecretRef", {{"name", "member-a"}}}}}};
  const json response = review_defaulting(review("CREATE", member, "MemberCluster"))["response"];
  json defaulted = member;
  api::membercluster_schema().apply_defaults(defaulted);
  ASSERT_NE(defaulted, member) << "the MemberCluster schema defaults nothing here";
  EXPECT_EQ(tessel::testing::json_patch(member, patch_of(response)), defaulted);
}

TEST(Mutate, MalformedReviewsAreRefusedAsValidationRefusesThem) {
  EXPECT_THROW(review_defaulting(json::object()), AdmissionError);
  EXPECT_THROW(
      review_defaulting({{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}}),
      AdmissionError);
  EXPECT_THROW(review_defaulting({{"apiVersion", "admission.k8s.io/v1"},
                                  {"kind", "AdmissionReview"},
                                  {"request", {{"uid", 7}}}}),
               AdmissionError);
}

TEST(Mutate, ServedOverHttpsAtMutate) {
  const tessel::testing::TestCertificateAuthority ca;
  HttpsRouter router;
  add_webhook_routes(router);
  const std::unique_ptr<HttpsServer> server = testing::start_test_https_server(ca, router);
  ASSERT_TRUE(server);
  const json job = example_job();
  const testing::HttpsAnswer answer = testing::https_request(
      "POST", server->url() + "mutate", review("CREATE", job).dump(), ca.ca_pem());
  ASSERT_EQ(answer.error, "");
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.header("content-type"), "application/json");
  const json response = json::parse(answer.body)["response"];
  EXPECT_EQ(tessel::testing::json_patch(job, patch_of(response)), defaulted_job(job));
  for (const std::string body : {"{not json", "{\"kind\": \"Pod\"}"}) {
    const testing::HttpsAnswer refused =
        testing::https_request("POST", server->url() + "mutate", body, ca.ca_pem());
    const testing::HttpsAnswer validate =
        testing::https_request("POST", server->url() + "validate", body, ca.ca_pem());
    EXPECT_EQ(refused.status, 400);
    EXPECT_EQ(refused.body, validate.body);
  }
}

}  // namespace
}  // namespace tessel::server
