// Deletion through the client against a cluster: finalizers holding an object in Terminating
// until they are removed (and what watchers see meanwhile), and foreground propagation, where
// the owner waits for its dependents (the garbage collector deletes them).
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kube/api_error.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "tests/kube/cluster_test_support.h"
#include "tests/support/test_cluster.h"

namespace tessel::kube {
namespace {

using nlohmann::json;
using tessel::testing::test_job;
using tessel::testing::TestCluster;
using testing::InformerLog;
using testing::kGarbageCollectionTimeout;
using testing::poll_until;
using testing::version_of;

constexpr char kHold[] = "tests.tessel.dev/hold";

const ResourceInfo& configmaps() {
  static const ResourceInfo info = *ResourceRegistry().find_resource("", "configmaps");
  return info;
}

class ClusterDeleteTest : public ::testing::Test {
 protected:
  ClusterDeleteTest() : jobs_(cluster_.ensure_test_crd()), ns_(cluster_.namespace_name()) {
    client_->register_resource(jobs_);
  }

  bool exists(const ResourceInfo& info, const std::string& name) {
    try {
      client_->get(info, ns_, name);
      return true;
    } catch (const ApiError& error) {
      if (error.is_not_found()) return false;
      throw;
    }
  }

  TestCluster cluster_;
  const ResourceInfo jobs_;
  const std::string ns_;
  const std::shared_ptr<Client> client_ = cluster_.client();
};

TEST_F(ClusterDeleteTest, FinalizerHoldsTheObjectUntilRemoved) {
  InformerLog log;
  SharedInformer informer(*client_, jobs_, ns_);
  informer.add_event_handler(log.handler());
  informer.start();
  ASSERT_TRUE(informer.wait_for_sync({}));

  json job = test_job(ns_, "held");
  add_finalizer(job, kHold);
  const json created = client_->create(jobs_, ns_, job);
  const std::string key = ns_ + "/held";

  const json terminating = client_->remove(jobs_, ns_, "held");
  EXPECT_EQ(terminating.value("kind", ""), "TestJob");  // the object, not a Status
  EXPECT_TRUE(is_being_deleted(terminating));
  EXPECT_TRUE(has_finalizer(terminating, kHold));
  EXPECT_EQ(object_generation(terminating), object_generation(created) + 1);
  ASSERT_TRUE(log.wait_for_version(key, version_of(terminating)));
  EXPECT_TRUE(is_being_deleted(log.state().objects.at(key)));

  // Still readable, its status still writable; a second delete changes nothing; no new
  // finalizer may join while it terminates.
  EXPECT_TRUE(is_being_deleted(client_->get(jobs_, ns_, "held")));
  const json status_written = client_->patch(jobs_, ns_, "held", PatchType::kMerge,
                                             {{"status", {{"phase", "Failed"}}}}, {}, "status");
  EXPECT_EQ(status_written["status"]["phase"], "Failed");
  const json again = client_->remove(jobs_, ns_, "held");
  EXPECT_EQ(object_resource_version(again), object_resource_version(status_written));
  try {
    client_->patch(jobs_, ns_, "held", PatchType::kMerge,
                   {{"metadata", {{"finalizers", {kHold, "tests.tessel.dev/another"}}}}});
    ADD_FAILURE() << "a finalizer was added to a terminating object";
  } catch (const ApiError& error) {
    EXPECT_TRUE(error.is_invalid()) << error.what();
  }

  // Removing the last finalizer completes the deletion; watchers get DELETED.
  client_->patch(jobs_, ns_, "held", PatchType::kMerge, {{"metadata", {{"finalizers", nullptr}}}});
  EXPECT_FALSE(exists(jobs_, "held"));
  ASSERT_TRUE(
      log.wait_for([&](const InformerLog::State& state) { return state.deletes.count(key) > 0; }));
  const InformerLog::State state = log.state();
  EXPECT_EQ(state.deletes.at(key), 1);
  EXPECT_EQ(state.unknown_final_states.count(key), 0u);
  EXPECT_EQ(informer.store().get(key), nullptr);
}

TEST_F(ClusterDeleteTest, ForegroundDeletionWaitsForDependents) {
  const json owner = client_->create(jobs_, ns_, test_job(ns_, "owner"));
  json dependent = {{"apiVersion", "v1"},
                    {"kind", "ConfigMap"},
                    {"metadata", {{"name", "owned"}, {"namespace", ns_}}},
                    {"data", {{"stage", "0"}}}};
  ASSERT_TRUE(set_controller_reference(dependent, owner));
  // A foreground deletion waits for the dependents whose reference blocks it (the controller
  // reference leaves blockOwnerDeletion unset).
  dependent["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = true;
  // The dependent's own finalizer keeps it, and so its owner, around until the test lets go.
  add_finalizer(dependent, kHold);
  client_->create(configmaps(), ns_, dependent);

  DeleteOptions foreground;
  foreground.propagation_policy = "Foreground";
  const json deleting = client_->remove(jobs_, ns_, "owner", foreground);
  EXPECT_TRUE(is_being_deleted(deleting));
  EXPECT_TRUE(has_finalizer(deleting, "foregroundDeletion"));

  // The garbage collector deletes the dependent; the owner stays while the dependent does.
  ASSERT_TRUE(poll_until([&] { return is_being_deleted(client_->get(configmaps(), ns_, "owned")); },
                         kGarbageCollectionTimeout));
  const json waiting_owner = client_->get(jobs_, ns_, "owner");
  EXPECT_TRUE(has_finalizer(waiting_owner, "foregroundDeletion"));

  client_->patch(configmaps(), ns_, "owned", PatchType::kMerge,
                 {{"metadata", {{"finalizers", nullptr}}}});
  EXPECT_TRUE(poll_until([&] { return !exists(configmaps(), "owned"); }));
  EXPECT_TRUE(poll_until([&] { return !exists(jobs_, "owner"); }, kGarbageCollectionTimeout));
}

TEST_F(ClusterDeleteTest, BackgroundDeletionRemovesTheOwnerFirst) {
  const json owner = client_->create(jobs_, ns_, test_job(ns_, "owner"));
  json dependent = {{"apiVersion", "v1"},
                    {"kind", "ConfigMap"},
                    {"metadata", {{"name", "owned"}, {"namespace", ns_}}}};
  ASSERT_TRUE(set_controller_reference(dependent, owner));
  client_->create(configmaps(), ns_, dependent);

  DeleteOptions background;
  background.propagation_policy = "Background";
  EXPECT_EQ(client_->remove(jobs_, ns_, "owner", background).value("kind", ""), "Status");
  EXPECT_FALSE(exists(jobs_, "owner"));
  EXPECT_TRUE(
      poll_until([&] { return !exists(configmaps(), "owned"); }, kGarbageCollectionTimeout));
}

}  // namespace
}  // namespace tessel::kube
