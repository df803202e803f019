// The MemberCluster reconciler's test fixture: a hub (test server, or a real one through
// TESSEL_TEST_KUBECONFIG) with the MemberCluster CRD, informers on MemberClusters and Secrets,
// a member registry (prober namespace: the test's namespace, which every member has; what its
// on_probers heard is counted), an event recorder and the reconciler. The tests add members and
// call reconcile() directly.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "api/crds.h"
#include "kube/api_error.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "operator/controller/conditions.h"
#include "operator/controller/membercluster_reconciler.h"
#include "tests/operator/member_test_support.h"

namespace tessel::controller::member_testing {

using testing::TestCluster;

inline const kube::ResourceInfo& core(const char* plural) {
  static const kube::ResourceRegistry registry;
  return *registry.find_resource("", plural);
}

// The MemberCluster CRD of crds/, applied to the hub and served.
inline kube::ResourceInfo ensure_membercluster_crd(TestCluster& hub) {
  const kube::ResourceInfo crds =
      *kube::ResourceRegistry().find_resource("apiextensions.k8s.io", "customresourcedefinitions");
  kube::ApplyOptions apply;
  apply.field_manager = "tessel-tests";
  hub.admin().apply(crds, api::membercluster_crd(), apply);
  const kube::ResourceInfo info =
      kube::parse_custom_resource_definition(api::membercluster_crd()).front();
  hub.admin().register_resource(info);
  const bool served = eventually([&] {
    try {
      hub.admin().list(info, "");
      return true;
    } catch (const kube::ApiError&) {
      return false;
    }
  });
  if (!served) throw std::runtime_error("the MemberCluster CRD was not served");
  return info;
}

class MemberClusterReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    members_resource_ = ensure_membercluster_crd(hub_);
    kube::InformerOptions informer_options;
    informer_options.reflector.logger = quiet_;
    member_informer_ = std::make_unique<kube::SharedInformer>(hub_.admin(), members_resource_, "",
                                                              informer_options);
    secret_informer_ = std::make_unique<kube::SharedInformer>(
        hub_.admin(), core("secrets"), hub_.namespace_name(), informer_options);
    member_informer_->start();
    secret_informer_->start();
    MemberRegistry::Options options;
    options.operator_namespace = hub_.namespace_name();
    options.hub_id = "hub-1";
    options.client = TestCluster::unlimited();
    options.client.request_timeout = std::chrono::milliseconds(2000);
    options.client.backoff.steps = 1;
    options.logger = quiet_;
    options.prober_namespace = hub_.namespace_name();
    options.on_probers = [this](const std::string& cluster) {
      std::lock_guard lock(probers_heard_mutex_);
      ++probers_heard_[cluster];
    };
    registry_ = std::make_unique<MemberRegistry>(options, nullptr, nullptr);
    kube::EventRecorderOptions event_options;
    event_options.logger = quiet_;
    events_ = std::make_unique<kube::EventRecorder>(
        hub_.admin(), kube::EventSource{"tessel-operator", "", ""}, event_options);
    MemberClusterReconcilerOptions reconciler_options;
    reconciler_options.logger = quiet_;
    reconciler_ = std::make_unique<MemberClusterReconciler>(
        hub_.admin(), members_resource_, member_informer_->store(), secret_informer_->store(),
        *registry_, *events_, reconciler_options);
  }

  void TearDown() override {
    registry_->stop();
    for (const std::string& name : created_) {
      try {
        hub_.admin().remove(members_resource_, "", name);
      } catch (const kube::ApiError&) {
        // Deleted by the test already.
      }
    }
  }

  // A MemberCluster (cluster-scoped: named after this test's namespace) and its Secret.
  std::string add_member(const std::string& suffix, const std::string& kubeconfig,
                         bool allow_insecure = false, bool with_secret = true) {
    const std::string name = hub_.namespace_name() + "-" + suffix;
    if (with_secret) {
      hub_.admin().create(core("secrets"), hub_.namespace_name(),
                          kubeconfig_secret(hub_.namespace_name(), name, kubeconfig));
    }
    json member = member_cluster(name, name, "eu-west", allow_insecure);
    member["metadata"].erase("generation");
    hub_.admin().create(members_resource_, "", member);
    created_.push_back(name);
    return name;
  }

  json live(const std::string& name) { return hub_.admin().get(members_resource_, "", name); }

  static json reachable(const json& member) {
    const json conditions =
        member.value("status", json::object()).value("conditions", json::array());
    const json* c = find_condition(conditions, "Reachable");
    return c ? *c : json::object();
  }

  // Reconciles `names` (as the controller would, over and over) until each one's live object
  // has Reachable `status` with the given reason ("" any).
  void reconcile_until(const std::map<std::string, std::pair<std::string, std::string>>& wanted) {
    std::map<std::string, json> last;
    const bool reached = eventually([&] {
      bool all = true;
      for (const auto& [name, want] : wanted) {
        reconciler_->reconcile(name);
        last[name] = reachable(live(name));
        all = all && last[name].value("status", "") == want.first &&
              (want.second.empty() || last[name].value("reason", "") == want.second);
      }
      return all;
    });
    for (const auto& [name, want] : wanted)
      EXPECT_TRUE(reached && last[name].value("status", "") == want.first)
          << name << ": wanted " << want.first << " " << want.second << ", got " << last[name];
  }

  std::set<std::string> event_reasons(const std::string& name) {
    std::set<std::string> reasons;
    for (const json& event : kube::events_for_object(hub_.admin(), live(name)))
      reasons.insert(event.value("reason", ""));
    return reasons;
  }

  std::shared_ptr<const kube::Logger> quiet_ =
      std::make_shared<const kube::Logger>("test", kube::LogLevel::kError, [](std::string_view) {});
  TestCluster hub_;
  kube::ResourceInfo members_resource_;
  std::unique_ptr<kube::SharedInformer> member_informer_;
  std::unique_ptr<kube::SharedInformer> secret_informer_;
  std::unique_ptr<MemberRegistry> registry_;
  std::unique_ptr<kube::EventRecorder> events_;
  std::unique_ptr<MemberClusterReconciler> reconciler_;
  std::vector<std::string> created_;

  // How often the registry's on_probers was called, by member.
  int probers_heard(const std::string& member) {
    std::lock_guard lock(probers_heard_mutex_);
    return probers_heard_[member];
  }
  std::mutex probers_heard_mutex_;
  std::map<std::string, int> probers_heard_;
};

}  // namespace tessel::controller::member_testing
