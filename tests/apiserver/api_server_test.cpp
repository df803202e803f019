// The API test server end to end over HTTP(S): TLS and authentication, watches, the
// controllers that finish deletions, fault injection and the direct-access helpers.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "tests/apiserver/api_fixture_replay.h"
#include "tests/apiserver/api_test_client.h"
#include "tests/apiserver/plain_server.h"
#include "tests/kube/fixtures.h"
#include "tests/support/api_test_server.h"

namespace tessel::testing {
namespace {

using kube::testing::fixture;
using nlohmann::json;
using std::chrono::milliseconds;

const std::string kConfigMaps = "/api/v1/namespaces/default/configmaps";
const std::string kJobs = "/apis/tessel.dev/v1alpha1/namespaces/default/trainingjobs";
const std::string kTableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io";

// Polls `done` until it holds (the controllers run asynchronously, as on a real cluster).
bool eventually(const std::function<bool()>& done, milliseconds timeout = milliseconds(10000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return done();
}

std::string version_of(const json& object) {
  return object["metadata"]["resourceVersion"].get<std::string>();
}

class ServerTest : public ::testing::Test {
 protected:
  explicit ServerTest(ApiTestServerOptions options = plain_options())
      : server_(std::move(options)), client_(server_.url(), "", {"admin-token", "", ""}) {}

  json create(const std::string& path, const json& body) {
    const ClientResponse response = client_.send("POST", path, body);
    EXPECT_EQ(response.status, 201) << response.body;
    return response.json();
  }

  void create_training_job_crd() {
    const json captured = fixture("200-get-crd-established.json")["response"]["body"];
    create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
           {{"apiVersion", "apiextensions.k8s.io/v1"},
            {"kind", "CustomResourceDefinition"},
            {"metadata", {{"name", captured["metadata"]["name"]}}},
            {"spec", captured["spec"]}});
  }

  json job(const std::string& name, int replicas = 1) {
    return {{"apiVersion", "tessel.dev/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", name}}},
            {"spec", {{"model", "gpt3-1.3b"}, {"replicas", replicas}}}};
  }

  bool gone(const std::string& path) { return client_.get(path).status == 404; }

  ApiTestServer server_;
  TestClient client_;
};

TEST(ApiTestServerTls, ServesHttpsWithTokensAndClientCertificates) {
  ApiTestServer server;
  ASSERT_EQ(server.url().rfind("https://127.0.0.1:", 0), 0u);
  const TestClient admin(server.url(), server.ca_pem(), {"admin-token", "", ""});
  const ClientResponse namespaces = admin.get("/api/v1/namespaces");
  ASSERT_EQ(namespaces.status, 200) << namespaces.body;
  std::vector<std::string> names;
  const json items = namespaces.json()["items"];
  for (const json& item : items) names.push_back(item["metadata"]["name"]);
  EXPECT_EQ(names,
            (std::vector<std::string>{"default", "kube-node-lease", "kube-public", "kube-system"}));

  UserInfo seen;
  server.set_authorizer([&](const RequestAttributes& request) {
    seen = request.user;
    return true;
  });
  const auto certificate = server.issue_client_certificate({"alice", {"team-a"}});
  const TestClient alice(server.url(), server.ca_pem(),
                         {"", certificate.cert_pem, certificate.key_pem});
  EXPECT_EQ(alice.get("/api/v1/namespaces/default").status, 200);
  EXPECT_EQ(seen.name, "alice");
  EXPECT_EQ(seen.groups, (std::vector<std::string>{"team-a", "system:authenticated"}));

  server.add_token("sa-token", {"system:serviceaccount:default:op", {}});
  EXPECT_EQ(TestClient(server.url(), server.ca_pem(), {"sa-token", "", ""}).get("/version").status,
            200);
  EXPECT_EQ(seen.name, "system:serviceaccount:default:op");
}

TEST(ApiTestServerTls, AnonymousMayOnlyReadHealthAndVersion) {
  ApiTestServer server(plain_options());
  const TestClient anonymous(server.url(), "", {"", "", ""});
  EXPECT_EQ(anonymous.get("/healthz").body, "ok");
  EXPECT_EQ(anonymous.get("/readyz").status, 200);
  EXPECT_EQ(anonymous.get("/version").json()["gitVersion"], "v1.26.4");
  const ClientResponse api = anonymous.get("/api");
  EXPECT_EQ(api.status, 403);
  EXPECT_EQ(api.json()["message"], "forbidden: User \"system:anonymous\" cannot get path \"/api\"");
}

TEST_F(ServerTest, KubeconfigNamesTheServerItsCaAndTheToken) {
  ApiTestServer tls_server;
  const std::string path = ::testing::TempDir() + "/api_server_test_kubeconfig.yaml";
  EXPECT_EQ(tls_server.write_kubeconfig(path, "admin-token", "tessel-system"), path);
  const YAML::Node config = YAML::LoadFile(path);
  EXPECT_EQ(config["current-context"].as<std::string>(), "test");
  EXPECT_EQ(config["clusters"][0]["cluster"]["server"].as<std::string>(), tls_server.url());
  EXPECT_EQ(kube::base64_decode(
                config["clusters"][0]["cluster"]["certificate-authority-data"].as<std::string>()),
            tls_server.ca_pem());
  EXPECT_EQ(config["users"][0]["user"]["token"].as<std::string>(), "admin-token");
  EXPECT_EQ(config["contexts"][0]["context"]["namespace"].as<std::string>(), "tessel-system");
  std::filesystem::remove(path);
}

TEST_F(ServerTest, WatchFromAListVersionSeesEveryLaterChange) {
  const json list = client_.get(kConfigMaps).json();
  TestClient::Watch watch(client_,
                          kConfigMaps + "?watch=true&resourceVersion=" +
                              list["metadata"]["resourceVersion"].get<std::string>(),
                          "application/json");
  const json created = create(kConfigMaps, config_map("a"));
  json changed = created;
  changed["data"]["k"] = "w";
  ASSERT_EQ(client_.send("PUT", kConfigMaps + "/a", changed).status, 200);
  ASSERT_EQ(client_.request("DELETE", kConfigMaps + "/a").status, 200);
  std::vector<std::string> types;
  std::vector<std::string> versions;
  for (int i = 0; i < 3; ++i) {
    const std::optional<json> event = watch.next();
    ASSERT_TRUE(event);
    types.push_back((*event)["type"]);
    versions.push_back(version_of((*event)["object"]));
    EXPECT_EQ((*event)["object"]["kind"], "ConfigMap");
  }
  EXPECT_EQ(types, (std::vector<std::string>{"ADDED", "MODIFIED", "DELETED"}));
  EXPECT_LT(std::stoll(versions[0]), std::stoll(versions[1]));
  EXPECT_LT(std::stoll(versions[1]), std::stoll(versions[2]));
  EXPECT_EQ(watch.status(), 0);  // still open
}

TEST_F(ServerTest, WatchWithoutVersionStartsWithSyntheticAdded) {
  create(kConfigMaps, config_map("a"));
  create(kConfigMaps, config_map("b"));
  for (const std::string query :
       {"?watch=true&timeoutSeconds=1", "?watch=1&resourceVersion=0&timeoutSeconds=1"}) {
    TestClient::Watch watch(client_, kConfigMaps + query, "application/json");
    std::vector<std::string> names;
    while (const std::optional<json> event = watch.next()) {
      EXPECT_EQ((*event)["type"], "ADDED");
      names.push_back((*event)["object"]["metadata"]["name"]);
    }
    EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(watch.wait_end(), CURLE_OK);  // timeoutSeconds ends the stream cleanly
  }
}

TEST_F(ServerTest, SelectorWatchesReportObjectsLeavingAndEntering) {
  // As watch-stream-labelselector-transitions.jsonl: DELETED on leaving, silence while out,
  // ADDED on coming back.
  const json created = create(kConfigMaps, config_map("a", {{"team", "llm"}}));
  TestClient::Watch watch(
      client_,
      kConfigMaps + "?labelSelector=team%3Dllm&watch=true&resourceVersion=" + version_of(created),
      "application/json");
  json object = created;
  object["metadata"]["labels"]["team"] = "vision";
  const json moved = client_.send("PUT", kConfigMaps + "/a", object).json();
  object = moved;
  object["data"]["k"] = "changed while out";
  const json changed = client_.send("PUT", kConfigMaps + "/a", object).json();
  object = changed;
  object["metadata"]["labels"]["team"] = "llm";
  const json back = client_.send("PUT", kConfigMaps + "/a", object).json();

  const std::optional<json> left = watch.next();
  ASSERT_TRUE(left);
  EXPECT_EQ((*left)["type"], "DELETED");
  EXPECT_EQ((*left)["object"]["metadata"]["labels"]["team"], "llm");  // the earlier state
  EXPECT_EQ(version_of((*left)["object"]), version_of(moved));        // at the change's version
  const std::optional<json> returned = watch.next();
  ASSERT_TRUE(returned);
  EXPECT_EQ((*returned)["type"], "ADDED");
  EXPECT_EQ(version_of((*returned)["object"]), version_of(back));
  EXPECT_EQ((*returned)["object"]["data"]["k"], "changed while out");
}

TEST_F(ServerTest, AFinalizedObjectsDeletedEventShowsItsLastStoredState) {
  // As watch-stream-finalizer-delete.jsonl.
  create_training_job_crd();
  json body = job("gpt-f");
  body["metadata"]["finalizers"] = {"tessel.dev/cleanup"};
  const json created = create(kJobs, body);
  TestClient::Watch watch(
      client_,
      kJobs +
          "?watch=true&fieldSelector=metadata.name%3Dgpt-f&resourceVersion=" + version_of(created),
      "application/json");
  ASSERT_EQ(client_.request("DELETE", kJobs + "/gpt-f").status, 200);
  const ClientResponse removed =
      client_.request("PATCH", kJobs + "/gpt-f", R"({"metadata":{"finalizers":null}})",
                      "application/merge-patch+json");
  ASSERT_EQ(removed.status, 200);
  EXPECT_FALSE(removed.json()["metadata"].contains("finalizers"));
  const std::optional<json> marked = watch.next();
  ASSERT_TRUE(marked);
  EXPECT_EQ((*marked)["type"], "MODIFIED");
  EXPECT_EQ(version_of(removed.json()), version_of((*marked)["object"]));  // the previous version
  const std::optional<json> deleted = watch.next();
  ASSERT_TRUE(deleted);
  EXPECT_EQ((*deleted)["type"], "DELETED");
  EXPECT_EQ((*deleted)["object"]["metadata"]["finalizers"], json({"tessel.dev/cleanup"}));
  EXPECT_GT(std::stoll(version_of((*deleted)["object"])), std::stoll(version_of(removed.json())));
  EXPECT_TRUE(gone(kJobs + "/gpt-f"));
}

class BookmarkTest : public ServerTest {
 protected:
  static ApiTestServerOptions fast_bookmarks() {
    ApiTestServerOptions options = plain_options();
    options.bookmark_interval = milliseconds(50);
    return options;
  }
  BookmarkTest() : ServerTest(fast_bookmarks()) {}
};

TEST_F(BookmarkTest, BookmarksCarryOnlyTheResourceVersion) {
  create_training_job_crd();
  const json created = create(kJobs, job("gpt-w"));
  TestClient::Watch watch(
      client_, kJobs + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + version_of(created),
      "application/json");
  const std::optional<json> bookmark = watch.next();
  ASSERT_TRUE(bookmark);
  const json expected = json::parse(
      R"({"type":"BOOKMARK","object":{"apiVersion":"tessel.dev/v1alpha1","kind":"TrainingJob",
          "metadata":{"resourceVersion":")" +
      version_of(created) + R"("}}})");
  EXPECT_EQ(*bookmark, expected);

  // Built-in kinds serialise their zero value around it (watch-stream-pods.jsonl).
  TestClient::Watch pods(client_, "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=1",
                         "application/json");
  const std::optional<json> pod_bookmark = pods.next();
  ASSERT_TRUE(pod_bookmark);
  std::ifstream captured(kube::testing::kFixtures / "watch-stream-pods.jsonl");
  json captured_bookmark;
  for (std::string line; std::getline(captured, line);) {
    const json event = json::parse(line);
    if (event["type"] == "BOOKMARK") captured_bookmark = event;
  }
  EXPECT_EQ(normalized(*pod_bookmark), normalized(captured_bookmark));
}

class SmallWindowTest : public ServerTest {
 protected:
  static ApiTestServerOptions small_window() {
    ApiTestServerOptions options = plain_options();
    options.watch_window = 5;
    return options;
  }
  SmallWindowTest() : ServerTest(small_window()) {}
};

TEST_F(SmallWindowTest, WatchesFromExpiredVersionsGetA410Event) {
  for (int i = 0; i < 10; ++i) create(kConfigMaps, config_map("cm-" + std::to_string(i)));
  const std::int64_t current = server_.current_resource_version();
  TestClient::Watch watch(client_, kConfigMaps + "?watch=true&resourceVersion=2",
                          "application/json");
  const std::optional<json> error = watch.next();
  ASSERT_TRUE(error);
  json expected =
      json::parse(std::ifstream(kube::testing::kFixtures / "watch-410-expired-too-old-rv.jsonl"));
  expected["object"]["message"] =
      "too old resource version: 2 (" + std::to_string(current - 5) + ")";
  EXPECT_EQ(*error, expected);
  EXPECT_EQ(watch.wait_end(), CURLE_OK);
  EXPECT_EQ(watch.status(), 200);
}

TEST_F(ServerTest, ARestartedWatchCacheDropsWatchesAndExpiresOlderVersions) {
  const json created = create(kConfigMaps, config_map("a"));
  TestClient::Watch open(client_,
                         kConfigMaps + "?watch=true&resourceVersion=" + version_of(created),
                         "application/json");
  create(kConfigMaps, config_map("b"));
  ASSERT_TRUE(open.next());
  server_.restart_watch_cache();
  const std::optional<CURLcode> end = open.wait_end();
  ASSERT_TRUE(end);
  EXPECT_NE(*end, CURLE_OK);  // cut, not ended
  TestClient::Watch again(client_,
                          kConfigMaps + "?watch=true&resourceVersion=" + version_of(created),
                          "application/json");
  const std::optional<json> error = again.next();
  ASSERT_TRUE(error);
  EXPECT_EQ((*error)["type"], "ERROR");
  EXPECT_EQ((*error)["object"]["code"], 410);
  EXPECT_EQ((*error)["object"]["message"],
            "too old resource version: " + version_of(created) + " (" +
                std::to_string(server_.current_resource_version()) + ")");
}

TEST_F(ServerTest, DroppedWatchesAreCutWithoutTheirEnd) {
  TestClient::Watch watch(client_, kConfigMaps + "?watch=true", "application/json");
  create(kConfigMaps, config_map("a"));
  ASSERT_TRUE(watch.next());
  server_.drop_watches();
  const std::optional<CURLcode> end = watch.wait_end();
  ASSERT_TRUE(end);
  EXPECT_NE(*end, CURLE_OK);
}

TEST_F(ServerTest, TableWatchesSendColumnsOnlyFirst) {
  create_training_job_crd();
  const json created = create(kJobs, job("gpt-a"));
  TestClient::Watch watch(client_, kJobs + "?watch=true&resourceVersion=" + version_of(created),
                          kTableAccept);
  json changed = created;
  changed["spec"]["replicas"] = 2;
  ASSERT_EQ(client_.send("PUT", kJobs + "/gpt-a", changed).status, 200);
  ASSERT_EQ(client_
                .request("PATCH", kJobs + "/gpt-a", R"({"spec":{"replicas":3}})",
                         "application/merge-patch+json")
                .status,
            200);
  const std::optional<json> first = watch.next();
  const std::optional<json> second = watch.next();
  ASSERT_TRUE(first && second);
  EXPECT_EQ((*first)["object"]["kind"], "Table");
  EXPECT_TRUE((*first)["object"]["columnDefinitions"].is_array());
  EXPECT_TRUE((*second)["object"]["columnDefinitions"].is_null());
  EXPECT_EQ((*second)["object"]["rows"][0]["cells"][2], 3);
  EXPECT_EQ((*second)["object"]["rows"][0]["object"]["kind"], "PartialObjectMetadata");
}

TEST_F(ServerTest, GarbageCollectorDeletesDependentsInTheBackground) {
  create_training_job_crd();
  const json owner = create(kJobs, job("owner"));
  json dependent = config_map("dependent");
  dependent["metadata"]["ownerReferences"] = {{{"apiVersion", "tessel.dev/v1alpha1"},
                                               {"kind", "TrainingJob"},
                                               {"name", "owner"},
                                               {"uid", owner["metadata"]["uid"]},
                                               {"controller", true},
                                               {"blockOwnerDeletion", true}}};
  create(kConfigMaps, dependent);
  const ClientResponse removed =
      client_.send("DELETE", kJobs + "/owner", {{"propagationPolicy", "Background"}});
  EXPECT_EQ(removed.json()["kind"], "Status");
  EXPECT_TRUE(eventually([&] { return gone(kConfigMaps + "/dependent"); }));
}

TEST_F(ServerTest, ForegroundDeletionWaitsForBlockingDependents) {
  create(kConfigMaps, config_map("owner"));
  const json owner = client_.get(kConfigMaps + "/owner").json();
  json pod = fixture("201-create-pod-with-nodename.json")["request"]["body"];
  pod["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"},
                                         {"kind", "ConfigMap"},
                                         {"name", "owner"},
                                         {"uid", owner["metadata"]["uid"]},
                                         {"blockOwnerDeletion", true}}};
  const std::string pods = "/api/v1/namespaces/default/pods";
  const std::string pod_path = pods + "/" + pod["metadata"]["name"].get<std::string>();
  create(pods, pod);
  const ClientResponse marked =
      client_.send("DELETE", kConfigMaps + "/owner", {{"propagationPolicy", "Foreground"}});
  ASSERT_EQ(marked.status, 200);
  EXPECT_EQ(marked.json()["metadata"]["finalizers"], json({"foregroundDeletion"}));
  // The bound Pod is deleted gracefully and stays until its kubelet finishes it.
  EXPECT_TRUE(eventually(
      [&] { return client_.get(pod_path).json()["metadata"].contains("deletionTimestamp"); }));
  EXPECT_EQ(client_.get(kConfigMaps + "/owner").status, 200);
  ASSERT_EQ(client_.send("DELETE", pod_path, {{"gracePeriodSeconds", 0}}).status, 200);
  EXPECT_TRUE(eventually([&] { return gone(kConfigMaps + "/owner"); }));
}

TEST_F(ServerTest, OrphanedDependentsLoseTheirOwnerReference) {
  create(kConfigMaps, config_map("owner"));
  const json owner = client_.get(kConfigMaps + "/owner").json();
  json dependent = config_map("dependent");
  dependent["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"},
                                               {"kind", "ConfigMap"},
                                               {"name", "owner"},
                                               {"uid", owner["metadata"]["uid"]}}};
  create(kConfigMaps, dependent);
  ASSERT_EQ(client_.request("DELETE", kConfigMaps + "/owner?propagationPolicy=Orphan").status, 200);
  EXPECT_TRUE(eventually([&] { return gone(kConfigMaps + "/owner"); }));
  const json kept = client_.get(kConfigMaps + "/dependent").json();
  EXPECT_FALSE(kept["metadata"].contains("ownerReferences"));
}

TEST_F(ServerTest, ANamespaceIsEmptiedThenRemoved) {
  create("/api/v1/namespaces", {{"metadata", {{"name", "doomed"}}}});
  const std::string base = "/api/v1/namespaces/doomed";
  EXPECT_EQ(client_.get(base + "/serviceaccounts/default").status, 200);
  create(base + "/configmaps", config_map("a"));
  json pod = fixture("201-create-pod-with-nodename.json")["request"]["body"];
  pod["metadata"]["namespace"] = "doomed";
  pod["metadata"].erase("ownerReferences");
  create(base + "/pods", pod);
  const ClientResponse marked = client_.request("DELETE", base);
  ASSERT_EQ(marked.status, 200);
  EXPECT_EQ(marked.json()["status"]["phase"], "Terminating");
  EXPECT_TRUE(eventually([&] { return gone(base + "/configmaps/a"); }));
  const ClientResponse refused = client_.send("POST", base + "/configmaps", config_map("b"));
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.json()["message"],
            "configmaps \"b\" is forbidden: unable to create new content in namespace doomed "
            "because it is being terminated");
  const std::string pod_path = base + "/pods/" + pod["metadata"]["name"].get<std::string>();
  ASSERT_EQ(client_.send("DELETE", pod_path, {{"gracePeriodSeconds", 0}}).status, 200);
  EXPECT_TRUE(eventually([&] { return gone(base); }));
  EXPECT_EQ(client_.request("DELETE", "/api/v1/namespaces/default").status, 403);
}

TEST_F(ServerTest, DeletingACrdDeletesItsObjectsAndStopsServingThem) {
  create_training_job_crd();
  create(kJobs, job("gpt-a"));
  EXPECT_EQ(client_.get("/apis/tessel.dev/v1alpha1").status, 200);
  const ClientResponse marked = client_.request(
      "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/trainingjobs.tessel.dev");
  ASSERT_EQ(marked.status, 200);
  EXPECT_EQ(marked.json()["metadata"]["finalizers"],
            json({"customresourcecleanup.apiextensions.k8s.io"}));
  EXPECT_TRUE(eventually([&] { return client_.get("/apis/tessel.dev/v1alpha1").status == 404; }));
  EXPECT_EQ(client_.get(kJobs).body, "404 page not found\n");
  EXPECT_TRUE(
      server_.get_object("tessel.dev/v1alpha1", "TrainingJob", "default", "gpt-a").is_null());
}

TEST_F(ServerTest, CreateOptionsDryRunAndGenerateName) {
  const ClientResponse dry = client_.send("POST", kConfigMaps + "?dryRun=All", config_map("dry"));
  EXPECT_EQ(dry.status, 201);
  EXPECT_TRUE(gone(kConfigMaps + "/dry"));
  json generated = config_map("");
  generated["metadata"].erase("name");
  generated["metadata"]["generateName"] = "job-";
  const std::string name = create(kConfigMaps, generated)["metadata"]["name"];
  EXPECT_EQ(name.size(), 9u);
  EXPECT_EQ(name.rfind("job-", 0), 0u);
}

TEST_F(ServerTest, DeleteCollectionAndPreconditions) {
  create(kConfigMaps, config_map("a", {{"app", "x"}}));
  create(kConfigMaps, config_map("b", {{"app", "x"}}));
  create(kConfigMaps, config_map("c"));
  const ClientResponse stale =
      client_.send("DELETE", kConfigMaps + "/c", {{"preconditions", {{"uid", "not-the-uid"}}}});
  EXPECT_EQ(stale.status, 409);
  EXPECT_NE(stale.json()["message"].get<std::string>().find(
                "Precondition failed: UID in precondition: not-the-uid"),
            std::string::npos);
  const ClientResponse deleted = client_.request("DELETE", kConfigMaps + "?labelSelector=app%3Dx");
  ASSERT_EQ(deleted.status, 200);
  EXPECT_EQ(deleted.json()["kind"], "ConfigMapList");
  EXPECT_EQ(deleted.json()["items"].size(), 2u);
  const json left = client_.get(kConfigMaps).json();
  ASSERT_EQ(left["items"].size(), 1u);
  EXPECT_EQ(left["items"][0]["metadata"]["name"], "c");
}

TEST_F(ServerTest, PodsNeedTheirServiceAccount) {
  json pod = fixture("201-create-pod-with-nodename.json")["request"]["body"];
  pod["metadata"].erase("ownerReferences");
  pod["spec"]["serviceAccountName"] = "missing";
  const ClientResponse refused = client_.send("POST", "/api/v1/namespaces/default/pods", pod);
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.json()["message"],
            "pods \"" + pod["metadata"]["name"].get<std::string>() +
                "\" is forbidden: error looking up service account default/missing: "
                "serviceaccount \"missing\" not found");
}

TEST_F(ServerTest, InjectedFailuresAnswerInPlaceOfTheServer) {
  server_.fail_next(2, 503, 1);
  TestClient::Watch watch(client_, kConfigMaps + "?watch=true&timeoutSeconds=1",
                          "application/json");
  for (int i = 0; i < 2; ++i) {
    const ClientResponse failed = client_.get(kConfigMaps);
    EXPECT_EQ(failed.status, 503);
    EXPECT_EQ(failed.json()["reason"], "ServiceUnavailable");
    EXPECT_EQ(failed.header_values("Retry-After"), std::vector<std::string>{"1"});
  }
  EXPECT_EQ(client_.get(kConfigMaps).status, 200);
  EXPECT_EQ(watch.wait_end(), CURLE_OK);
  EXPECT_EQ(watch.status(), 200);  // watches are spared unless asked

  server_.fail_next(1, 429, -1, true);
  TestClient::Watch refused(client_, kConfigMaps + "?watch=true", "application/json");
  EXPECT_EQ(refused.wait_end(), CURLE_OK);
  EXPECT_EQ(refused.status(), 429);
}

TEST_F(ServerTest, LatencyAndPartitions) {
  server_.set_latency(milliseconds(100));
  auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(client_.get("/version").status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - started, milliseconds(100));
  server_.set_latency(milliseconds(0));

  server_.partition(milliseconds(300));
  EXPECT_THROW(client_.get("/version"), std::runtime_error);
  EXPECT_TRUE(eventually([&] {
    try {
      return client_.get("/version").status == 200;
    } catch (const std::runtime_error&) {
      return false;
    }
  }));
}

TEST_F(ServerTest, RequestLogAndDirectAccess) {
  server_.clear_request_log();
  create(kConfigMaps, config_map("a"));
  client_.get(kConfigMaps + "?limit=1");
  EXPECT_EQ(server_.request_log(),
            (std::vector<std::string>{"POST " + kConfigMaps, "GET " + kConfigMaps + "?limit=1"}));
  const json stored = server_.get_object("v1", "ConfigMap", "default", "a");
  EXPECT_EQ(stored["data"]["k"], "v");
  EXPECT_EQ(std::stoll(version_of(stored)), server_.current_resource_version());
  EXPECT_TRUE(server_.get_object("v1", "ConfigMap", "default", "b").is_null());
  EXPECT_TRUE(server_.get_object("v1", "Widget", "default", "a").is_null());
}

TEST(ApiTestServerCrds, ServesTheCrdsOfItsDirectory) {
  const std::filesystem::path directory = ::testing::TempDir() + "/api_server_test_crds";
  std::filesystem::create_directories(directory);
  std::filesystem::copy_file(kube::testing::kFixtures / "inputs" / "crd-trainingjob.yaml",
                             directory / "a-trainingjob.yaml",
                             std::filesystem::copy_options::overwrite_existing);
  const json member_clusters = fixture("201-create-crd.json")["request"]["body"];
  std::ofstream(directory / "b-more.yaml") << "---\n" << member_clusters.dump() << "\n---\n";
  ApiTestServerOptions options = plain_options();
  options.crd_directory = directory.string();
  {
    ApiTestServer server(options);
    const TestClient client(server.url(), "", {"admin-token", "", ""});
    EXPECT_EQ(client.get(kJobs).status, 200);
    EXPECT_EQ(client.get("/apis/tessel.dev/v1alpha1/memberclusters").status, 200);
  }
  std::ofstream(directory / "c-bad.yaml") << "apiVersion: v1\nkind: ConfigMap\n";
  try {
    ApiTestServer server(options);
    ADD_FAILURE() << "a ConfigMap in the CRD directory was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("c-bad.yaml"), std::string::npos) << error.what();
  }
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace tessel::testing
