// The webhooks' handlers on AdmissionReviews whose fields have the wrong JSON type: each gets the
// answer its header promises (400 for what is not an AdmissionReview v1), never an exception.
// Found by tests/fuzz (admission_review): "kind": {"kind": {...}} threw nlohmann's type_error out
// of review_admission (regressions/admission_review/request-kind-kind-not-a-string).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "operator/server/webhook.h"

namespace tessel::server {
namespace {

using nlohmann::json;

json review(json request) {
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request", std::move(request)}};
}

TEST(WebhookReviewFields, FieldsOfTheWrongTypeAreAnsweredNotThrown) {
  json wrong_api = review({{"uid", "u1"}});
  wrong_api["apiVersion"] = json::object();
  for (HttpsResponse (*handle)(const HttpsRequest&) : {&handle_validate, &handle_mutate}) {
    const HttpsResponse refused = handle({"POST", "/", wrong_api.dump()});
    EXPECT_EQ(refused.status, 400);
    EXPECT_EQ(refused.body, "not an admission.k8s.io/v1 AdmissionReview");
  }
  // A kind whose fields are not strings is no tessel.dev kind: allowed, as other groups are.
  const json odd_kind = review({{"uid", "u2"},
                                {"operation", 5},
                                {"subResource", json::array()},
                                {"kind", {{"group", {{"g", 1}}}, {"kind", {{"kind", "x"}}}}}});
  const HttpsResponse allowed = handle_validate({"POST", "/validate", odd_kind.dump()});
  ASSERT_EQ(allowed.status, 200) << allowed.body;
  EXPECT_EQ(json::parse(allowed.body)["response"]["allowed"], true);
  // tessel.dev with a kind that is not a string: refused naming it, not thrown.
  const json ours = review({{"uid", "u3"},
                            {"operation", "CREATE"},
                            {"kind", {{"group", "tessel.dev"}, {"kind", json::object()}}},
                            {"object", json::object()}});
  const HttpsResponse refused = handle_validate({"POST", "/validate", ours.dump()});
  ASSERT_EQ(refused.status, 200) << refused.body;
  EXPECT_EQ(json::parse(refused.body)["response"]["allowed"], false);
  EXPECT_NE(refused.body.find("tessel.dev has no kind ''"), std::string::npos) << refused.body;
}

}  // namespace
}  // namespace tessel::server
