// The test server's own metadata helpers (api_object_meta.h) on the captured objects.
#include "tests/support/api_object_meta.h"

#include <gtest/gtest.h>

#include "tests/kube/fixtures.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
using kube::testing::fixture;

TEST(ObjectMeta, TerminatingAndFinalizersReadAsTheCapturedServerWroteThem) {
  const json terminating = fixture("200-get-terminating-with-finalizer.json")["response"]["body"];
  EXPECT_TRUE(is_terminating(terminating));
  EXPECT_FALSE(finalizers_of(terminating).empty());
  EXPECT_TRUE(has_finalizer(terminating, finalizers_of(terminating).front()));
  const json live = fixture("200-get-trainingjob.json")["response"]["body"];
  EXPECT_FALSE(is_terminating(live));
  EXPECT_TRUE(finalizers_of(live).empty());
  EXPECT_FALSE(is_terminating(json{{"metadata", {{"deletionTimestamp", nullptr}}}}));
  EXPECT_FALSE(is_terminating(json::array()));
}

TEST(ObjectMeta, FinalizersAreAddedOnceAndTheListGoesWithTheLast) {
  json object = {{"metadata", {{"name", "a"}}}};
  EXPECT_TRUE(add_finalizer(object, "x.example.com/one"));
  EXPECT_FALSE(add_finalizer(object, "x.example.com/one"));
  EXPECT_TRUE(add_finalizer(object, "x.example.com/two"));
  EXPECT_EQ(finalizers_of(object),
            (std::vector<std::string>{"x.example.com/one", "x.example.com/two"}));
  EXPECT_TRUE(remove_finalizer(object, "x.example.com/one"));
  EXPECT_FALSE(remove_finalizer(object, "x.example.com/one"));
  EXPECT_TRUE(remove_finalizer(object, "x.example.com/two"));
  EXPECT_FALSE(object["metadata"].contains("finalizers"));
}

TEST(ObjectMeta, AnnotationsAndTimes) {
  json object = json::object();
  EXPECT_FALSE(annotation_of(object, "a"));
  set_annotation(object, "a", "1");
  EXPECT_EQ(annotation_of(object, "a"), "1");
  object["metadata"]["annotations"]["b"] = 2;
  EXPECT_FALSE(annotation_of(object, "b"));  // not a string
  using namespace std::chrono;
  EXPECT_EQ(rfc3339(sys_days{2026y / November / 21} + 23h + 1min + 17s + 999ms),
            "2026-11-21T23:01:17Z");
}

}  // namespace
}  // namespace tessel::testing
