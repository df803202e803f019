#include "kube/api_error.h"

#include <gtest/gtest.h>

#include "fixtures.h"
#include <strings.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

namespace tessel::kube {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

using testing::kFixtures;

json load(const fs::path& file) { return testing::fixture(file); }

// The response body as the transport would hand it over: text as-is, JSON serialised.
std::string body_text(const json& response) {
  const json& body = response.at("body");
  return body.is_string() ? body.get<std::string>() : body.dump();
}

std::string header(const json& response, const std::string& name) {
  const json headers = response.value("headers", json::object());
  for (const auto& [key, value] : headers.items()) {
    if (strcasecmp(key.c_str(), name.c_str()) == 0 && value.is_string()) {
      return value.get<std::string>();
    }
  }
  return {};
}

ApiError from_fixture(const std::string& name) {
  const json response = load(kFixtures / name).at("response");
  return ApiError(response.at("status").get<int>(), body_text(response),
                  header(response, "Retry-After"));
}

// One predicate per Status reason the v1.26 server answered with.
const std::map<std::string, std::function<bool(const ApiError&)>>& predicates_by_reason() {
  static const std::map<std::string, std::function<bool(const ApiError&)>> kPredicates = {
      {"BadRequest", &ApiError::is_bad_request},
      {"Unauthorized", &ApiError::is_unauthorized},
      {"Forbidden", &ApiError::is_forbidden},
      {"NotFound", &ApiError::is_not_found},
      {"NotAcceptable", &ApiError::is_not_acceptable},
      {"AlreadyExists", &ApiError::is_already_exists},
      {"Conflict", &ApiError::is_conflict},
      {"Expired", &ApiError::is_gone},
      {"UnsupportedMediaType", &ApiError::is_unsupported_media_type},
      {"Invalid", &ApiError::is_invalid},
      {"Timeout", &ApiError::is_timeout},
  };
  return kPredicates;
}

TEST(ApiErrorTest, EveryErrorFixtureParsesWithItsCodeAndExactlyItsReasonPredicate) {
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(kFixtures)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".json" || (name[0] != '4' && name[0] != '5')) continue;
    SCOPED_TRACE(name);
    const json fixture = load(entry.path());
    const json& response = fixture.at("response");
    const int status = response.at("status").get<int>();
    const ApiError error(status, body_text(response), header(response, "Retry-After"));

    EXPECT_EQ(error.code(), status);
    const json& body = response.at("body");
    if (body.is_object()) {
      EXPECT_EQ(error.code(), body.at("code").get<int>());
      EXPECT_EQ(error.reason(), body.at("reason").get<std::string>());
      EXPECT_EQ(error.message(), body.at("message").get<std::string>());
    }
    const auto predicate = predicates_by_reason().find(error.reason());
    ASSERT_NE(predicate, predicates_by_reason().end()) << "unexpected reason " << error.reason();
    for (const auto& [reason, holds] : predicates_by_reason()) {
      EXPECT_EQ(holds(error), reason == error.reason()) << reason;
    }
    EXPECT_EQ(error.is_retryable(), status >= 500);
    EXPECT_TRUE(
        std::string(error.what()).starts_with(std::to_string(status) + " " + error.reason()));
    // Nothing of the request (the bearer token, the body) may reach the message.
    const json& request = fixture.at("request");
    const std::string what = error.what();
    const std::string authorization = header(request, "Authorization");
    if (!authorization.empty()) {
      EXPECT_EQ(what.find(authorization), std::string::npos);
    }
    if (request.contains("body") && request.at("body").is_object()) {
      EXPECT_EQ(what.find(request.at("body").dump()), std::string::npos);
    }
    ++checked;
  }
  EXPECT_GE(checked, 35);
}

TEST(ApiErrorTest, ConflictOnStaleResourceVersion) {
  const ApiError error = from_fixture("409-conflict-stale-rv.json");
  EXPECT_TRUE(error.is_conflict());
  EXPECT_FALSE(error.is_already_exists());
  EXPECT_FALSE(error.is_retryable());
  EXPECT_EQ(error.details_name(), "gpt-a");
  EXPECT_EQ(error.details_group(), "tessel.dev");
  EXPECT_EQ(error.details_kind(), "trainingjobs");
}

TEST(ApiErrorTest, AlreadyExistsIsNotAConflict) {
  const ApiError error = from_fixture("409-already-exists.json");
  EXPECT_TRUE(error.is_already_exists());
  EXPECT_FALSE(error.is_conflict());
  EXPECT_STREQ(error.what(), "409 AlreadyExists: trainingjobs.tessel.dev \"gpt-a\" already exists");
}

TEST(ApiErrorTest, NotFoundNamesTheResource) {
  const ApiError error = from_fixture("404-not-found.json");
  EXPECT_TRUE(error.is_not_found());
  EXPECT_EQ(error.details_name(), "does-not-exist");
  EXPECT_EQ(error.details_kind(), "trainingjobs");
}

TEST(ApiErrorTest, PlainTextNotFoundFallsBackToTheBodyText) {
  const ApiError error = from_fixture("404-unknown-resource-type.json");
  EXPECT_TRUE(error.is_not_found());
  EXPECT_EQ(error.reason(), "NotFound");
  EXPECT_EQ(error.message(), "404 page not found");
  EXPECT_STREQ(error.what(), "404 NotFound: 404 page not found");
}

TEST(ApiErrorTest, ExpiredContinueTokenIsGoneAndCarriesAFreshToken) {
  const ApiError error = from_fixture("410-list-continue-token-expired.json");
  EXPECT_TRUE(error.is_gone());
  EXPECT_EQ(error.reason(), "Expired");
  EXPECT_FALSE(error.continue_token().empty());
}

TEST(ApiErrorTest, InvalidListsEveryCauseWithItsFieldPath) {
  const ApiError error = from_fixture("422-invalid-schema.json");
  EXPECT_TRUE(error.is_invalid());
  EXPECT_EQ(error.details_kind(), "TrainingJob");
  ASSERT_EQ(error.causes().size(), 3u);
  EXPECT_EQ(error.causes()[0].reason, "FieldValueInvalid");
  EXPECT_EQ(error.causes()[0].field, "spec.replicas");
  EXPECT_EQ(error.causes()[0].message,
            "Invalid value: 0: spec.replicas in body should be greater than or equal to 1");
  EXPECT_EQ(error.causes()[1].reason, "FieldValueNotSupported");
  EXPECT_EQ(error.causes()[1].field, "spec.schedule");
  EXPECT_EQ(error.causes()[2].reason, "FieldValueRequired");
  EXPECT_EQ(error.causes()[2].field, "spec.model");
}

TEST(ApiErrorTest, ForbiddenServiceAccountList) {
  const ApiError error = from_fixture("403-forbidden-serviceaccount-list.json");
  EXPECT_TRUE(error.is_forbidden());
  EXPECT_FALSE(error.is_unauthorized());
  EXPECT_NE(std::string(error.what()).find("cannot list resource \"trainingjobs\""),
            std::string::npos);
}

TEST(ApiErrorTest, TimeoutIsRetryableAfterTheAdvertisedDelay) {
  const ApiError error = from_fixture("504-list-future-rv.json");
  EXPECT_TRUE(error.is_timeout());
  EXPECT_TRUE(error.is_retryable());
  EXPECT_EQ(error.retry_after_seconds(), 1);
  ASSERT_EQ(error.causes().size(), 1u);
  EXPECT_EQ(error.causes()[0].reason, "ResourceVersionTooLarge");
  EXPECT_TRUE(error.causes()[0].field.empty());
}

TEST(ApiErrorTest, WhatIsCodeReasonAndTheServerMessage) {
  const json body = {
      {"kind", "Status"},
      {"apiVersion", "v1"},
      {"status", "Failure"},
      {"message",
       "TrainingJob.tessel.dev \"x\" is invalid: spec.stages: Invalid value: 0: spec.stages in "
       "body should be greater than or equal to 1"},
      {"reason", "Invalid"},
      {"code", 422}};
  const ApiError error(422, body.dump());
  EXPECT_STREQ(error.what(),
               "422 Invalid: TrainingJob.tessel.dev \"x\" is invalid: spec.stages: Invalid value: "
               "0: spec.stages in body should be greater than or equal to 1");
}

TEST(ApiErrorTest, RetryAfterComesFromDetailsOrTheHeader) {
  const json throttled = {{"kind", "Status"}, {"reason", "TooManyRequests"}, {"code", 429}};
  EXPECT_EQ(ApiError(429, throttled.dump(), "7").retry_after_seconds(), 7);
  EXPECT_EQ(ApiError(429, throttled.dump()).retry_after_seconds(), std::nullopt);
  EXPECT_EQ(ApiError(429, throttled.dump(), "Wed, 21 Oct 2026 07:28:00 GMT").retry_after_seconds(),
            std::nullopt);
  json with_details = throttled;
  with_details["details"] = {{"retryAfterSeconds", 3}};
  const ApiError error(429, with_details.dump(), "7");
  EXPECT_EQ(error.retry_after_seconds(), 3);
  EXPECT_TRUE(error.is_too_many_requests());
  EXPECT_TRUE(error.is_retryable());
}

TEST(ApiErrorTest, RetryableCodes) {
  EXPECT_TRUE(ApiError(500, "boom").is_retryable());
  EXPECT_TRUE(ApiError(503, "").is_retryable());
  EXPECT_FALSE(ApiError(501, "").is_retryable());
  EXPECT_FALSE(ApiError(409, "").is_retryable());
  EXPECT_STREQ(ApiError(503, "").what(), "503 ServiceUnavailable");
}

TEST(ApiErrorTest, LongNonJsonBodiesAreCut) {
  const std::string page = "<html>" + std::string(5000, 'x') + "</html>";
  const ApiError error(502, page);
  EXPECT_LT(error.message().size(), 600u);
  EXPECT_EQ(error.reason(), "Unknown");
}

TEST(ApiErrorTest, WatchErrorEventStatusIsGone) {
  std::ifstream in(kFixtures / "watch-410-expired-too-old-rv.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const json event = json::parse(line);
  ASSERT_EQ(event.at("type"), "ERROR");
  const ApiError error = ApiError::from_status(event.at("object"));
  EXPECT_EQ(error.code(), 410);
  EXPECT_TRUE(error.is_gone());
  EXPECT_STREQ(error.what(), "410 Expired: too old resource version: 100 (261)");
}

}  // namespace
}  // namespace tessel::kube
