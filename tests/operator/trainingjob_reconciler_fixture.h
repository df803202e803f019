// The TrainingJob reconciler's test fixture: a hub and two member clusters (test servers, or
// real ones through TESSEL_TEST_KUBECONFIG and TESSEL_TEST_MEMBER_KUBECONFIGS), the CRDs, a
// member registry, an informer on TrainingJobs, an event recorder and a fake stage service.
// The tests call reconcile() directly and read what the API holds.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
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
#include "operator/controller/trainingjob_reconciler.h"
#include "tests/support/api_yaml.h"
#include "tests/support/test_cluster.h"

namespace tessel::controller::reconciler_test {

using nlohmann::json;
using testing::TestCluster;
using namespace std::chrono_literals;

inline constexpr const char* kStageService = "tessel-operator.tessel-system.svc:8443";
inline constexpr const char* kCaPem =
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
inline constexpr const char* kRunLabel = "tests.tessel.dev/run";  // on the test's Nodes
inline const char* const kMembers[] = {"member-a", "member-b"};
inline const char* const kRegions[] = {"eu-west", "us-east"};

inline const kube::ResourceInfo& core(const std::string& plural) {
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

inline std::string read_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(file), {}};
}

// A path job.json names, as the stage in the pod opens it: relative ones against the job
// file's folder.
inline std::string in_pod(const json& path) {
  const std::filesystem::path p = path.get<std::string>();
  return (p.is_absolute() ? p : (std::filesystem::path(kJobFileDirectory) / p).lexically_normal())
      .string();
}

// crds/ applied (server-side, so a CRD an older run left is brought up to date) and served.
inline kube::ResourceInfo install_crds(kube::Client& client, const std::string& ns) {
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
    // Soon, for the unreachable-member cases; longer than any hold of the pod caches below.
    registry_ = make_registry(std::chrono::seconds(5));
    for (int i = 0; i < 2; ++i) {
      const json secret = kubeconfig_secret(i, members_[i]->self_contained_kubeconfig());
      const MemberConnection connection = connect_member(*registry_, i, secret);
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
    recorder_ = std::make_unique<kube::EventRecorder>(*hub_client_,
                                                      kube::EventSource{"tessel-operator", "", ""});
    make_reconciler();
  }

  // A member registry as the operator's (this run's hub id, the test clusters' client), with no
  // member yet.
  std::unique_ptr<MemberRegistry> make_registry(std::chrono::seconds unreachable_after) const {
    MemberRegistry::Options options;
    options.operator_namespace = ns_;
    options.hub_id = run_;
    options.client = TestCluster::unlimited();
    options.unreachable_after = unreachable_after;
    // A hold of the pod caches fails the informers' lists for as long as it lasts; with
    // client-go's backoff (up to 30 s, doubled by jitter) they could then take longer to catch
    // up than sync_members waits on a loaded machine.
    options.reflector_backoff.cap = std::chrono::seconds(1);
    return std::make_unique<MemberRegistry>(options, nullptr, nullptr);
  }

  // The kubeconfig Secret of member `m` (kMembers[m]) holding `kubeconfig`.
  json kubeconfig_secret(int m, const std::string& kubeconfig) const {
    return {{"apiVersion", "v1"},
            {"kind", "Secret"},
            {"metadata", {{"name", std::string(kMembers[m]) + "-kc"}, {"namespace", ns_}}},
            {"data", {{"kubeconfig", kube::base64_encode(kubeconfig)}}}};
  }

  // Member `m`'s MemberCluster given to `registry` with `secret` as its kubeconfig.
  static MemberConnection connect_member(MemberRegistry& registry, int m, const json& secret) {
    const json member = {{"apiVersion", "tessel.dev/v1alpha1"},
                         {"kind", "MemberCluster"},
                         {"metadata", {{"name", kMembers[m]}}},
                         {"spec",
                          {{"kubeconfigSecretRef", {{"name", std::string(kMembers[m]) + "-kc"}}},
                           {"region", kRegions[m]}}}};
    return registry.update(kMembers[m], &member, &secret);
  }

  // The operator's reconciler on `registry`'s members.
  std::unique_ptr<TrainingJobReconciler> reconciler_on(
      MemberRegistry& registry, std::chrono::milliseconds status_interval = 0ms) {
    TrainingJobReconcilerOptions options;
    options.hub_id = run_;
    options.stage_service_address = kStageService;
    options.ca_pem = kCaPem;
    options.status_interval = status_interval;
    return std::make_unique<TrainingJobReconciler>(*hub_client_, jobs_, informer_->store(),
                                                   registry, stages_, *recorder_, options);
  }

  void make_reconciler(std::chrono::milliseconds status_interval = 0ms) {
    reconciler_ = reconciler_on(*registry_, status_interval);
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

  // "name@resourceVersion, ..." of a set of objects, for failure messages.
  static std::string name_versions(const std::set<std::pair<std::string, std::string>>& objects) {
    std::string text = "{";
    for (const auto& [name, version] : objects) {
      text += (text.size() > 1 ? ", " : "") + name + "@" + version;
    }
    return text + "}";
  }

  // This run's pods and Nodes in member `m` as the API holds them: name and resourceVersion.
  std::set<std::pair<std::string, std::string>> api_now(int m) const {
    std::set<std::pair<std::string, std::string>> now;
    for (const json& pod : member_pods(m))
      now.insert({kube::object_name(pod), kube::object_resource_version(pod)});
    for (const std::string& node : nodes_[m]) {
      const json live = members_[m]->admin().get(core("nodes"), "", node);
      now.insert({node, kube::object_resource_version(live)});
    }
    return now;
  }

  // Each member's informers hold what the API holds: this run's pods and Nodes, both read again
  // at every poll. An object may change after a first read without the test asking (a Node read
  // at one resourceVersion just after add_node returned, then held at the next by the API and the
  // informers alike), so a snapshot taken once could never be caught up with.
  //
  // pods() merges two informers (this hub's pods, and every bound unfinished pod), while the
  // reconciler finds a job's pods through the first one's index (pods_of_job). A bound pod can
  // reach the second informer first, so each job pod must also be in that index, at its version.
  void sync_members() {
    for (int m = 0; m < 2; ++m) {
      std::set<std::pair<std::string, std::string>> want, seen, unindexed;
      bool has_view = false;
      ASSERT_TRUE(eventually([&] {
        want = api_now(m);
        const auto view = registry_->member(kMembers[m]);
        has_view = view != nullptr;
        if (!view) return false;
        seen.clear();
        unindexed.clear();
        for (const json& pod : view->pods()) {
          if (kube::get_label(pod, kHubLabel) != run_ || kube::object_namespace(pod) != ns_)
            continue;
          const std::pair<std::string, std::string> entry = {kube::object_name(pod),
                                                             kube::object_resource_version(pod)};
          seen.insert(entry);
          const std::optional<std::string> uid = kube::get_label(pod, kJobUidLabel);
          if (!uid) continue;
          const std::vector<json> indexed = view->pods_of_job(*uid);
          if (std::none_of(indexed.begin(), indexed.end(), [&](const json& p) {
                return std::pair{kube::object_name(p), kube::object_resource_version(p)} == entry;
              }))
            unindexed.insert(entry);
        }
        for (const json& node : view->nodes()) {
          if (kube::get_label(node, kRunLabel) == run_)
            seen.insert({kube::object_name(node), kube::object_resource_version(node)});
        }
        return seen == want && unindexed.empty();
      })) << "the informers of "
          << kMembers[m] << " did not catch up: " << (has_view ? "" : "no view of the member; ")
          << "the API held " << name_versions(want) << ", the informers " << name_versions(seen)
          << ", not yet in the job index " << name_versions(unindexed);
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
    for (const auto& member : members_) hold_reads(member->server(), "pods", held);
  }

  // On the hub's test server: while held, TrainingJobs can be neither listed nor watched, so the
  // reconciler's job cache stands still while the API's jobs move on.
  void hold_job_cache(bool held) { hold_reads(hub_->server(), "trainingjobs", held); }

  // What the stage service reports for a 2 x 2 job of 40 steps that has done `step` of them.
  static JobProgress four_ranks_at(int64_t step) {
    JobProgress progress;
    progress.world_size = 4;
    progress.started = 4;
    progress.step = step;
    progress.loss = 3.25;
    progress.tokens_per_s = 1280;
    progress.total_steps = 40;
    return progress;
  }

  // While held, `resource` can be neither listed nor watched on `server` (open watches are
  // cut); nothing on a real cluster (server == nullptr).
  static void hold_reads(testing::ApiTestServer* server, const std::string& resource, bool held) {
    if (!server) return;
    if (!held) {
      server->set_authorizer(nullptr);  // the default again
      return;
    }
    server->set_authorizer([resource](const testing::RequestAttributes& request) {
      const bool read =
          request.resource == resource && (request.verb == "list" || request.verb == "watch");
      return !read && request.user.name != "system:anonymous";
    });
    server->drop_watches();
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

  // What the node lifecycle controller writes ~40 s after a kubelet's Lease stops.
  void lose_node(int m, const std::string& node) {
    const std::string now = kube::format_rfc3339(std::chrono::system_clock::now());
    const json status = {{"status",
                          {{"conditions",
                            {{{"type", "Ready"},
                              {"status", "Unknown"},
                              {"reason", "NodeStatusUnknown"},
                              {"message", "Kubelet stopped posting node status."},
                              {"lastHeartbeatTime", now},
                              {"lastTransitionTime", now}}}}}}};
    members_[m]->admin().patch(core("nodes"), "", node, kube::PatchType::kMerge, status, {},
                               "status");
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

}  // namespace tessel::controller::reconciler_test
