// The client against a cluster (the API test server, or the one TESSEL_TEST_KUBECONFIG names):
// create, get, update, patch and delete of a custom resource, label and field selectors,
// paginated lists, optimistic-concurrency conflicts and the status subresource.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/api_error.h"
#include "kube/client.h"
#include "kube/object.h"
#include "tests/kube/cluster_test_support.h"
#include "tests/support/test_cluster.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using tessel::testing::test_job;
using tessel::testing::TestCluster;
using testing::version_of;

std::vector<std::string> names(const json& list) {
  std::vector<std::string> result;
  for (const json& item : list.at("items")) result.push_back(object_name(item));
  return result;
}

std::vector<std::string> names(const std::vector<json>& items) {
  std::vector<std::string> result;
  for (const json& item : items) result.push_back(object_name(item));
  return result;
}

// Runs `write` and returns the ApiError it throws; fails the test when it throws none.
template <typename Write>
ApiError api_error_of(Write write) {
  try {
    write();
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "expected an ApiError";
  return ApiError(0, "");
}

class ClusterCrudTest : public ::testing::Test {
 protected:
  ClusterCrudTest() : jobs_(cluster_.ensure_test_crd()), ns_(cluster_.namespace_name()) {
    client_->register_resource(jobs_);
  }

  json create_job(const std::string& name, int replicas = 1,
                  const std::map<std::string, std::string>& labels = {}) {
    json job = test_job(ns_, name, replicas);
    for (const auto& [key, value] : labels) set_label(job, key, value);
    return client_->create(jobs_, ns_, job);
  }

  TestCluster cluster_;
  const ResourceInfo jobs_;
  const std::string ns_;
  const std::shared_ptr<Client> client_ = cluster_.client();
};

TEST_F(ClusterCrudTest, CreateGetUpdatePatchDelete) {
  const json created = create_job("crud", 2);
  EXPECT_FALSE(object_uid(created).empty());
  EXPECT_EQ(object_generation(created), 1);
  EXPECT_EQ(created["spec"]["replicas"], 2);
  // The CRD's schema defaults are applied on the way in.
  EXPECT_EQ(created["spec"]["stages"], 1);
  EXPECT_EQ(created["spec"]["schedule"], "1F1B");
  EXPECT_FALSE(created.contains("status"));

  json live = client_->get(jobs_, ns_, "crud");
  EXPECT_EQ(object_uid(live), object_uid(created));
  EXPECT_EQ(object_resource_version(live), object_resource_version(created));

  live["spec"]["replicas"] = 3;
  const json updated = client_->update(jobs_, live);
  EXPECT_EQ(updated["spec"]["replicas"], 3);
  EXPECT_EQ(object_generation(updated), 2);
  EXPECT_GT(version_of(updated), version_of(created));

  // Metadata changes leave the generation alone.
  const json labelled = client_->patch(jobs_, ns_, "crud", PatchType::kMerge,
                                       {{"metadata", {{"labels", {{"tier", "web"}}}}}});
  EXPECT_EQ(get_label(labelled, "tier"), "web");
  EXPECT_EQ(object_generation(labelled), 2);

  const json patched =
      client_->patch(jobs_, ns_, "crud", PatchType::kJson,
                     json::array({{{"op", "test"}, {"path", "/spec/replicas"}, {"value", 3}},
                                  {{"op", "replace"}, {"path", "/spec/replicas"}, {"value", 4}}}));
  EXPECT_EQ(patched["spec"]["replicas"], 4);
  EXPECT_EQ(object_generation(patched), 3);
  const ApiError failed_test = api_error_of([&] {
    client_->patch(jobs_, ns_, "crud", PatchType::kJson,
                   json::array({{{"op", "test"}, {"path", "/spec/replicas"}, {"value", 3}}}));
  });
  EXPECT_TRUE(failed_test.is_invalid()) << failed_test.what();

  const json deleted = client_->remove(jobs_, ns_, "crud");
  EXPECT_EQ(deleted.value("kind", ""), "Status");
  EXPECT_EQ(deleted.value("status", ""), "Success");
  EXPECT_TRUE(api_error_of([&] { client_->get(jobs_, ns_, "crud"); }).is_not_found());
  EXPECT_TRUE(api_error_of([&] { client_->remove(jobs_, ns_, "crud"); }).is_not_found());
}

TEST_F(ClusterCrudTest, SchemaViolationsAreRefusedAllAtOnce) {
  json job = test_job(ns_, "invalid", 0);
  job["spec"].erase("model");
  job["spec"]["schedule"] = "Zigzag";
  const ApiError error = api_error_of([&] { client_->create(jobs_, ns_, job); });
  ASSERT_TRUE(error.is_invalid()) << error.what();
  std::vector<std::string> fields;
  for (const StatusCause& cause : error.causes()) fields.push_back(cause.field);
  std::sort(fields.begin(), fields.end());
  EXPECT_EQ(fields, (std::vector<std::string>{"spec.model", "spec.replicas", "spec.schedule"}));
  EXPECT_TRUE(api_error_of([&] { client_->get(jobs_, ns_, "invalid"); }).is_not_found());
}

TEST_F(ClusterCrudTest, LabelAndFieldSelectors) {
  create_job("a", 1, {{"tier", "web"}});
  create_job("b", 1, {{"tier", "db"}});
  create_job("c");
  auto select = [&](const std::string& labels, const std::string& fields = "") {
    ListOptions options;
    options.label_selector = labels;
    options.field_selector = fields;
    return names(client_->list(jobs_, ns_, options));
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(select("tier=web"), (V{"a"}));
  EXPECT_EQ(select("tier!=web"), (V{"b", "c"}));  // != also matches objects without the label
  EXPECT_EQ(select("tier in (web,db)"), (V{"a", "b"}));
  EXPECT_EQ(select("tier notin (web)"), (V{"b", "c"}));
  EXPECT_EQ(select("tier"), (V{"a", "b"}));
  EXPECT_EQ(select("!tier"), (V{"c"}));
  EXPECT_EQ(select(LabelSelector::parse("tier=web,tier!=db").to_string()), (V{"a"}));
  EXPECT_EQ(select("", "metadata.name=b"), (V{"b"}));
  EXPECT_EQ(select("", "metadata.name!=b"), (V{"a", "c"}));
  EXPECT_EQ(select("tier", "metadata.namespace=" + ns_), (V{"a", "b"}));
  // Custom resources support only metadata.name and metadata.namespace as field labels.
  const ApiError unsupported = api_error_of([&] { select("", "spec.model=gpt2-124m"); });
  EXPECT_TRUE(unsupported.is_bad_request()) << unsupported.what();
}

TEST_F(ClusterCrudTest, PagesAreOneConsistentSnapshot) {
  for (int i = 0; i < 5; ++i) create_job("p-" + std::to_string(i));
  ListOptions options;
  options.limit = 2;
  const json first = client_->list(jobs_, ns_, options);
  EXPECT_EQ(names(first), (std::vector<std::string>{"p-0", "p-1"}));
  const std::string token = first["metadata"].value("continue", "");
  ASSERT_FALSE(token.empty());
  EXPECT_EQ(first["metadata"].value("remainingItemCount", -1), 3);
  const std::string snapshot = first["metadata"].value("resourceVersion", "");

  // Changes after the first page do not show in the later ones.
  create_job("p-9");
  client_->patch(jobs_, ns_, "p-3", PatchType::kMerge, {{"spec", {{"replicas", 7}}}});

  options.continue_token = token;
  const json second = client_->list(jobs_, ns_, options);
  EXPECT_EQ(names(second), (std::vector<std::string>{"p-2", "p-3"}));
  EXPECT_EQ(second["items"][1]["spec"]["replicas"], 1);
  EXPECT_EQ(second["metadata"].value("resourceVersion", ""), snapshot);
  options.continue_token = second["metadata"].value("continue", "");
  ASSERT_FALSE(options.continue_token.empty());
  const json last = client_->list(jobs_, ns_, options);
  EXPECT_EQ(names(last), (std::vector<std::string>{"p-4"}));
  EXPECT_EQ(last["metadata"].value("continue", ""), "");
  EXPECT_FALSE(last["metadata"].contains("remainingItemCount"));

  // list_all follows the pages of a fresh snapshot.
  ListOptions paged;
  paged.limit = 2;
  const ListResult all = client_->list_all(jobs_, ns_, paged);
  EXPECT_EQ(names(all.items), (std::vector<std::string>{"p-0", "p-1", "p-2", "p-3", "p-4", "p-9"}));
  EXPECT_GT(std::stoll(all.resource_version), std::stoll(snapshot));
}

TEST(ClusterContinueTokenTest, ExpiredTokenIsGoneWithAnInconsistentContinuation) {
  tessel::testing::ApiTestServerOptions options;
  options.watch_window = 5;  // etcd compaction after five writes
  TestCluster cluster(options);
  TESSEL_REQUIRE_TEST_SERVER(cluster, "a history window small enough to expire a continue token");
  const ResourceInfo jobs = cluster.ensure_test_crd();
  const std::string ns = cluster.namespace_name();
  const std::shared_ptr<Client> client = cluster.client();
  for (int i = 0; i < 3; ++i) client->create(jobs, ns, test_job(ns, "e-" + std::to_string(i)));
  ListOptions page;
  page.limit = 1;
  const json first = client->list(jobs, ns, page);
  for (int i = 0; i < 6; ++i) {
    client->patch(jobs, ns, "e-0", PatchType::kMerge, {{"spec", {{"replicas", i + 2}}}});
  }

  page.continue_token = first["metadata"].value("continue", "");
  const ApiError expired = api_error_of([&] { client->list(jobs, ns, page); });
  ASSERT_TRUE(expired.is_gone()) << expired.what();
  ASSERT_FALSE(expired.continue_token().empty());
  page.limit.reset();
  page.continue_token = expired.continue_token();
  EXPECT_EQ(names(client->list(jobs, ns, page)), (std::vector<std::string>{"e-1", "e-2"}));
}

TEST_F(ClusterCrudTest, StaleWritesConflict) {
  const json created = create_job("race");
  json mine = created;
  mine["spec"]["replicas"] = 2;
  const json won = client_->update(jobs_, mine);

  json stale = created;
  stale["spec"]["replicas"] = 5;
  const ApiError conflict = api_error_of([&] { client_->update(jobs_, stale); });
  EXPECT_TRUE(conflict.is_conflict()) << conflict.what();
  EXPECT_EQ(conflict.details_name(), "race");

  // A merge patch carrying a resourceVersion is conditional too.
  const ApiError patch_conflict = api_error_of([&] {
    client_->patch(jobs_, ns_, "race", PatchType::kMerge,
                   {{"metadata", {{"resourceVersion", object_resource_version(created)}}},
                    {"spec", {{"replicas", 6}}}});
  });
  EXPECT_TRUE(patch_conflict.is_conflict()) << patch_conflict.what();

  // An update of a custom resource must say which version it replaces.
  json unconditional = won;
  unconditional["metadata"].erase("resourceVersion");
  EXPECT_TRUE(api_error_of([&] { client_->update(jobs_, unconditional); }).is_invalid());

  const ApiError exists = api_error_of([&] { create_job("race"); });
  EXPECT_TRUE(exists.is_already_exists()) << exists.what();
  EXPECT_EQ(client_->get(jobs_, ns_, "race")["spec"]["replicas"], 2);
}

TEST_F(ClusterCrudTest, StatusSubresourceSeparatesSpecFromStatus) {
  const json created = create_job("status");

  // A write through /status stores the status only.
  json with_status = created;
  with_status["status"] = {{"phase", "Running"}, {"observedGeneration", 1}};
  with_status["spec"]["replicas"] = 9;
  const json status_written = client_->update_status(jobs_, with_status);
  EXPECT_EQ(status_written["status"]["phase"], "Running");
  EXPECT_EQ(status_written["spec"]["replicas"], 1);
  EXPECT_EQ(object_generation(status_written), 1);
  EXPECT_GT(version_of(status_written), version_of(created));

  // A write of the main resource ignores the status; one that changes nothing else is a no-op.
  json main_write = status_written;
  main_write["status"]["phase"] = "Failed";
  const json unchanged = client_->update(jobs_, main_write);
  EXPECT_EQ(unchanged["status"]["phase"], "Running");
  EXPECT_EQ(object_resource_version(unchanged), object_resource_version(status_written));

  const json patched = client_->patch(jobs_, ns_, "status", PatchType::kMerge,
                                      {{"status", {{"phase", "Succeeded"}}}}, {}, "status");
  EXPECT_EQ(patched["status"]["phase"], "Succeeded");
  EXPECT_EQ(patched["status"]["observedGeneration"], 1);

  // Status is validated against the schema as well.
  const ApiError invalid = api_error_of([&] {
    client_->patch(jobs_, ns_, "status", PatchType::kMerge, {{"status", {{"phase", "Dancing"}}}},
                   {}, "status");
  });
  EXPECT_TRUE(invalid.is_invalid()) << invalid.what();
  EXPECT_EQ(client_->get(jobs_, ns_, "status")["status"]["phase"], "Succeeded");
}

}  // namespace
}  // namespace tessel::kube
