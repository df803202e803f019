// The TrainingJob reconciler against a hub and two member clusters (API test servers, or real
// clusters through TESSEL_TEST_KUBECONFIG and TESSEL_TEST_MEMBER_KUBECONFIGS): crds/ installed
// in the hub, the member registry fed by hand, GPU Nodes made by the test, and the test playing
// the kubelet (it writes the pods' phase and finishes their graceful deletion). Each case calls
// reconcile(key) once the informers show what the API holds, and asserts on what the API holds
// afterwards: the job's status, conditions and Events, and the objects in every member.
#include "operator/controller/trainingjob_reconciler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <thread>

#include "api/link_annotations.h"
#include "kube/api_error.h"
#include "kube/base64.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "operator/controller/conditions.h"
#include "operator/controller/labels.h"
#include "operator/controller/pod_builder.h"
#include "tests/support/api_yaml.h"
#include "tests/support/test_cluster.h"

namespace tessel::controller {
namespace {

using nlohmann::json;
using testing::TestCluster;
using namespace std::chrono_literals;

constexpr const char* kStageService = "tessel-operator.tessel-system.svc:8443";
constexpr const char* kCaPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
constexpr const char* kRunLabel = "tests.tessel.dev/run";  // on the test's Nodes
const char* const kMembers[] = {"member-a", "member-b"};
const char* const kRegions[] = {"eu-west", "us-east"};

const kube::ResourceInfo& core(const std::string& plural) {
  static const kube::ResourceRegistry registry;
  return *registry.find_resource("", plural);
}

template <class Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(file), {}};
}

// A path job.json names, as the stage in the pod opens it: relative ones against the job
// file's folder.
std::string in_pod(const json& path) {
  const std::filesystem::path p = path.get<std::string>();
  return (p.is_absolute() ? p : (std::filesystem::path(kJobFileDirectory) / p).lexically_normal())
      .string();
}

// crds/ applied (server-side, so a CRD an older run left is brought up to date) and served.
kube::ResourceInfo install_crds(kube::Client& client, const std::string& ns) {
  const kube::ResourceInfo crds =
      *kube::ResourceRegistry().find_resource("apiextensions.k8s.io", "customresourcedefinitions");
  kube::ResourceInfo jobs;
  for (const char* file : {"tessel.dev_memberclusters.yaml", "tessel.dev_trainingjobs.yaml"}) {
    const json crd =
        testing::parse_yaml(read_file(std::string(TESSEL_SOURCE_DIR) + "/crds/" + file));
    kube::ApplyOptions apply;
    apply.field_manager = "tessel-tests";
    client.apply(crds, crd, apply);
    const kube::ResourceInfo info = kube::parse_custom_resource_definition(crd).front();
    client.register_resource(info);
    if (info.kind == "TrainingJob") jobs = info;
  }
  const bool served = eventually([&] {
    try {
      client.list(jobs, ns);
      return true;
    } catch (const kube::ApiError&) {
      return false;
    }
  });
  if (!served) throw std::runtime_error("trainingjobs.tessel.dev is not served after 20 s");
  return jobs;
}

// The stage service as the reconciler sees it: registrations recorded, progress set by the test.
class FakeStageChannel : public StageChannel {
 public:
  struct Registration {
    uint64_t job_id = 0;
    int world_size = 0;
    std::string token;
  };
  void register_job(const std::string& key, uint64_t job_id, int world_size,
                    const std::string& token) override {
    std::lock_guard lock(mutex_);
    registered_[key] = {job_id, world_size, token};
  }
  void unregister_job(const std::string& key) override {
    std::lock_guard lock(mutex_);
    if (registered_.erase(key) > 0) unregistered_.push_back(key);
    progress_.erase(key);  // the service forgets what the job's processes reported
  }
  std::optional<JobProgress> progress(const std::string& key) const override {
    std::lock_guard lock(mutex_);
    if (!registered_.contains(key)) return std::nullopt;
    const auto it = progress_.find(key);
    if (it == progress_.end()) return std::nullopt;
    return it->second;
  }
  void set_progress(const std::string& key, JobProgress view) {
    std::lock_guard lock(mutex_);
    progress_[key] = std::move(view);
  }
  std::optional<Registration> registration(const std::string& key) const {
    std::lock_guard lock(mutex_);
    const auto it = registered_.find(key);
    if (it == registered_.end()) return std::nullopt;
    return it->second;
  }
  std::vector<std::string> unregistered() const {
    std::lock_guard lock(mutex_);
    return unregistered_;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Registration> registered_;
  std::vector<std::string> unregistered_;
  std::map<std::string, JobProgress> progress_;
};

class TrainingJobReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSEL_REQUIRE_MEMBER_CLUSTERS(2);
    hub_ = std::make_unique<TestCluster>();
    ns_ = hub_->namespace_name();
    // Unique per run, so that runs beside this one on shared real clusters are not seen.
    run_ = "t" + ns_.substr(ns_.rfind('-') + 1);
    jobs_ = install_crds(hub_->admin(), ns_);
    for (int i = 0; i < 2; ++i) members_.push_back(TestCluster::member(i, ns_));
    if (members_[0]->config().server == members_[1]->config().server) {
      GTEST_SKIP() << "the two member kubeconfigs name one cluster ("
                   << members_[0]->config().server
                   << "): each member would see the other's GPU nodes";
    }
    for (const auto& member : members_) {
      // A real API server admits a pod only once its namespace's "default" ServiceAccount
      // exists, which kube-controller-manager makes shortly after the namespace.
      if (!member->is_real()) continue;
      ASSERT_TRUE(eventually([&] {
        try {
          member->admin().get(core("serviceaccounts"), ns_, "default");
          return true;
        } catch (const kube::ApiError&) {
          return false;
        }
      })) << "no ServiceAccount default in "
          << ns_ << " of " << member->config().server;
    }

    hub_client_ = hub_->client();
    hub_client_->register_resource(jobs_);
    MemberRegistry::Options options;
    options.operator_namespace = ns_;
    options.hub_id = run_;
    options.client = TestCluster::unlimited();
    registry_ = std::make_unique<MemberRegistry>(options, nullptr, nullptr);
    for (int i = 0; i < 2; ++i) {
      const json member = {{"apiVersion", "tessel.dev/v1alpha1"},
                           {"kind", "MemberCluster"},
                           {"metadata", {{"name", kMembers[i]}}},
                           {"spec",
                            {{"kubeconfigSecretRef", {{"name", std::string(kMembers[i]) + "-kc"}}},
                             {"region", kRegions[i]}}}};
      const json secret = {
          {"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", std::string(kMembers[i]) + "-kc"}, {"namespace", ns_}}},
          {"data",
           {{"kubeconfig", kube::base64_encode(members_[i]->self_contained_kubeconfig())}}}};
      const MemberConnection connection = registry_->update(kMembers[i], &member, &secret);
      ASSERT_TRUE(connection.config) << connection.reachable.message;
    }
    ASSERT_TRUE(eventually([&] {
      const auto views = registry_->members();
      return views.size() == 2 &&
             std::all_of(views.begin(), views.end(), [](const auto& v) { return v->synced; });
    })) << "the member informers did not sync";

    informer_ = std::make_unique<kube::SharedInformer>(*hub_client_, jobs_, ns_);
    informer_->start();
    std::stop_source stop;
    ASSERT_TRUE(informer_->wait_for_sync(stop.get_token()));
    recorder_ =
        std::make_unique<kube::EventRecorder>(*hub_client_, kube::EventSource{"tessel-operator", "", ""});
    make_reconciler();
  }

  void make_reconciler() {
    TrainingJobReconcilerOptions options;
    options.hub_id = run_;
    options.stage_service_address = kStageService;
    options.ca_pem = kCaPem;
    options.status_interval = 0ms;
    reconciler_ = std::make_unique<TrainingJobReconciler>(*hub_client_, jobs_, informer_->store(),
                                                          *registry_, stages_, *recorder_, options);
  }

  void TearDown() override {
    reconciler_.reset();
    if (informer_) informer_->stop();
    if (registry_) registry_->stop();
    if (!hub_) return;
    // A finalizer left behind would hold the job, and so the namespace, forever.
    try {
      for (const json& job : hub_->admin().list_all(jobs_, ns_).items) {
        if (kube::has_finalizer(job, kCleanupFinalizer)) {
          hub_->admin().patch(jobs_, ns_, kube::object_name(job), kube::PatchType::kMerge,
                              {{"metadata", {{"finalizers", nullptr}}}});
        }
      }
    } catch (const std::exception&) {
      // best effort
    }
    for (size_t i = 0; i < members_.size(); ++i) {
      kube::DeleteOptions now;
      now.grace_period_seconds = 0;
      for (const std::string& node : nodes_[i]) {
        try {
          members_[i]->admin().remove(core("nodes"), "", node);
        } catch (const std::exception&) {
          // best effort: a test server goes with the test anyway
        }
      }
      try {  // pods bound to the nodes wait for a kubelet: none will come
        for (const json& pod : member_pods(static_cast<int>(i)))
          members_[i]->admin().remove(core("pods"), ns_, kube::object_name(pod), now);
      } catch (const std::exception&) {
        // best effort, as above
      }
    }
  }

  // --- the world ------------------------------------------------------------------------------

  // A Ready GPU Node in member `m` with `gpus` nvidia.com/gpu allocatable.
  std::string add_node(int m, const std::string& suffix, int gpus) {
    const std::string name = run_ + "-" + suffix;
    const json node = {{"apiVersion", "v1"},
                       {"kind", "Node"},
                       {"metadata",
                        {{"name", name},
                         {"labels",
                          {{"kubernetes.io/hostname", name},
                           {kGpuProductLabel, "NVIDIA-H100-80GB-HBM3"},
                           {kRegionLabel, kRegions[m]},
                           {kRunLabel, run_}}}}}};
    members_[m]->admin().create(core("nodes"), "", node);
    nodes_[m].push_back(name);
    const json resources = {
        {"cpu", "16"}, {"memory", "64Gi"}, {"pods", "110"}, {kGpuResource, std::to_string(gpus)}};
    const std::string now = kube::format_rfc3339(std::chrono::system_clock::now());
    // A patch, not an update: the node controller of a real cluster may have written already.
    const json status = {{"status",
                          {{"capacity", resources},
                           {"allocatable", resources},
                           {"conditions",
                            {{{"type", "Ready"},
                              {"status", "True"},
                              {"reason", "KubeletReady"},
                              {"message", "the test plays the kubelet"},
                              {"lastHeartbeatTime", now},
                              {"lastTransitionTime", now}}}}}}};
    members_[m]->admin().patch(core("nodes"), "", name, kube::PatchType::kMerge, status, {},
                               "status");
    return name;
  }

  // A job of stages x replicas that the CRD schema and the webhook's rules accept, small
  // enough to place in a moment, selecting only this run's Nodes.
  json job_manifest(const std::string& name, int stages, int replicas) const {
    return {{"apiVersion", "tessel.dev/v1alpha1"},
            {"kind", "TrainingJob"},
            {"metadata", {{"name", name}, {"namespace", ns_}}},
            {"spec",
             {{"model",
               {{"layers", 4},
                {"hidden", 64},
                {"heads", 4},
                {"seqLen", 32},
                {"vocab", 256},
                {"precision", "fp32"}}},
              {"parallelism", {{"stages", stages}, {"replicas", replicas}}},
              {"batch", {{"microBatch", 2}, {"globalBatch", 2 * replicas * 2}}},
              {"training", {{"steps", 40}}},
              {"data", {{"text", {{"path", "../data/fables.txt"}}}}},
              {"placement",
               {{"strategy", "evolutionary"},
                {"evaluations", 60},
                {"gpuSelector", {{"matchLabels", {{kRunLabel, run_}}}}}}},
              {"failurePolicy",
               {{"maxRestarts", 1}, {"backoffSeconds", 0}, {"startTimeoutSeconds", 600}}}}}};
  }

  json create_job(const json& manifest) { return hub_->admin().create(jobs_, ns_, manifest); }
  json job(const std::string& name) const { return hub_->admin().get(jobs_, ns_, name); }
  std::string key(const std::string& name) const { return ns_ + "/" + name; }

  // The job as the informer shows it once it holds what the API holds.
  void sync_job(const std::string& name) {
    std::string version;
    try {
      version = kube::object_resource_version(job(name));
    } catch (const kube::ApiError& e) {
      if (e.code() != 404) throw;
    }
    ASSERT_TRUE(eventually([&] {
      const kube::ObjectSnapshot cached = informer_->store().get(key(name));
      return version.empty() ? cached == nullptr
                             : cached && kube::object_resource_version(*cached) == version;
    })) << "the job informer did not catch up with "
        << name;
  }

  // This run's pods in member `m`, as the API holds them.
  std::vector<json> member_pods(int m) const {
    kube::ListOptions list;
    list.label_selector = std::string(kHubLabel) + "=" + run_;
    return members_[m]->admin().list_all(core("pods"), ns_, list).items;
  }

  // Each member's informers hold what the API holds: this run's pods and Nodes.
  void sync_members() {
    for (int m = 0; m < 2; ++m) {
      std::set<std::pair<std::string, std::string>> want;
      for (const json& pod : member_pods(m))
        want.insert({kube::object_name(pod), kube::object_resource_version(pod)});
      for (const std::string& node : nodes_[m]) {
        const json live = members_[m]->admin().get(core("nodes"), "", node);
        want.insert({node, kube::object_resource_version(live)});
      }
      ASSERT_TRUE(eventually([&] {
        const auto view = registry_->member(kMembers[m]);
        if (!view) return false;
        std::set<std::pair<std::string, std::string>> seen;
        for (const json& pod : view->pods()) {
          if (kube::get_label(pod, kHubLabel) == run_ && kube::object_namespace(pod) == ns_)
            seen.insert({kube::object_name(pod), kube::object_resource_version(pod)});
        }
        for (const json& node : view->nodes()) {
          if (kube::get_label(node, kRunLabel) == run_)
            seen.insert({kube::object_name(node), kube::object_resource_version(node)});
        }
        return seen == want;
      })) << "the informers of "
          << kMembers[m] << " did not catch up";
    }
  }

  // One reconcile of the job, once the informers show the API's state.
  kube::ReconcileResult reconcile(const std::string& name) {
    sync_job(name);
    sync_members();
    return reconciler_->reconcile(key(name));
  }

  // The first reconcile adds the finalizer; the second acts.
  kube::ReconcileResult create_and_place(const json& manifest) {
    const std::string name = kube::object_name(manifest);
    create_job(manifest);
    reconcile(name);
    EXPECT_TRUE(kube::has_finalizer(job(name), kCleanupFinalizer));
    return reconcile(name);
  }

  // On test servers: while held, pods can be neither listed nor watched in the members (open
  // watches are cut), so the member registry's pod caches stand still.
  void hold_member_pod_caches(bool held) {
    for (const auto& member : members_) {
      testing::ApiTestServer* server = member->server();
      if (!server) continue;
      if (!held) {
        server->set_authorizer(nullptr);  // the default again
        continue;
      }
      server->set_authorizer([](const testing::RequestAttributes& request) {
        const bool pod_read =
            request.resource == "pods" && (request.verb == "list" || request.verb == "watch");
        return !pod_read && request.user.name != "system:anonymous";
      });
      server->drop_watches();
    }
  }

  // The kubelet: every pod of the run in both members takes `phase`.
  void set_phase(const std::string& phase, const std::string& only_pod = "") {
    for (int m = 0; m < 2; ++m) {
      for (const json& pod : member_pods(m)) {
        if (!only_pod.empty() && kube::object_name(pod) != only_pod) continue;
        json status = {{"phase", phase},
                       {"hostIP", "10.0." + std::to_string(m) + ".1"},
                       {"podIP", "10.1." + std::to_string(m) + ".7"}};
        if (phase == "Failed") {
          status["reason"] = "Error";
          status["message"] = "tessel-stage exited with code 1";
        }
        members_[m]->admin().patch(core("pods"), ns_, kube::object_name(pod),
                                   kube::PatchType::kMerge, {{"status", status}}, {}, "status");
      }
    }
  }

  // The kubelet finishing graceful deletions: terminating pods go at once.
  void finish_deletions() {
    kube::DeleteOptions now;
    now.grace_period_seconds = 0;
    for (int m = 0; m < 2; ++m) {
      for (const json& pod : member_pods(m)) {
        if (kube::is_being_deleted(pod))
          members_[m]->admin().remove(core("pods"), ns_, kube::object_name(pod), now);
      }
    }
  }

  size_t pod_count() const { return member_pods(0).size() + member_pods(1).size(); }

  // The job's objects in member `m` of `kind` ("pods", "configmaps", "secrets").
  std::vector<json> remote(int m, const std::string& kind, const json& job_object) const {
    kube::ListOptions list;
    list.label_selector = remote_selector(run_, kube::object_uid(job_object));
    return members_[m]->admin().list_all(core(kind), ns_, list).items;
  }

  std::vector<json> events(const std::string& name) const {
    return kube::events_for_object(hub_->admin(), job(name));
  }
  bool has_event(const std::string& name, const std::string& reason) const {
    for (const json& e : events(name))
      if (e.value("reason", "") == reason) return true;
    return false;
  }

  static json condition(const json& job_object, const std::string& type) {
    const json conditions =
        job_object.value("status", json::object()).value("conditions", json::array());
    const json* c = find_condition(conditions, type);
    return c ? *c : json::object();
  }
  static std::string phase(const json& job_object) {
    return job_object.value("status", json::object()).value("phase", "");
  }

  std::unique_ptr<TestCluster> hub_;
  std::vector<std::unique_ptr<TestCluster>> members_;
  std::vector<std::string> nodes_[2];
  std::string ns_, run_;
  kube::ResourceInfo jobs_;
  std::shared_ptr<kube::Client> hub_client_;
  std::unique_ptr<MemberRegistry> registry_;
  std::unique_ptr<kube::SharedInformer> informer_;
  std::unique_ptr<kube::EventRecorder> recorder_;
  FakeStageChannel stages_;
  std::unique_ptr<TrainingJobReconciler> reconciler_;
};

// 1. The finalizer first; then a placement over both members, the objects in each.
TEST_F(TrainingJobReconcilerTest, AddsTheFinalizerThenPlacesAcrossBothMembers) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_job(job_manifest("pair", 2, 2));
  reconcile("pair");
  json current = job("pair");
  EXPECT_TRUE(kube::has_finalizer(current, kCleanupFinalizer));
  EXPECT_EQ(pod_count(), 0u) << "the finalizer comes before anything is created";

  reconcile("pair");
  current = job("pair");
  EXPECT_EQ(phase(current), "Starting");
  const json placed = condition(current, "Placed");
  EXPECT_EQ(placed.value("status", ""), "True") << current["status"].dump();
  EXPECT_NE(placed.value("message", "").find("2 stages x 2 replicas on member-a,member-b"),
            std::string::npos)
      << placed.dump();
  EXPECT_NE(placed.value("message", "").find("predicted iteration"), std::string::npos);
  EXPECT_EQ(condition(current, "Valid").value("status", ""), "True");
  EXPECT_EQ(current["status"]["placement"]["clusters"], "member-a,member-b");
  EXPECT_EQ(current["status"]["placement"]["stages"].size(), 2u);
  EXPECT_TRUE(has_event("pair", "Placed"));
  EXPECT_TRUE(has_event("pair", "PodsCreated"));

  const std::string uid = kube::object_uid(current);
  for (int m = 0; m < 2; ++m) {
    const std::vector<json> pods = remote(m, "pods", current);
    ASSERT_EQ(pods.size(), 2u) << kMembers[m];
    for (const json& pod : pods) {
      EXPECT_EQ(kube::get_label(pod, kJobNameLabel), "pair");
      EXPECT_EQ(kube::get_label(pod, kJobNamespaceLabel), ns_);
      EXPECT_EQ(kube::get_label(pod, kJobUidLabel), uid);
      EXPECT_TRUE(kube::get_label(pod, kRankLabel).has_value());
      EXPECT_EQ(pod["spec"]["nodeName"], run_ + (m == 0 ? "-a1" : "-b1"));
    }
    const std::vector<json> maps = remote(m, "configmaps", current);
    ASSERT_EQ(maps.size(), 1u) << kMembers[m];
    EXPECT_EQ(kube::object_name(maps[0]), "pair-stage");
    const json file = json::parse(maps[0]["data"]["job.json"].get<std::string>());
    EXPECT_EQ(file["rendezvous"]["address"], kStageService);
    EXPECT_EQ(in_pod(file["rendezvous"]["token_file"]), kStageTokenPath);
    EXPECT_EQ(in_pod(file["rendezvous"]["ca_file"]), kStageCaPath);
    EXPECT_EQ(file["rendezvous"]["advertise_env"], kPodIpVariable);
    EXPECT_EQ(file["progress"]["address"], kStageService);
    EXPECT_EQ(in_pod(file["progress"]["token_file"]), kStageTokenPath);
    EXPECT_EQ(in_pod(file["progress"]["ca_file"]), kStageCaPath);
    EXPECT_EQ(file["checkpoint"]["shared"], false);
    EXPECT_EQ(file["ranks"].size(), 4u);
    EXPECT_EQ(file["data"]["path"], "/usr/share/tessel/examples/trainingjobs/../data/fables.txt");
    const std::vector<json> secrets = remote(m, "secrets", current);
    ASSERT_EQ(secrets.size(), 1u) << kMembers[m];
    EXPECT_EQ(kube::base64_decode(secrets[0]["data"]["ca.crt"].get<std::string>()), kCaPem);
  }

  // The token: in a hub Secret the job owns, the same the members and the stage service hold.
  const json token_secret = hub_->admin().get(core("secrets"), ns_, "pair-stage-token");
  const auto owner = kube::controller_owner(token_secret);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ((*owner)["uid"], uid);
  const std::string token = *kube::base64_decode(token_secret["data"]["token"].get<std::string>());
  EXPECT_EQ(token.size(), 64u);
  const std::string member_token =
      *kube::base64_decode(remote(1, "secrets", current)[0]["data"]["token"].get<std::string>());
  EXPECT_EQ(member_token, token);
  const auto registration = stages_.registration(key("pair"));
  ASSERT_TRUE(registration.has_value());
  EXPECT_EQ(registration->token, token);
  EXPECT_EQ(registration->world_size, 4);

  // Level-triggered: another reconcile of the same state creates nothing more.
  reconcile("pair");
  EXPECT_EQ(pod_count(), 4u);
  EXPECT_EQ(phase(job("pair")), "Starting");
}

// 2. Too few GPUs: Pending with the reason, a NotPlaced Event; a new node lets it start.
TEST_F(TrainingJobReconcilerTest, WaitsPendingForGpusThenPlacesWhenANodeIsAdded) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 1);
  create_and_place(job_manifest("big", 2, 2));
  json current = job("big");
  EXPECT_EQ(phase(current), "Pending");
  const json placed = condition(current, "Placed");
  EXPECT_EQ(placed.value("status", ""), "False");
  EXPECT_EQ(placed.value("reason", ""), "NotEnoughGPUs");
  EXPECT_NE(placed.value("message", "").find("needs 4 GPUs; 3 free"), std::string::npos)
      << placed.dump();
  EXPECT_TRUE(has_event("big", "NotPlaced"));
  EXPECT_EQ(pod_count(), 0u);
  EXPECT_EQ(reconciler_->waiting_jobs(), std::vector<std::string>{key("big")});

  add_node(1, "b2", 1);
  reconcile("big");
  current = job("big");
  EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
  EXPECT_EQ(condition(current, "Placed").value("status", ""), "True");
  EXPECT_EQ(pod_count(), 4u);
  EXPECT_TRUE(reconciler_->waiting_jobs().empty());
}

// 2b. A node of the placement whose prober annotation is refused: a BadLinkAnnotation warning
// naming it, its links estimated and the reason in LinksMeasured; a refused node the placement
// does not use (no free GPU) gets no Event.
TEST_F(TrainingJobReconcilerTest, ARefusedLinksAnnotationOfAPlacedNodeIsAWarningEvent) {
  const std::string a1 = add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  const std::string a2 = add_node(0, "a2", 0);
  for (const std::string& node : {a1, a2}) {
    members_[0]->admin().patch(
        core("nodes"), "", node, kube::PatchType::kMerge,
        {{"metadata", {{"annotations", {{api::kLinksAnnotation, "{not json"}}}}}});
  }
  create_and_place(job_manifest("hostile", 2, 2));
  const json current = job("hostile");
  EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
  const json links = condition(current, "LinksMeasured");
  EXPECT_EQ(links.value("status", ""), "False");
  EXPECT_NE(links.value("message", "")
                .find("member-a/" + a1 + ": metadata.annotations[" + api::kLinksAnnotation +
                      "]: is not a JSON object"),
            std::string::npos)
      << links.dump();
  std::vector<std::string> warnings;
  for (const json& e : events("hostile")) {
    if (e.value("reason", "") == "BadLinkAnnotation") {
      EXPECT_EQ(e.value("type", ""), "Warning");
      warnings.push_back(e.value("message", ""));
    }
  }
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "Node member-a/" + a1 + ": its " + api::kLinksAnnotation +
                             " annotation was refused and its links estimated: "
                             "metadata.annotations[net.tessel.dev/links]: is not a JSON object");
}

// 3. GPUs just given to one job are not given to the next, even before the members' caches
// show the first job's pods.
TEST_F(TrainingJobReconcilerTest, NeverGivesOneGpuToTwoJobs) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  for (const char* name : {"one", "two", "three"}) {
    create_job(job_manifest(name, 2, 1));
    reconcile(name);  // the finalizer
    sync_job(name);
  }
  // No waiting for the members' informers between these; on test servers their pod caches are
  // held back meanwhile, so that "two" and "three" can know of "one"'s pods only as the pods the
  // reconciler created (on real clusters the reconciles merely follow each other at once).
  hold_member_pod_caches(true);
  for (const char* name : {"one", "two", "three"}) reconciler_->reconcile(key(name));
  hold_member_pod_caches(false);

  EXPECT_EQ(phase(job("one")), "Starting");
  EXPECT_EQ(phase(job("two")), "Starting");
  EXPECT_EQ(phase(job("three")), "Pending");
  EXPECT_EQ(condition(job("three"), "Placed").value("reason", ""), "NotEnoughGPUs");
  std::map<std::string, int> per_node;
  for (int m = 0; m < 2; ++m)
    for (const json& pod : member_pods(m)) ++per_node[pod["spec"]["nodeName"].get<std::string>()];
  EXPECT_EQ(per_node, (std::map<std::string, int>{{run_ + "-a1", 2}, {run_ + "-b1", 2}}));
  // And again with the caches caught up: still nothing for the third.
  reconcile("three");
  EXPECT_EQ(phase(job("three")), "Pending");
  EXPECT_EQ(pod_count(), 4u);
}

// All or nothing: a member that refuses its objects (no such ServiceAccount there) leaves none
// in the other; once it accepts them, the job is placed.
TEST_F(TrainingJobReconcilerTest, MemberRefusingItsObjectsLeavesNothingAnywhere) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  const json account = {{"apiVersion", "v1"},
                        {"kind", "ServiceAccount"},
                        {"metadata", {{"name", "trainer"}, {"namespace", ns_}}}};
  members_[0]->admin().create(core("serviceaccounts"), ns_, account);
  json manifest = job_manifest("half", 2, 2);
  manifest["spec"]["template"] = {{"serviceAccountName", "trainer"}};
  create_and_place(manifest);
  json current = job("half");
  EXPECT_EQ(phase(current), "Pending");
  const json placed = condition(current, "Placed");
  EXPECT_EQ(placed.value("reason", ""), "CreateFailed");
  EXPECT_NE(placed.value("message", "").find("member-b"), std::string::npos) << placed.dump();
  EXPECT_TRUE(has_event("half", "CreateFailed"));
  for (int m = 0; m < 2; ++m) {
    for (const json& pod : remote(m, "pods", current)) EXPECT_TRUE(kube::is_being_deleted(pod));
    EXPECT_TRUE(remote(m, "configmaps", current).empty()) << kMembers[m];
    EXPECT_TRUE(remote(m, "secrets", current).empty()) << kMembers[m];
  }
  EXPECT_FALSE(stages_.registration(key("half")).has_value());

  members_[1]->admin().create(core("serviceaccounts"), ns_, account);
  finish_deletions();
  reconcile("half");
  current = job("half");
  EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
  EXPECT_EQ(pod_count(), 4u);
  EXPECT_EQ(current["status"].value("restarts", 0), 0) << "a refused create is not a restart";
}

// 4. A spec the schema accepts but the rules across fields refuse: Valid False, nothing made.
TEST_F(TrainingJobReconcilerTest, InvalidSpecIsFlaggedAndCreatesNothing) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  json manifest = job_manifest("odd", 2, 2);
  manifest["spec"]["batch"]["globalBatch"] = 6;  // not a multiple of replicas x microBatch = 4
  create_and_place(manifest);
  const json current = job("odd");
  const json valid = condition(current, "Valid");
  EXPECT_EQ(valid.value("status", ""), "False");
  EXPECT_NE(valid.value("message", "").find("globalBatch"), std::string::npos) << valid.dump();
  EXPECT_EQ(phase(current), "Pending");
  EXPECT_EQ(pod_count(), 0u);
  for (int m = 0; m < 2; ++m) {
    EXPECT_TRUE(remote(m, "configmaps", current).empty());
    EXPECT_TRUE(remote(m, "secrets", current).empty());
  }
  EXPECT_FALSE(stages_.registration(key("odd")).has_value());
}

// 5. Running with progress from the stage service, then Succeeded.
TEST_F(TrainingJobReconcilerTest, RunningFoldsProgressThenSucceeds) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("run", 2, 2));
  set_phase("Running", "run-s0-r0");
  reconcile("run");
  EXPECT_EQ(phase(job("run")), "Starting") << "one pod Running is not the gang";

  set_phase("Running");
  JobProgress progress;
  progress.world_size = 4;
  progress.started = 4;
  progress.step = 10;
  progress.loss = 3.25;
  progress.tokens_per_s = 1280;
  progress.total_steps = 40;
  progress.last_checkpoint_step = 5;
  stages_.set_progress(key("run"), progress);
  reconcile("run");
  json current = job("run");
  EXPECT_EQ(phase(current), "Running") << current["status"].dump();
  EXPECT_EQ(condition(current, "Running").value("status", ""), "True");
  EXPECT_EQ(condition(current, "Ready").value("status", ""), "True");
  const json shown = current["status"]["progress"];
  EXPECT_EQ(shown["step"], 10);
  EXPECT_DOUBLE_EQ(shown["loss"].get<double>(), 3.25);
  EXPECT_EQ(shown["tokensPerSecond"], 1280);
  EXPECT_EQ(shown["totalSteps"], 40);
  EXPECT_EQ(shown["lastCheckpointStep"], 5);
  // 30 steps left x (globalBatch 8 x seqLen 32 tokens) / 1280 tokens/s = 6 s.
  EXPECT_EQ(shown["eta"], "6s");
  EXPECT_TRUE(has_event("run", "Running"));

  set_phase("Succeeded");
  progress.step = 40;
  progress.done = 4;
  stages_.set_progress(key("run"), progress);
  reconcile("run");
  current = job("run");
  EXPECT_EQ(phase(current), "Succeeded");
  EXPECT_TRUE(current["status"].contains("completionTime"));
  EXPECT_EQ(condition(current, "Succeeded").value("status", ""), "True");
  EXPECT_EQ(current["status"]["progress"]["step"], 40);
  EXPECT_TRUE(has_event("run", "Succeeded"));
  EXPECT_FALSE(stages_.registration(key("run")).has_value());
  const auto gone = stages_.unregistered();
  EXPECT_NE(std::find(gone.begin(), gone.end(), key("run")), gone.end());
}

// 6. A failed pod: the gang goes, restarts counts it, placed again after the backoff; past
// maxRestarts the job fails.
TEST_F(TrainingJobReconcilerTest, FailedPodRestartsTheGangThenFailsPastMaxRestarts) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  json manifest = job_manifest("flaky", 2, 2);
  manifest["spec"]["failurePolicy"]["backoffSeconds"] = 1;
  create_and_place(manifest);
  set_phase("Running");
  reconcile("flaky");
  ASSERT_EQ(phase(job("flaky")), "Running");

  set_phase("Failed", "flaky-s1-r0");
  reconcile("flaky");
  json current = job("flaky");
  EXPECT_EQ(current["status"]["restarts"], 1);
  EXPECT_EQ(condition(current, "Running").value("reason", ""), "Restarting");
  EXPECT_NE(condition(current, "Running").value("message", "").find("flaky-s1-r0"),
            std::string::npos);
  EXPECT_TRUE(has_event("flaky", "Restarting"));
  for (const json& pod : member_pods(0)) EXPECT_TRUE(kube::is_being_deleted(pod));
  for (const json& pod : member_pods(1)) EXPECT_TRUE(kube::is_being_deleted(pod));

  // While the old pods terminate, the job waits: no new attempt, no new restart.
  reconcile("flaky");
  current = job("flaky");
  EXPECT_EQ(current["status"]["restarts"], 1);
  EXPECT_NE(phase(current), "Starting");

  finish_deletions();
  ASSERT_EQ(pod_count(), 0u);
  // Within the backoff nothing is placed; after it the gang comes back (attempt 1).
  const kube::ReconcileResult wait = reconcile("flaky");
  EXPECT_EQ(pod_count(), 0u);
  EXPECT_EQ(phase(job("flaky")), "Pending");
  EXPECT_GT(wait.requeue_after, kube::Clock::duration::zero());
  std::this_thread::sleep_for(wait.requeue_after);
  reconcile("flaky");
  current = job("flaky");
  EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
  ASSERT_EQ(pod_count(), 4u);
  for (int m = 0; m < 2; ++m)
    for (const json& pod : member_pods(m))
      EXPECT_EQ(kube::get_annotation(pod, kAttemptAnnotation), "1");

  // maxRestarts is 1: the next failure fails the job.
  set_phase("Failed", "flaky-s0-r1");
  reconcile("flaky");
  current = job("flaky");
  EXPECT_EQ(phase(current), "Failed") << current["status"].dump();
  EXPECT_EQ(condition(current, "Failed").value("reason", ""), "BackoffLimitExceeded");
  EXPECT_TRUE(current["status"].contains("completionTime"));
  EXPECT_EQ(current["status"]["restarts"], 1);
  EXPECT_FALSE(stages_.registration(key("flaky")).has_value());
  finish_deletions();
  EXPECT_EQ(pod_count(), 0u);
  reconcile("flaky");
  EXPECT_EQ(pod_count(), 0u) << "a Failed job is not placed again";
}

// A rank's failure reported to the stage service restarts the gang; the next attempt starts
// with a fresh registration, not failed again by what the last one reported.
TEST_F(TrainingJobReconcilerTest, FailureReportedByAStageRestartsTheGangOnce) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("oops", 2, 2));
  set_phase("Running");
  JobProgress progress;
  progress.world_size = 4;
  progress.started = 4;
  progress.failures = {"rank 3 (stage 1 replica 1): CUDA error: an illegal memory access"};
  stages_.set_progress(key("oops"), progress);
  reconcile("oops");
  json current = job("oops");
  EXPECT_EQ(current["status"]["restarts"], 1);
  EXPECT_NE(condition(current, "Running").value("message", "").find("illegal memory access"),
            std::string::npos);
  EXPECT_FALSE(stages_.registration(key("oops")).has_value());
  finish_deletions();
  reconcile("oops");  // backoffSeconds 0
  ASSERT_EQ(pod_count(), 4u);
  EXPECT_TRUE(stages_.registration(key("oops")).has_value());
  reconcile("oops");
  current = job("oops");
  EXPECT_EQ(current["status"]["restarts"], 1) << current["status"].dump();
  EXPECT_EQ(phase(current), "Starting");
}

// 7. Pods not Running within startTimeoutSeconds: the gang is torn down and restarted, each
// time after backoffSeconds (a restart right after a restart waits too).
TEST_F(TrainingJobReconcilerTest, StartTimeoutRestartsTheGangAfterTheBackoffEachTime) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  json manifest = job_manifest("slow", 2, 2);
  manifest["spec"]["failurePolicy"]["startTimeoutSeconds"] = 1;
  manifest["spec"]["failurePolicy"]["backoffSeconds"] = 1;
  manifest["spec"]["failurePolicy"]["maxRestarts"] = 2;
  create_and_place(manifest);
  for (int restart = 1; restart <= 2; ++restart) {
    ASSERT_EQ(pod_count(), 4u);
    // Times have whole seconds: wait until a full timeout has surely passed.
    std::this_thread::sleep_for(2100ms);
    reconcile("slow");
    const json current = job("slow");
    EXPECT_EQ(current["status"]["restarts"], restart) << current["status"].dump();
    EXPECT_NE(condition(current, "Running").value("message", "").find("startTimeoutSeconds"),
              std::string::npos);
    for (int m = 0; m < 2; ++m)
      for (const json& pod : member_pods(m)) EXPECT_TRUE(kube::is_being_deleted(pod));
    finish_deletions();
    const kube::ReconcileResult wait = reconcile("slow");
    EXPECT_EQ(pod_count(), 0u) << "restart " << restart << " did not wait for the backoff";
    EXPECT_GT(wait.requeue_after, kube::Clock::duration::zero());
    std::this_thread::sleep_for(wait.requeue_after);
    reconcile("slow");
    EXPECT_EQ(phase(job("slow")), "Starting");
  }
  EXPECT_EQ(pod_count(), 4u);
}

// A stage pod deleted under a running job (by a person, or a drained node) fails the attempt.
TEST_F(TrainingJobReconcilerTest, PodDeletedUnderARunningJobRestartsIt) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("gone", 2, 2));
  set_phase("Running");
  reconcile("gone");
  ASSERT_EQ(phase(job("gone")), "Running");
  members_[1]->admin().remove(core("pods"), ns_, "gone-s1-r1");
  reconcile("gone");
  const json current = job("gone");
  EXPECT_EQ(current["status"]["restarts"], 1);
  EXPECT_NE(condition(current, "Running").value("message", "").find("gone-s1-r1"),
            std::string::npos)
      << condition(current, "Running").dump();
  EXPECT_EQ(pod_count(), 4u) << "the rest of the gang is terminating";
  for (int m = 0; m < 2; ++m)
    for (const json& pod : member_pods(m)) EXPECT_TRUE(kube::is_being_deleted(pod));
  finish_deletions();
  reconcile("gone");  // backoffSeconds 0
  EXPECT_EQ(phase(job("gone")), "Starting");
  EXPECT_EQ(pod_count(), 4u);
}

// 8. suspend: the pods go and the job says Suspended; resumed: placed again.
TEST_F(TrainingJobReconcilerTest, SuspendDeletesThePodsAndResumePlacesAgain) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("nap", 2, 2));
  set_phase("Running");
  reconcile("nap");
  hub_->admin().patch(jobs_, ns_, "nap", kube::PatchType::kMerge, {{"spec", {{"suspend", true}}}});
  reconcile("nap");
  json current = job("nap");
  EXPECT_EQ(phase(current), "Suspended");
  for (int m = 0; m < 2; ++m)
    for (const json& pod : member_pods(m)) EXPECT_TRUE(kube::is_being_deleted(pod));
  finish_deletions();
  reconcile("nap");
  current = job("nap");
  EXPECT_EQ(phase(current), "Suspended");
  EXPECT_EQ(condition(current, "Suspended").value("reason", ""), "Suspended");
  EXPECT_TRUE(has_event("nap", "Suspended"));
  EXPECT_EQ(pod_count(), 0u);
  EXPECT_FALSE(stages_.registration(key("nap")).has_value());

  hub_->admin().patch(jobs_, ns_, "nap", kube::PatchType::kMerge, {{"spec", {{"suspend", false}}}});
  reconcile("nap");
  current = job("nap");
  EXPECT_EQ(phase(current), "Starting") << current["status"].dump();
  EXPECT_EQ(condition(current, "Suspended").value("status", ""), "False");
  EXPECT_EQ(pod_count(), 4u);
  EXPECT_EQ(current["status"].value("restarts", 0), 0) << "a suspension is not a restart";
}

// 9. Deleting the job deletes its objects in every member, then lets it go.
TEST_F(TrainingJobReconcilerTest, DeletionSweepsEveryMemberThenDropsTheFinalizer) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  create_and_place(job_manifest("bye", 2, 2));
  const json placed = job("bye");
  hub_->admin().remove(jobs_, ns_, "bye");
  reconcile("bye");
  EXPECT_TRUE(kube::has_finalizer(job("bye"), kCleanupFinalizer))
      << "kept while pods terminate in the members";
  finish_deletions();
  reconcile("bye");
  EXPECT_TRUE(eventually([&] {
    try {
      job("bye");
      return false;
    } catch (const kube::ApiError& e) {
      return e.code() == 404;
    }
  })) << "the job is still in the hub";
  for (int m = 0; m < 2; ++m) {
    EXPECT_TRUE(remote(m, "pods", placed).empty()) << kMembers[m];
    EXPECT_TRUE(remote(m, "configmaps", placed).empty()) << kMembers[m];
    EXPECT_TRUE(remote(m, "secrets", placed).empty()) << kMembers[m];
  }
  EXPECT_FALSE(stages_.registration(key("bye")).has_value());
  sync_job("bye");
  reconciler_->reconcile(key("bye"));  // gone: nothing to do, nothing thrown
}

// A job gone without the operator's finalizer (removed by hand, or deleted while the operator
// was down): a reconcile of its key deletes what it left in the members.
TEST_F(TrainingJobReconcilerTest, OrphansOfAJobGoneWithoutItsFinalizerAreSwept) {
  add_node(0, "a1", 3);
  add_node(1, "b1", 3);
  create_and_place(job_manifest("lost", 2, 2));
  create_and_place(job_manifest("kept", 2, 1));
  const json lost = job("lost");
  ASSERT_EQ(remote(0, "pods", lost).size() + remote(1, "pods", lost).size(), 4u);
  hub_->admin().patch(jobs_, ns_, "lost", kube::PatchType::kMerge,
                      {{"metadata", {{"finalizers", nullptr}}}});
  hub_->admin().remove(jobs_, ns_, "lost");
  sync_job("lost");
  reconciler_->reconcile(key("lost"));
  for (int m = 0; m < 2; ++m) {
    for (const json& pod : remote(m, "pods", lost)) EXPECT_TRUE(kube::is_being_deleted(pod));
    EXPECT_TRUE(remote(m, "configmaps", lost).empty()) << kMembers[m];
    EXPECT_TRUE(remote(m, "secrets", lost).empty()) << kMembers[m];
  }
  // Another job's objects are not touched.
  const json kept = job("kept");
  size_t kept_pods = 0;
  for (int m = 0; m < 2; ++m) {
    for (const json& pod : remote(m, "pods", kept)) {
      EXPECT_FALSE(kube::is_being_deleted(pod));
      ++kept_pods;
    }
  }
  EXPECT_EQ(kept_pods, 2u);
}

// 10. A job another controller manages is left alone.
TEST_F(TrainingJobReconcilerTest, JobManagedByAnotherControllerIsLeftAlone) {
  add_node(0, "a1", 2);
  add_node(1, "b1", 2);
  json manifest = job_manifest("theirs", 2, 2);
  manifest["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue";
  const json created = create_job(manifest);
  reconcile("theirs");
  reconcile("theirs");
  const json current = job("theirs");
  EXPECT_EQ(kube::object_resource_version(current), kube::object_resource_version(created));
  EXPECT_FALSE(kube::has_finalizer(current, kCleanupFinalizer));
  EXPECT_FALSE(current.contains("status") && current["status"].contains("phase"));
  EXPECT_EQ(pod_count(), 0u);
  EXPECT_TRUE(events("theirs").empty());
}

}  // namespace
}  // namespace tessel::controller
