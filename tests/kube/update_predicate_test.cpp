// not_only_status_changed: a controller's own status writes do not bring its object back, while
// changes of spec or metadata, and resyncs, do.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kube/controller.h"

namespace tessel::kube {
namespace {

using nlohmann::json;

json job() {
  return {{"apiVersion", "tessel.dev/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata",
           {{"name", "fables"},
            {"namespace", "ml"},
            {"resourceVersion", "10"},
            {"generation", 1},
            {"managedFields", json::array({{{"manager", "kubectl"}}})}}},
          {"spec", {{"suspend", false}}},
          {"status", {{"phase", "Pending"}}}};
}

TEST(NotOnlyStatusChanged, AStatusWriteAloneIsFilteredOut) {
  json written = job();
  written["metadata"]["resourceVersion"] = "11";
  written["metadata"]["managedFields"].push_back({{"manager", "tessel-operator"}});
  written["status"]["phase"] = "Running";
  EXPECT_FALSE(not_only_status_changed(job(), written));
}

TEST(NotOnlyStatusChanged, SpecMetadataAndResyncsPass) {
  EXPECT_TRUE(not_only_status_changed(job(), job())) << "a resync";
  json suspended = job();
  suspended["spec"]["suspend"] = true;
  suspended["metadata"]["resourceVersion"] = "11";
  EXPECT_TRUE(not_only_status_changed(job(), suspended));
  json deleting = job();
  deleting["metadata"]["deletionTimestamp"] = "2026-11-26T06:00:00Z";
  EXPECT_TRUE(not_only_status_changed(job(), deleting));
  json finalized = job();
  finalized["metadata"]["finalizers"] = {"tessel.dev/cleanup"};
  EXPECT_TRUE(not_only_status_changed(job(), finalized));
  json labelled = job();
  labelled["metadata"]["labels"] = {{"team", "llm"}};
  EXPECT_TRUE(not_only_status_changed(job(), labelled));
}

}  // namespace
}  // namespace tessel::kube
