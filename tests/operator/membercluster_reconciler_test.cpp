// The MemberCluster reconciler with a hub and member API servers: a good member becomes
// Reachable with its counts and is not rewritten when nothing changed; bad and hostile
// kubeconfigs and refusing or absent API servers give Reachable False naming the cause, beside
// a good member that is not held up; a Secret change reconnects; a deleted MemberCluster's
// informers stop.
#include "operator/controller/membercluster_reconciler.h"

#include <gtest/gtest.h>

#include <set>

#include "api/link_annotations.h"
#include "tests/operator/membercluster_reconciler_fixture.h"

namespace tessel::controller {
namespace {

using namespace member_testing;
using testing::TestCluster;

TEST_F(MemberClusterReconcilerTest, AReachableMemberGetsItsCountsAndIsNotRewritten) {
  const auto a = TestCluster::member(0, hub_.namespace_name());
  TESSEL_REQUIRE_TEST_SERVER(*a, "exact node counts: a real member has nodes of its own");
  api::NodeLinks links;
  links.peers["gpu-2"] = {0.2, 0.3, 9.0, 9.5, "2026-11-26T00:00:00Z"};
  register_gpu_node(a->admin(), "gpu-1", 8,
                    {{api::kLinksAnnotation, api::format_node_links(links)}});
  register_gpu_node(a->admin(), "gpu-2", 8);
  a->admin().create(core("pods"), a->namespace_name(),
                    gpu_pod(a->namespace_name(), "holder", "gpu-1", 3));
  const std::string name = add_member("a", a->self_contained_kubeconfig());

  reconcile_until({{name, {"True", "Connected"}}});
  ASSERT_TRUE(eventually([&] {
    reconciler_->reconcile(name);
    return live(name)["status"].value("gpus", json()) == json{{"total", 16}, {"free", 13}};
  })) << live(name)["status"];
  const json status = live(name)["status"];
  EXPECT_EQ(status["nodes"], 2);
  EXPECT_EQ(status["probeCoverage"], "1/2");
  EXPECT_TRUE(status.contains("lastSeen"));
  EXPECT_EQ(status["observedGeneration"], live(name)["metadata"]["generation"]);
  EXPECT_EQ(reachable(live(name))["observedGeneration"], live(name)["metadata"]["generation"]);
  EXPECT_TRUE(event_reasons(name).count("Reachable"));

  // Nothing changed: nothing is written (once the cache holds the last write).
  const std::string version = live(name)["metadata"]["resourceVersion"];
  ASSERT_TRUE(eventually([&] {
    const auto cached = member_informer_->store().get(name);
    return cached && (*cached)["metadata"]["resourceVersion"] == version;
  }));
  for (int i = 0; i < 3; ++i) {
    const kube::ReconcileResult result = reconciler_->reconcile(name);
    EXPECT_EQ(result.requeue_after, std::chrono::milliseconds(30'000));
  }
  EXPECT_EQ(live(name)["metadata"]["resourceVersion"], version);

  // Once last_seen_refresh has passed, lastSeen alone is rewritten.
  MemberClusterReconcilerOptions later;
  later.last_seen_refresh = std::chrono::milliseconds(0);
  later.now = [] { return std::chrono::system_clock::now() + std::chrono::hours(1); };
  MemberClusterReconciler refresher(hub_.admin(), members_resource_, member_informer_->store(),
                                    secret_informer_->store(), *registry_, *events_, later);
  const json transition = reachable(live(name))["lastTransitionTime"];
  refresher.reconcile(name);
  const json refreshed = live(name);
  EXPECT_NE(refreshed["metadata"]["resourceVersion"], version);
  EXPECT_GT(refreshed["status"]["lastSeen"].get<std::string>(),
            status["lastSeen"].get<std::string>());
  EXPECT_EQ(reachable(refreshed)["lastTransitionTime"], transition);  // no flip
}

TEST_F(MemberClusterReconcilerTest, BadKubeconfigsAndServersAreFlaggedBesideAGoodMember) {
  const auto good = TestCluster::member(0, hub_.namespace_name());
  testing::ApiTestServer stranger;  // its CA signed nothing the member serves
  struct Case {
    std::string name, reason, words;
  };
  std::vector<Case> cases = {
      {add_member("no-secret", "", false, false), "SecretNotFound", "does not exist"},
      {add_member("not-yaml", "clusters: [unclosed"), "KubeconfigInvalid", "line"},
      {add_member("exec", kubeconfig_with(*good, json::object(),
                                          {{"exec",
                                            {{"command", "aws"},
                                             {"apiVersion", "client.authentication.k8s.io/v1"}}}})),
       "KubeconfigInvalid", "does not run credential plugins"},
      {add_member("token-file",
                  kubeconfig_with(*good, json::object(), {{"tokenFile", "/etc/shadow"}})),
       "KubeconfigInvalid", "tokenFile"},
      {add_member("insecure", kubeconfig_with(*good, {{"insecure-skip-tls-verify", true},
                                                      {"certificate-authority-data", nullptr}})),
       "KubeconfigInvalid", "spec.allowInsecureTLS"},
      {add_member("wrong-token",
                  kubeconfig_with(*good, json::object(), {{"token", "not-a-token"}})),
       "Unauthorized", "401"},
      {add_member("bad-ca", kubeconfig_with(*good, {{"certificate-authority-data",
                                                     kube::base64_encode(stranger.ca_pem())}})),
       "Unreachable", "certificate"},
      {add_member("closed", kubeconfig_with(*good, {{"server", "https://127.0.0.1:1"}})),
       "Unreachable", "https://127.0.0.1:1"},
  };
  const std::string fine = add_member("good", good->self_contained_kubeconfig());

  std::map<std::string, std::pair<std::string, std::string>> wanted = {{fine, {"True", ""}}};
  for (const Case& c : cases) wanted[c.name] = {"False", c.reason};
  reconcile_until(wanted);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const json condition = reachable(live(c.name));
    EXPECT_EQ(condition.value("reason", ""), c.reason);
    EXPECT_NE(condition.value("message", "").find(c.words), std::string::npos) << condition;
    EXPECT_TRUE(event_reasons(c.name).count(c.reason));
    EXPECT_FALSE(live(c.name)["status"].contains("nodes"));  // never counted
  }
  // Refused kubeconfigs start nothing; members whose server refuses keep trying.
  EXPECT_FALSE(registry_->member(cases[0].name));
  EXPECT_TRUE(registry_->member(cases[5].name));
  EXPECT_EQ(reconciler_->reconcile(cases[5].name).requeue_after, std::chrono::milliseconds(5'000));
  EXPECT_EQ(reconciler_->reconcile(cases[0].name).requeue_after, std::chrono::milliseconds(30'000));
}

TEST_F(MemberClusterReconcilerTest, ASecretChangeReconnects) {
  const auto a = TestCluster::member(0, hub_.namespace_name());
  const std::string name =
      add_member("a", kubeconfig_with(*a, json::object(), {{"token", "not-a-token"}}));
  reconcile_until({{name, {"False", "Unauthorized"}}});
  ASSERT_TRUE(eventually([&] { return !secret_informer_->store().list().empty(); }));
  EXPECT_EQ(
      members_using_secret(member_informer_->store(),
                           *secret_informer_->store().get(hub_.namespace_name() + "/" + name)),
      std::vector<std::string>{name});

  json secret = hub_.admin().get(core("secrets"), hub_.namespace_name(), name);
  secret["data"]["kubeconfig"] = kube::base64_encode(a->self_contained_kubeconfig());
  hub_.admin().update(core("secrets"), secret);
  reconcile_until({{name, {"True", "Connected"}}});
  const std::set<std::string> reasons = event_reasons(name);
  EXPECT_TRUE(reasons.count("Unauthorized"));
  EXPECT_TRUE(reasons.count("Reachable"));
}

TEST_F(MemberClusterReconcilerTest, ADeletedMemberClusterStopsItsInformers) {
  const auto a = TestCluster::member(0, hub_.namespace_name());
  const std::string name = add_member("a", a->self_contained_kubeconfig());
  reconcile_until({{name, {"True", ""}}});
  ASSERT_TRUE(registry_->member(name));
  hub_.admin().remove(members_resource_, "", name);
  ASSERT_TRUE(eventually([&] { return member_informer_->store().get(name) == nullptr; }));
  EXPECT_EQ(reconciler_->reconcile(name).requeue_after, kube::Clock::duration::zero());
  EXPECT_FALSE(registry_->member(name));
  EXPECT_TRUE(eventually([&] { return registry_->stopping() == 0; }));
}

}  // namespace
}  // namespace tessel::controller
