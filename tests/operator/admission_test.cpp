// The admission webhook's decisions on AdmissionReviews as kube-apiserver sends them.
#include "operator/server/admission.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "api/yaml_json.h"
#include "tests/operator/example_job.h"

namespace tessel::server {
namespace {

using nlohmann::json;

json review(const std::string& operation, const json& object, const json& old_object = nullptr,
            const std::string& kind = "TrainingJob", const std::string& sub_resource = "") {
  json request = {{"uid", "705ab4f5-6393-11e8-b7cc-42010a800002"},
                  {"kind", {{"group", "tessel.dev"}, {"version", "v1alpha1"}, {"kind", kind}}},
                  {"operation", operation},
                  {"object", object},
                  {"oldObject", old_object}};
  if (!sub_resource.empty()) request["subResource"] = sub_resource;
  return {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", request}};
}

TEST(Admission, AValidJobIsAllowedAndTheUidEchoed) {
  const json answer = review_admission(review("CREATE", example_job()));
  EXPECT_EQ(answer["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(answer["kind"], "AdmissionReview");
  EXPECT_EQ(answer["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(answer["response"]["allowed"], true);
}

TEST(Admission, AnInvalidJobIsRefusedNamingEveryField) {
  json job = example_job();
  job["spec"]["batch"]["globalBatch"] = 12;           // not a multiple of replicas x micro-batch
  job["spec"]["data"]["synthetic"] = json::object();  // a second data source
  const json response = review_admission(review("CREATE", job))["response"];
  EXPECT_EQ(response["allowed"], false);
  EXPECT_EQ(response["status"]["code"], 422);
  EXPECT_EQ(response["status"]["reason"], "Invalid");
  const std::string message = response["status"]["message"];
  EXPECT_NE(message.find("spec.data: give exactly one of text"), std::string::npos) << message;
  // The data rule fails first; the batch rule is checked once the job's shape is readable.
  job["spec"]["data"].erase("synthetic");
  const std::string batch =
      review_admission(review("CREATE", job))["response"]["status"]["message"];
  EXPECT_EQ(batch,
            "spec.batch.globalBatch: 12 is not a multiple of replicas x microBatch = 2 x 4 = 8");
  job["spec"]["parallelism"]["stages"] = 0;
  job["spec"]["training"]["beta1"] = 2;
  const std::string schema =
      review_admission(review("CREATE", job))["response"]["status"]["message"];
  EXPECT_NE(schema.find("spec.parallelism.stages: must be >= 1, got 0"), std::string::npos);
  EXPECT_NE(schema.find("spec.training.beta1: must be <= 1, got 2"), std::string::npos);
}

// spec.elastic: the minimum is a width the job has; elastic may be set on a running job (it
// decides only later placements).
TEST(Admission, ElasticMinReplicasIsCheckedAgainstTheFullWidth) {
  json job = example_job();
  job["spec"]["elastic"] = {{"minReplicas", 1}};
  EXPECT_EQ(review_admission(review("CREATE", job))["response"]["allowed"], true);
  job["spec"]["elastic"]["minReplicas"] = 3;
  const json refused = review_admission(review("CREATE", job))["response"];
  EXPECT_EQ(refused["allowed"], false);
  EXPECT_EQ(refused["status"]["message"],
            "spec.elastic.minReplicas: 3 exceeds spec.parallelism.replicas 2 (the job's full "
            "width)");
  job["spec"]["elastic"]["minReplicas"] = 0;
  EXPECT_NE(review_admission(review("CREATE", job))["response"]["status"]["message"]
                .get<std::string>()
                .find("spec.elastic.minReplicas: must be >= 1, got 0"),
            std::string::npos);
  json running = example_job();
  running["status"] = {{"phase", "Running"}};
  json elastic = running;
  elastic["spec"]["elastic"] = {{"minReplicas", 1}};
  EXPECT_EQ(review_admission(review("UPDATE", elastic, running))["response"]["allowed"], true);
}

TEST(Admission, ParallelismIsFixedWhileRunningButStepsMayChange) {
  json running = example_job();
  running["status"] = {{"phase", "Running"}};
  json wider = running;
  wider["spec"]["parallelism"]["replicas"] = 4;
  const json refused = review_admission(review("UPDATE", wider, running))["response"];
  EXPECT_EQ(refused["allowed"], false);
  EXPECT_NE(refused["status"]["message"].get<std::string>().find(
                "spec.parallelism: cannot change while the job is Running"),
            std::string::npos);
  json longer = running;
  longer["spec"]["training"]["steps"] = 900;
  EXPECT_EQ(review_admission(review("UPDATE", longer, running))["response"]["allowed"], true);
}

TEST(Admission, DeletesStatusWritesAndOtherGroupsAreAllowed) {
  json bad = example_job();
  bad["spec"]["parallelism"]["stages"] = 0;
  EXPECT_EQ(review_admission(review("DELETE", nullptr, bad))["response"]["allowed"], true);
  EXPECT_EQ(
      review_admission(review("UPDATE", bad, bad, "TrainingJob", "status"))["response"]["allowed"],
      true);
  json other = review("CREATE", bad);
  other["request"]["kind"]["group"] = "batch";
  EXPECT_EQ(review_admission(other)["response"]["allowed"], true);
}

TEST(Admission, MemberClustersAreCheckedByTheirSchema) {
  json member = {{"apiVersion", "tessel.dev/v1alpha1"},
                 {"kind", "MemberCluster"},
                 {"metadata", {{"name", "member-a"}}},
                 {"spec", {{"kubeconfigSecretRef", {{"name", "Member_A"}}}}}};
  const json response =
      review_admission(review("CREATE", member, nullptr, "MemberCluster"))["response"];
  EXPECT_EQ(response["allowed"], false);
  EXPECT_NE(response["status"]["message"].get<std::string>().find("spec.kubeconfigSecretRef.name"),
            std::string::npos);
  member["spec"]["kubeconfigSecretRef"]["name"] = "member-a-kubeconfig";
  EXPECT_EQ(
      review_admission(review("CREATE", member, nullptr, "MemberCluster"))["response"]["allowed"],
      true);
}

TEST(Admission, WhatIsNotAnAdmissionReviewIsAnError) {
  EXPECT_THROW(review_admission(json::object()), AdmissionError);
  EXPECT_THROW(review_admission({{"apiVersion", "admission.k8s.io/v1beta1"},
                                 {"kind", "AdmissionReview"},
                                 {"request", {{"uid", "x"}}}}),
               AdmissionError);
  EXPECT_THROW(
      review_admission({{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}}),
      AdmissionError);
}

}  // namespace
}  // namespace tessel::server
