// Server-side apply through the client against a cluster: creation by apply, field ownership
// per manager, conflicts between managers, taking fields over with force, and fields a
// manager stops applying being removed.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "kube/api_error.h"
#include "kube/client.h"
#include "kube/object.h"
#include "tests/support/test_cluster.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using tessel::testing::TestCluster;

// The managers whose managedFields entry owns .spec.<field> (with the given operation).
std::set<std::string> owners_of_spec_field(const json& object, const std::string& field,
                                           const std::string& operation = "Apply") {
  std::set<std::string> owners;
  for (const json& entry : object["metadata"].value("managedFields", json::array())) {
    if (entry.value("operation", "") != operation) continue;
    const json fields = entry.value("fieldsV1", json::object());
    if (fields.value("f:spec", json::object()).contains("f:" + field)) {
      owners.insert(entry.value("manager", ""));
    }
  }
  return owners;
}

class ClusterApplyTest : public ::testing::Test {
 protected:
  ClusterApplyTest() : jobs_(cluster_.ensure_test_crd()), ns_(cluster_.namespace_name()) {
    client_->register_resource(jobs_);
  }

  // The fields one manager wants: the model, and replicas when given.
  json intent(std::optional<int> replicas) const {
    json spec = {{"model", "gpt2-124m"}};
    if (replicas) spec["replicas"] = *replicas;
    return {{"apiVersion", "tests.tessel.dev/v1alpha1"},
            {"kind", "TestJob"},
            {"metadata", {{"name", "shared"}, {"namespace", ns_}}},
            {"spec", spec}};
  }

  json apply(const json& object, const std::string& manager, bool force) {
    ApplyOptions options;
    options.field_manager = manager;
    options.force = force;
    return client_->apply(jobs_, object, options);
  }

  TestCluster cluster_;
  const ResourceInfo jobs_;
  const std::string ns_;
  const std::shared_ptr<Client> client_ = cluster_.client();
};

TEST_F(ClusterApplyTest, ConflictsBetweenManagersAndForcedTakeOver) {
  const json created = apply(intent(2), "team-a", false);
  EXPECT_EQ(created["spec"]["replicas"], 2);
  EXPECT_EQ(object_generation(created), 1);
  EXPECT_EQ(owners_of_spec_field(created, "replicas"), std::set<std::string>{"team-a"});

  // Applying the same value of a field another manager owns shares it; a different value
  // conflicts, naming the field and its owner, and changes nothing.
  const json shared_model = apply(intent(std::nullopt), "team-b", false);
  EXPECT_EQ(owners_of_spec_field(shared_model, "model"),
            (std::set<std::string>{"team-a", "team-b"}));
  try {
    apply(intent(3), "team-b", false);
    ADD_FAILURE() << "applying team-a's field with another value did not conflict";
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_conflict()) << error.what();
    ASSERT_EQ(error.causes().size(), 1u) << error.what();
    EXPECT_EQ(error.causes()[0].reason, "FieldManagerConflict");
    EXPECT_EQ(error.causes()[0].field, ".spec.replicas");
    EXPECT_NE(error.message().find("team-a"), std::string::npos) << error.message();
  }
  EXPECT_EQ(client_->get(jobs_, ns_, "shared")["spec"]["replicas"], 2);

  // force takes the field over: team-a no longer owns it, so its old intent now conflicts.
  const json forced = apply(intent(3), "team-b", true);
  EXPECT_EQ(forced["spec"]["replicas"], 3);
  EXPECT_EQ(object_generation(forced), 2);
  EXPECT_EQ(owners_of_spec_field(forced, "replicas"), std::set<std::string>{"team-b"});
  try {
    apply(intent(2), "team-a", false);
    ADD_FAILURE() << "team-a's stale intent did not conflict with team-b";
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_conflict()) << error.what();
  }

  // team-a drops replicas from its intent: the field stays, team-b still owns it.
  const json dropped = apply(intent(std::nullopt), "team-a", false);
  EXPECT_EQ(dropped["spec"]["replicas"], 3);
  EXPECT_EQ(owners_of_spec_field(dropped, "replicas"), std::set<std::string>{"team-b"});
}

TEST_F(ClusterApplyTest, FieldsAManagerStopsApplyingAreRemoved) {
  json with_label = intent(1);
  set_label(with_label, "stage", "canary");
  const json first = apply(with_label, "team-a", false);
  EXPECT_EQ(get_label(first, "stage"), "canary");

  // A field of a type-less map (labels) that only team-a owned goes when team-a stops
  // applying it.
  const json second = apply(intent(1), "team-a", false);
  EXPECT_EQ(get_label(second, "stage"), std::nullopt);
  EXPECT_EQ(second["spec"]["replicas"], 1);
}

TEST_F(ClusterApplyTest, ApplyThroughTheStatusSubresourceOwnsOnlyStatus) {
  apply(intent(1), "team-a", false);
  const json status = {{"apiVersion", "tests.tessel.dev/v1alpha1"},
                       {"kind", "TestJob"},
                       {"metadata", {{"name", "shared"}, {"namespace", ns_}}},
                       {"status", {{"phase", "Running"}}}};
  ApplyOptions options;
  options.field_manager = "status-writer";
  const json written = client_->apply(jobs_, status, options, "status");
  EXPECT_EQ(written["status"]["phase"], "Running");
  EXPECT_EQ(object_generation(written), 1);
  bool found = false;
  for (const json& entry : written["metadata"]["managedFields"]) {
    if (entry.value("manager", "") != "status-writer") continue;
    found = true;
    EXPECT_EQ(entry.value("subresource", ""), "status");
    EXPECT_TRUE(entry["fieldsV1"].contains("f:status"));
  }
  EXPECT_TRUE(found) << written["metadata"]["managedFields"].dump();
}

}  // namespace
}  // namespace tessel::kube
