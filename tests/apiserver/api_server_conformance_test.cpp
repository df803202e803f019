// The API test server against the captured kube-apiserver v1.26 fixtures: each test replays a
// story of fixtures in the order they were captured and compares every answer with the real
// server's (see api_fixture_replay.h for what is ignored).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/apiserver/api_fixture_replay.h"
#include "tests/apiserver/api_test_client.h"
#include "tests/kube/fixtures.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {
namespace {

using kube::testing::fixture;
using nlohmann::json;

const std::string kJobs = "/apis/tessel.dev/v1alpha1/namespaces/default/trainingjobs";

ApiTestServerOptions plain_options() {
  ApiTestServerOptions options;
  options.tls = false;
  options.future_resource_version_wait = std::chrono::milliseconds(100);
  return options;
}

class ConformanceTest : public ::testing::Test {
 protected:
  explicit ConformanceTest(ApiTestServerOptions options = plain_options())
      : server_(std::move(options)),
        client_(server_.url(), "", {"admin-token", "", ""}),
        replay_(client_) {}

  // The TrainingJob CRD as kubectl applied it in the capture.
  void create_training_job_crd() {
    const json captured = fixture("200-get-crd-established.json")["response"]["body"];
    const json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
                      {"kind", "CustomResourceDefinition"},
                      {"metadata",
                       {{"name", captured["metadata"]["name"]},
                        {"annotations", captured["metadata"]["annotations"]}}},
                      {"spec", captured["spec"]}};
    const ClientResponse created =
        client_.send("POST",
                     "/apis/apiextensions.k8s.io/v1/"
                     "customresourcedefinitions?fieldManager=kubectl-client-side-apply",
                     crd);
    ASSERT_EQ(created.status, 201) << created.body;
  }

  // A TrainingJob like the capture's gpt-a, named `name`, with `replicas`.
  void create_job(const std::string& name, int replicas) {
    json body = fixture("201-create-trainingjob.json")["request"]["body"];
    body["metadata"]["name"] = name;
    body["spec"]["replicas"] = replicas;
    const ClientResponse created = client_.send("POST", kJobs, body);
    ASSERT_EQ(created.status, 201) << created.body;
  }

  void remove(const std::string& path) {
    const ClientResponse removed = client_.request("DELETE", path);
    ASSERT_EQ(removed.status, 200) << removed.body;
  }

  ApiTestServer server_;
  TestClient client_;
  FixtureReplay replay_;
};

TEST_F(ConformanceTest, CustomResourceDefinitionIsEstablished) {
  create_training_job_crd();
  replay_.replay("200-get-crd-established.json");
}

TEST_F(ConformanceTest, CreateGetAndErrorsOfCustomResources) {
  create_training_job_crd();
  for (const char* name :
       {"201-create-trainingjob.json", "200-get-trainingjob.json", "409-already-exists.json",
        "404-not-found.json", "404-not-found-delete.json", "404-unknown-resource-type.json",
        "404-namespace-not-found-on-create.json", "422-invalid-schema.json",
        "400-strict-unknown-field.json", "201-create-unknown-field-ignore.json",
        "201-create-pruned-unknown-field.json", "200-get-pruned-unknown-field.json",
        "201-create-unknown-field-warn.json"}) {
    replay_.replay(name);
  }
}

TEST_F(ConformanceTest, ListsSelectorsPagesAndTables) {
  create_training_job_crd();
  replay_.replay("201-create-trainingjob.json");
  create_job("gpt-b", 2);
  create_job("gpt-c", 8);
  for (const char* name :
       {"200-list-trainingjobs.json", "200-list-trainingjobs-all-namespaces.json",
        "200-list-trainingjobs-fieldselector-name.json", "200-list-trainingjobs-labelselector.json",
        "200-list-trainingjobs-limit1-page1.json", "200-list-trainingjobs-limit1-page2.json",
        "200-list-trainingjobs-limit1-page3-last.json", "200-list-trainingjobs-rv0.json",
        "200-table-trainingjobs.json", "200-table-trainingjob-single.json",
        "200-table-trainingjobs-includeObject-None.json", "400-list-fieldselector-unsupported.json",
        "406-table-unsupported-version.json"}) {
    replay_.replay(name);
  }
}

TEST_F(ConformanceTest, UpdatesPatchesAndTheStatusSubresource) {
  create_training_job_crd();
  wait_for_the_next_second();
  replay_.replay("201-create-trainingjob.json");
  for (const char* name :
       {"200-update-spec-generation-bump.json", "409-conflict-stale-rv.json",
        "422-update-without-resourceversion.json", "200-status-update-put.json",
        "200-status-merge-patch.json", "200-update-main-ignores-status.json",
        "200-update-main-spec-and-status.json", "200-patch-main-status-ignored.json",
        "409-conflict-patch-stale-rv.json", "200-patch-labels-no-generation-bump.json",
        "200-json-patch.json", "422-json-patch-test-failed.json",
        "415-patch-plain-json-content-type.json", "415-strategic-merge-patch-on-cr.json",
        "422-status-invalid-enum.json"}) {
    replay_.replay(name);
  }
}

TEST_F(ConformanceTest, AMainResourceWriteOfStatusOnlyIsANoOp) {
  create_training_job_crd();
  replay_.replay("201-create-trainingjob.json");
  replay_.replay("200-update-spec-generation-bump.json");
  replay_.replay("200-status-update-put.json");
  replay_.replay("200-status-merge-patch.json");
  const std::int64_t before = server_.current_resource_version();
  replay_.replay("200-update-main-ignores-status.json");
  EXPECT_EQ(server_.current_resource_version(), before);
}

TEST_F(ConformanceTest, LeaderElectionLeases) {
  for (const char* name :
       {"201-create-namespace.json", "404-lease-not-found.json", "201-lease-create.json",
        "200-lease-update-renew.json", "409-lease-update-conflict.json",
        "200-lease-update-takeover.json", "200-lease-get.json", "400-lease-bad-microtime.json"}) {
    replay_.replay(name);
  }
}

TEST_F(ConformanceTest, EventsListedByInvolvedObject) {
  replay_.replay("201-create-event-core-v1.json");
  replay_.replay("200-list-events-for-object.json");
}

TEST_F(ConformanceTest, PodsWithoutSchedulerOrKubelet) {
  create_training_job_crd();
  replay_.replay("201-create-trainingjob.json");  // the Pods' owner
  for (const char* name :
       {"201-create-pod-with-nodename.json", "200-pod-status-patch-running.json",
        "200-pod-get-running.json", "200-pod-status-merge-patch-ready-false.json",
        "422-pod-spec-update-forbidden.json", "200-delete-pod-bound-graceful.json",
        "200-get-pod-terminating.json", "200-delete-pod-grace0.json",
        "404-get-pod-after-delete.json"}) {
    replay_.replay(name);
  }
}

TEST_F(ConformanceTest, AnUnboundPodIsDeletedAtOnce) {
  json pod = fixture("201-create-pod-with-nodename.json")["request"]["body"];
  pod["metadata"]["name"] = "unbound";
  pod["metadata"].erase("ownerReferences");
  pod["spec"].erase("nodeName");
  const ClientResponse created = client_.send("POST", "/api/v1/namespaces/default/pods", pod);
  ASSERT_EQ(created.status, 201) << created.body;
  replay_.replay("200-delete-pod-unbound-immediate.json");
  replay_.replay("404-get-pod-unbound-after-delete.json");
}

// kube-controller-manager's TTL controller annotates a new Node a moment after its create.
bool ttl_annotated(const TestClient& client, const std::string& node) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const json object = client.get("/api/v1/nodes/" + node).json();
    if (object["metadata"]
            .value("annotations", json::object())
            .contains("node.alpha.kubernetes.io/ttl")) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST_F(ConformanceTest, NodesAnnotatedAndReportingStatus) {
  replay_.replay("201-create-node.json");
  ASSERT_TRUE(ttl_annotated(client_, "gpu-node-b"));
  for (const char* name : {"200-node-status-patch-ready.json", "200-node-annotate-merge-patch.json",
                           "200-node-remove-annotation-merge-patch.json",
                           "200-list-pods-fieldselector-nodename.json"}) {
    replay_.replay(name);
  }
  // The capture's gpu-node-a had a history of its own; the lists are compared by names.
  const json node_a = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", "gpu-node-a"}, {"labels", {{"nvidia.com/gpu.product", "NVIDIA-H200"}}}}}};
  ASSERT_EQ(client_.send("POST", "/api/v1/nodes", node_a).status, 201);
  for (const char* name : {"200-list-nodes.json", "200-list-nodes-labelselector-gpu.json"}) {
    const ClientResponse listed = replay_.replay(name, false);
    std::vector<std::string> names;
    const json items = listed.json()["items"];
    for (const json& item : items) names.push_back(item["metadata"]["name"]);
    EXPECT_EQ(names, (std::vector<std::string>{"gpu-node-a", "gpu-node-b"})) << name;
  }
}

TEST_F(ConformanceTest, FinalizersHoldADeletedObject) {
  create_training_job_crd();
  for (const char* name :
       {"201-create-with-finalizer.json", "200-delete-with-finalizer.json",
        "200-get-terminating-with-finalizer.json", "200-delete-again-while-terminating.json",
        "200-status-patch-while-terminating.json", "422-add-finalizer-while-terminating.json",
        "200-remove-finalizer-deletes.json", "404-get-after-finalizer-removed.json"}) {
    replay_.replay(name);
  }
}

TEST_F(ConformanceTest, ServerSideApply) {
  create_training_job_crd();
  replay_.replay("201-ssa-apply-create.json");
  // Between the captured applies the operator took spec.replicas over with an update.
  const ClientResponse taken = client_.request(
      "PATCH", kJobs + "/gpt-ssa", R"({"spec":{"replicas":6}})", "application/merge-patch+json");
  ASSERT_EQ(taken.status, 200) << taken.body;
  for (const char* name : {"409-ssa-apply-conflict.json", "200-ssa-apply-force.json",
                           "422-ssa-missing-fieldmanager.json", "200-ssa-status-apply.json"}) {
    replay_.replay(name);
  }
}

TEST_F(ConformanceTest, DeletionAnswersAndPropagation) {
  create_training_job_crd();
  for (const char* name : {"gpt-gc", "gpt-fg"}) {
    const json job = {{"apiVersion", "tessel.dev/v1alpha1"},
                      {"kind", "TrainingJob"},
                      {"metadata", {{"name", name}, {"namespace", "default"}}},
                      {"spec", {{"model", "m"}, {"replicas", 1}}}};
    ASSERT_EQ(client_.send("POST", kJobs, job).status, 201);
  }
  replay_.replay("200-delete-trainingjob.json");
  EXPECT_EQ(client_.get(kJobs + "/gpt-gc").status, 404);
  replay_.replay("200-delete-trainingjob-foreground.json");
}

TEST_F(ConformanceTest, ClusterScopedCustomResources) {
  replay_.replay("201-create-crd.json");
  const json cluster = fixture("200-get-cluster-scoped-cr.json")["response"]["body"];
  const json body = {{"apiVersion", cluster["apiVersion"]},
                     {"kind", cluster["kind"]},
                     {"metadata", {{"name", cluster["metadata"]["name"]}}},
                     {"spec", cluster["spec"]}};
  ASSERT_EQ(client_.send("POST", "/apis/tessel.dev/v1alpha1/memberclusters", body).status, 201);
  replay_.replay("200-get-cluster-scoped-cr.json");
}

TEST_F(ConformanceTest, AListFromAFutureResourceVersionTimesOut) {
  create_training_job_crd();
  const ClientResponse response = replay_.replay("504-list-future-rv.json", false);
  json expected = fixture("504-list-future-rv.json")["response"]["body"];
  expected["message"] = "Timeout: Too large resource version: 999999, current: " +
                        std::to_string(server_.current_resource_version());
  EXPECT_EQ(response.json(), expected);
  EXPECT_EQ(response.header_values("Retry-After"), std::vector<std::string>{"1"});
}

class CompactedConformanceTest : public ConformanceTest {
 protected:
  static ApiTestServerOptions small_window() {
    ApiTestServerOptions options = plain_options();
    options.watch_window = 3;
    return options;
  }
  CompactedConformanceTest() : ConformanceTest(small_window()) {}
};

TEST_F(CompactedConformanceTest, ExpiredListsAnswer410) {
  create_training_job_crd();
  for (int i = 0; i < 5; ++i) create_job("job-" + std::to_string(i), 1);
  replay_.replay("410-list-exact-rv-compacted.json");
  replay_.replay("410-list-continue-token-expired.json");
}

class AuthorizationConformanceTest : public ConformanceTest {
 protected:
  AuthorizationConformanceTest() {
    server_.add_token("noperms-token",
                      {"system:serviceaccount:default:tessel-noperms", {"system:serviceaccounts"}});
    server_.add_token("reader-token",
                      {"system:serviceaccount:default:tessel-reader", {"system:serviceaccounts"}});
    // RBAC as the capture had it: the reader may read TrainingJobs, the other nothing.
    server_.set_authorizer([](const RequestAttributes& request) {
      const std::string& user = request.user.name;
      if (user == "admin") return true;
      if (user == "system:serviceaccount:default:tessel-reader") {
        return request.resource == "trainingjobs" && request.subresource.empty() &&
               (request.verb == "get" || request.verb == "list" || request.verb == "watch");
      }
      return false;
    });
  }
};

TEST_F(AuthorizationConformanceTest, TokensAnonymousAndForbiddenRequests) {
  create_training_job_crd();
  replay_.replay("201-create-trainingjob.json");
  const TestClient noperms(server_.url(), "", {"noperms-token", "", ""});
  const TestClient reader(server_.url(), "", {"reader-token", "", ""});
  const TestClient anonymous(server_.url(), "", {"", "", ""});
  const TestClient impostor(server_.url(), "", {"not-a-token", "", ""});
  FixtureReplay(impostor).replay("401-unauthorized-bad-token.json");
  FixtureReplay(anonymous).replay("403-anonymous.json");
  FixtureReplay as_noperms(noperms);
  for (const char* name :
       {"403-forbidden-serviceaccount-list.json", "403-forbidden-serviceaccount-create.json",
        "403-forbidden-serviceaccount-get-node.json"}) {
    as_noperms.replay(name);
  }
  FixtureReplay as_reader(reader);
  as_reader.replay("200-reader-serviceaccount-list.json", false);
  as_reader.replay("403-forbidden-serviceaccount-status-subresource.json");
}

}  // namespace
}  // namespace tessel::testing
