#include "tests/helm/rbac_operations.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <stop_token>
#include <thread>

#include "api/prober_peers.h"
#include "kube/api_error.h"
#include "kube/event_recorder.h"  // object_reference
#include "kube/object.h"
#include "operator/app/stage_service_label.h"
#include "operator/controller/labels.h"
#include "operator/controller/trainingjob_reconciler.h"
#include "tests/support/api_yaml.h"

namespace tessel::testing::helm {
namespace {

using nlohmann::json;
namespace labels = tessel::controller;

// A watch call ends at its first event (each one's prepare makes an object it sees), or after
// this long when none comes: it was allowed either way.
constexpr std::chrono::seconds kWatchWait{10};

const std::string kExampleJob =
    std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/fables.yaml";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const kube::ResourceInfo& core(const char* plural) {
  static const kube::ResourceRegistry registry;
  const kube::ResourceInfo* info = registry.find_resource("", plural);
  if (info == nullptr) throw std::logic_error(std::string("no built-in core resource ") + plural);
  return *info;
}

const kube::ResourceInfo& leases() {
  static const kube::ResourceRegistry registry;
  return *registry.find_kind("coordination.k8s.io/v1", "Lease");
}

// Names of objects the calls create: new for every call (a create is authorized before the
// name is looked at, so any name stands for the product's).
std::string fresh_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return prefix + "-" + std::to_string(++counter);
}

json metadata(const std::string& name, const std::string& ns, json labels_ = json::object()) {
  json m = {{"name", name}, {"labels", std::move(labels_)}};
  if (!ns.empty()) m["namespace"] = ns;
  return m;
}

// Creates `object` unless it exists; returns it as stored.
json ensure(kube::Client& admin, const kube::ResourceInfo& info, const json& object) {
  const std::string ns = kube::object_namespace(object);
  try {
    return admin.create(info, ns, object);
  } catch (const kube::ApiError& e) {
    if (!e.is_already_exists()) throw;
    return admin.get(info, ns, kube::object_name(object));
  }
}

// As the product's informers start one: list and watch from "now" (no resourceVersion, so the
// server first sends the objects there are).
void watch_once(kube::Client& client, const kube::ResourceInfo& info, const std::string& ns,
                kube::ListOptions options) {
  std::stop_source stop;
  std::jthread deadline([&stop](std::stop_token cancelled) {
    std::mutex mutex;
    std::condition_variable_any wake;
    std::unique_lock lock(mutex);
    wake.wait_for(lock, cancelled, kWatchWait, [] { return false; });
    stop.request_stop();
  });
  client.watch(
      info, ns, options, [](const kube::WatchEvent&) { return false; }, stop.get_token());
}

kube::ListOptions labelled(const std::string& selector) {
  kube::ListOptions options;
  options.label_selector = selector;
  return options;
}

kube::ListOptions fielded(const std::string& selector) {
  kube::ListOptions options;
  options.field_selector = selector;
  return options;
}

std::string in(const std::string& ns) { return "in " + ns; }

// An Event about `object`, as kube/event_recorder.cpp writes one first.
json event_body(const json& object, const std::string& ns, const std::string& name) {
  const std::string now = kube::format_rfc3339(std::chrono::system_clock::now());
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"involvedObject", kube::object_reference(object)},
          {"reason", "RbacCheck"},
          {"message", "made by the chart RBAC test"},
          {"type", "Normal"},
          {"source", {{"component", "tessel-operator"}}},
          {"count", 1},
          {"firstTimestamp", now},
          {"lastTimestamp", now}};
}

// The objects the calls are about, made when missing.
class World {
 public:
  explicit World(const OperationScope& s) : s_(s) {}

  // examples/trainingjobs/fables.yaml, renamed, and managed by no operator (an operator of a
  // real hub leaves it alone).
  json job(kube::Client& hub) const {
    static const json example = parse_yaml(read_text(kExampleJob));
    json job = example;
    job["metadata"] = metadata(s_.job_name, s_.job_namespace);
    job["spec"]["managedBy"] = "tessel.dev/rbac-check";
    return ensure(hub, s_.jobs, job);
  }

  json member(kube::Client& hub) const {
    const json secret = {{"apiVersion", "v1"},
                         {"kind", "Secret"},
                         {"metadata", metadata(kubeconfig_secret(), s_.operator_namespace)},
                         {"type", "Opaque"},
                         {"stringData", {{"kubeconfig", "(not read by these calls)"}}}};
    ensure(hub, core("secrets"), secret);
    json member = {{"apiVersion", s_.members.gvr.api_version()},
                   {"kind", s_.members.kind},
                   {"metadata", metadata(s_.member_name, "")},
                   {"spec", {{"kubeconfigSecretRef", {{"name", kubeconfig_secret()}}}}}};
    return ensure(hub, s_.members, member);
  }

  std::string kubeconfig_secret() const { return s_.member_name + "-kubeconfig"; }

  // A stage pod of this hub's job in the member; on a test server also one bound to the Node.
  json member_pods(kube::Client& member) const {
    node(member);
    json labels = {{labels::kHubLabel, s_.hub_id},
                   {labels::kJobNamespaceLabel, s_.job_namespace},
                   {labels::kJobNameLabel, s_.job_name},
                   {labels::kJobUidLabel, job_uid()}};
    if (s_.create_node) {
      json bound = pod(s_.job_namespace, "rbac-bound", labels);
      bound["spec"].erase("nodeSelector");
      bound["spec"]["nodeName"] = s_.node_name;
      ensure(member, core("pods"), bound);
    }
    return ensure(member, core("pods"), pod(s_.job_namespace, "rbac-stage", labels));
  }

  json node(kube::Client& member) const {
    if (!s_.create_node) return member.get(core("nodes"), "", s_.node_name);
    return ensure(
        member, core("nodes"),
        {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", metadata(s_.node_name, "")}});
  }

  json prober_pod(kube::Client& member) const {
    const kube::LabelSelector selector = kube::LabelSelector::parse(s_.peer_selector);
    json labels = json::object();
    for (const kube::LabelRequirement& r : selector.requirements()) {
      if (r.op != kube::SelectorOperator::kEquals || r.values.size() != 1)
        throw std::invalid_argument("--peer-selector '" + s_.peer_selector +
                                    "': only key=value terms are made here");
      labels[r.key] = r.values.front();
    }
    return ensure(member, core("pods"), pod(s_.prober_namespace, "rbac-prober", labels));
  }

  json peers_configmap(kube::Client& member) const {
    return ensure(member, core("configmaps"),
                  {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata", metadata(s_.peers_configmap, s_.prober_namespace)},
                   {"data", {{api::kProberPeersKey, "{}"}}}});
  }

  // A job's ConfigMap or Secret in the member, labelled as the operator labels them.
  json job_object(kube::Client& member, const std::string& plural, const std::string& name) const {
    json o = {{"apiVersion", "v1"},
              {"kind", plural == "secrets" ? "Secret" : "ConfigMap"},
              {"metadata", metadata(name, s_.job_namespace, remote_labels())},
              {"data", json::object()}};
    return ensure(member, core(plural.c_str()), o);
  }

  json remote_labels() const {
    return {{labels::kHubLabel, s_.hub_id}, {labels::kJobUidLabel, job_uid()}};
  }
  std::string remote_selector() const {
    return std::string(labels::kHubLabel) + "=" + s_.hub_id + "," + labels::kJobUidLabel + "=" +
           job_uid();
  }

  json pod(const std::string& ns, const std::string& name, json labels) const {
    // A node selector no node has: on a real cluster the pod stays Pending and runs nothing.
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", metadata(name, ns, std::move(labels))},
            {"spec",
             {{"nodeSelector", {{"tessel.dev/rbac-check", "no-such-node"}}},
              {"containers", json::array({{{"name", "stage"}, {"image", s_.pod_image}}})}}}};
  }

  // The operator's own Pod in its namespace (the Deployment's; no ReplicaSet makes it here).
  json operator_pod(kube::Client& hub) const {
    return ensure(hub, core("pods"),
                  pod(s_.operator_namespace, "rbac-operator",
                      {{app::kStageServiceLabel, app::kStageServiceServing}}));
  }

  json lease(kube::Client& hub) const {
    return ensure(hub, leases(),
                  {{"apiVersion", "coordination.k8s.io/v1"},
                   {"kind", "Lease"},
                   {"metadata", metadata(s_.lease_name, s_.operator_namespace)},
                   {"spec", {{"holderIdentity", "rbac-check"}, {"leaseDurationSeconds", 15}}}});
  }

  // The Event patch calls change: one about `object` in `ns`, made when missing.
  json event(kube::Client& hub, const json& object, const std::string& ns) const {
    return ensure(hub, core("events"), event_body(object, ns, kube::object_name(object) + ".rbac"));
  }

  // The job's uid, once job() has made it (labels need a value before then: "none").
  std::string job_uid() const { return job_uid_.empty() ? "none" : job_uid_; }
  void set_job_uid(const std::string& uid) const { job_uid_ = uid; }

 private:
  const OperationScope& s_;
  mutable std::string job_uid_;
};

}  // namespace

std::string_view to_string(Identity identity) {
  switch (identity) {
    case Identity::kHubOperator:
      return "hub operator";
    case Identity::kMemberOperator:
      return "operator in a member";
    case Identity::kProber:
      return "prober";
  }
  return "?";
}

bool calls_hub(Identity identity) { return identity == Identity::kHubOperator; }

std::string describe(const Operation& operation) {
  return operation.verb + " " + operation.resource + " " + operation.where;
}

std::vector<Operation> operation_catalogue(const OperationScope& scope) {
  const OperationScope& s = scope;
  const auto world = std::make_shared<World>(scope);
  const auto job_of = [world](kube::Client& hub) {
    json job = world->job(hub);
    world->set_job_uid(kube::object_uid(job));
    return job;
  };
  const std::string jobs_where =
      s.watch_namespace.empty() ? "all namespaces" : in(s.watch_namespace);
  const std::string jobs_label =
      s.watch_namespace.empty() ? "across namespaces" : "in --watch-namespace";
  const std::string jobs = "trainingjobs." + s.jobs.gvr.group;
  const std::string members = "memberclusters." + s.members.gvr.group;
  std::vector<Operation> ops;
  const auto add = [&ops](Operation op) { ops.push_back(std::move(op)); };
  const auto nothing = [](kube::Client&) { return json(); };

  // --- the hub operator (operator/app, operator/controller, kube/'s informers, leader election
  // and event recorder) ---
  // operator_app.cpp: the TrainingJob informer (--watch-namespace).
  add({"operator: list TrainingJobs " + jobs_label, Identity::kHubOperator, "list", jobs,
       jobs_where, job_of,
       [&s](kube::Client& c, const json&) { c.list_all(s.jobs, s.watch_namespace); }});
  add({"operator: watch TrainingJobs " + jobs_label, Identity::kHubOperator, "watch", jobs,
       jobs_where, job_of,
       [&s](kube::Client& c, const json&) { watch_once(c, s.jobs, s.watch_namespace, {}); }});
  // trainingjob_reconciler.cpp: adding (and removing) the cleanup finalizer.
  add({"operator: update a TrainingJob (its finalizer)", Identity::kHubOperator, "update", jobs,
       in(s.job_namespace), job_of, [&s](kube::Client& c, const json& job) {
         json updated = job;
         kube::add_finalizer(updated, controller::kCleanupFinalizer);
         c.update(s.jobs, updated);
       }});
  // trainingjob_reconciler.cpp write_status.
  add({"operator: update a TrainingJob's status", Identity::kHubOperator, "update",
       "trainingjobs/status." + s.jobs.gvr.group, in(s.job_namespace), job_of,
       [&s](kube::Client& c, const json& job) {
         json updated = job;
         updated["status"]["phase"] = "Pending";
         c.update_status(s.jobs, updated);
       }});
  // operator_app.cpp: the MemberCluster informer (--member-selector).
  const auto member_of = [world](kube::Client& hub) { return world->member(hub); };
  add({"operator: list MemberClusters", Identity::kHubOperator, "list", members, "cluster-wide",
       member_of, [&s](kube::Client& c, const json&) {
         c.list_all(s.members, "", labelled(s.member_selector));
       }});
  add({"operator: watch MemberClusters", Identity::kHubOperator, "watch", members, "cluster-wide",
       member_of, [&s](kube::Client& c, const json&) {
         watch_once(c, s.members, "", labelled(s.member_selector));
       }});
  // membercluster_reconciler.cpp: the fresh MemberCluster after a status conflict.
  add({"operator: get a MemberCluster", Identity::kHubOperator, "get", members, "cluster-wide",
       member_of, [&s](kube::Client& c, const json&) { c.get(s.members, "", s.member_name); }});
  add({"operator: update a MemberCluster's status", Identity::kHubOperator, "update",
       "memberclusters/status." + s.members.gvr.group, "cluster-wide", member_of,
       [&s](kube::Client& c, const json& member) {
         json updated = member;
         updated["status"]["nodes"] = 0;
         c.update_status(s.members, updated);
       }});
  // operator_app.cpp: the informer of the members' kubeconfig Secrets in --namespace.
  add({"operator: list Secrets in --namespace", Identity::kHubOperator, "list", "secrets",
       in(s.operator_namespace), member_of,
       [&s](kube::Client& c, const json&) { c.list_all(core("secrets"), s.operator_namespace); }});
  add({"operator: watch Secrets in --namespace", Identity::kHubOperator, "watch", "secrets",
       in(s.operator_namespace), member_of, [&s](kube::Client& c, const json&) {
         watch_once(c, core("secrets"), s.operator_namespace, {});
       }});
  // trainingjob_reconciler.cpp token_for: the job's token Secret, read, else created.
  add({"operator: get a job's token Secret", Identity::kHubOperator, "get", "secrets",
       in(s.job_namespace),
       [world, job_of, &s](kube::Client& hub) {
         const json job = job_of(hub);
         json secret = {{"apiVersion", "v1"},
                        {"kind", "Secret"},
                        {"metadata", metadata(s.job_name + "-stage-token", s.job_namespace)},
                        {"type", "Opaque"},
                        {"stringData", {{"token", "rbac-check"}}}};
         kube::set_controller_reference(secret, job);
         return ensure(hub, core("secrets"), secret);
       },
       [&s](kube::Client& c, const json& secret) {
         c.get(core("secrets"), s.job_namespace, kube::object_name(secret));
       }});
  add({"operator: create a job's token Secret (owned by the job, blockOwnerDeletion)",
       Identity::kHubOperator, "create", "secrets", in(s.job_namespace), job_of,
       [&s](kube::Client& c, const json& job) {
         json secret = {
             {"apiVersion", "v1"},
             {"kind", "Secret"},
             {"metadata", metadata(fresh_name(s.job_name + "-stage-token"), s.job_namespace,
                                   {{labels::kJobNameLabel, s.job_name},
                                    {labels::kJobUidLabel, kube::object_uid(job)}})},
             {"type", "Opaque"},
             {"stringData", {{"token", "rbac-check"}}}};
         kube::set_controller_reference(secret, job);
         c.create(core("secrets"), s.job_namespace, secret);
       }});
  // kube/event_recorder.cpp: an Event is created, then patched while it repeats. A job's go to
  // its namespace; a MemberCluster's (cluster-scoped) to "default". (Not through EventRecorder:
  // it logs a refusal instead of throwing it.)
  add({"operator: create an Event about a TrainingJob", Identity::kHubOperator, "create", "events",
       in(s.job_namespace), job_of, [&s](kube::Client& c, const json& job) {
         c.create(core("events"), s.job_namespace,
                  event_body(job, s.job_namespace, fresh_name(s.job_name + ".rbac")));
       }});
  add({"operator: patch an Event about a TrainingJob", Identity::kHubOperator, "patch", "events",
       in(s.job_namespace),
       [world, job_of, &s](kube::Client& hub) {
         return world->event(hub, job_of(hub), s.job_namespace);
       },
       [](kube::Client& c, const json& event) {
         c.patch(core("events"), kube::object_namespace(event), kube::object_name(event),
                 kube::PatchType::kStrategicMerge,
                 {{"count", 2},
                  {"lastTimestamp", kube::format_rfc3339(std::chrono::system_clock::now())}});
       }});
  add({"operator: create an Event about a MemberCluster", Identity::kHubOperator, "create",
       "events", in("default"), member_of, [](kube::Client& c, const json& member) {
         c.create(core("events"), "default",
                  event_body(member, "default", fresh_name(kube::object_name(member) + ".rbac")));
       }});
  add({"operator: patch an Event about a MemberCluster", Identity::kHubOperator, "patch", "events",
       in("default"),
       [world, member_of](kube::Client& hub) {
         return world->event(hub, member_of(hub), "default");
       },
       [](kube::Client& c, const json& event) {
         c.patch(core("events"), kube::object_namespace(event), kube::object_name(event),
                 kube::PatchType::kStrategicMerge,
                 {{"count", 2},
                  {"lastTimestamp", kube::format_rfc3339(std::chrono::system_clock::now())}});
       }});
  // kube/lease_client.cpp, as kube/leader_election.cpp uses it (--lease-name in --namespace).
  const auto lease_of = [world](kube::Client& hub) { return world->lease(hub); };
  add({"operator: get the leader-election Lease", Identity::kHubOperator, "get", "leases",
       in(s.operator_namespace), lease_of, [&s](kube::Client& c, const json&) {
         c.get(leases(), s.operator_namespace, s.lease_name);
       }});
  add({"operator: create the leader-election Lease", Identity::kHubOperator, "create", "leases",
       in(s.operator_namespace), nothing, [&s](kube::Client& c, const json&) {
         c.create(leases(), s.operator_namespace,
                  {{"apiVersion", "coordination.k8s.io/v1"},
                   {"kind", "Lease"},
                   {"metadata", metadata(fresh_name(s.lease_name), s.operator_namespace)},
                   {"spec", {{"holderIdentity", "rbac-check"}, {"leaseDurationSeconds", 15}}}});
       }});
  add({"operator: update the leader-election Lease", Identity::kHubOperator, "update", "leases",
       in(s.operator_namespace), lease_of, [](kube::Client& c, const json& lease) {
         json renewed = lease;
         renewed["spec"]["renewTime"] = "2026-01-01T00:00:00.000000Z";
         c.update(leases(), renewed);
       }});
  // operator/app/stage_service_label.cpp: the leader's label on its own Pod.
  const auto operator_pod = [world](kube::Client& hub) { return world->operator_pod(hub); };
  add({"operator: list its Pods labelled as the stage service's", Identity::kHubOperator, "list",
       "pods", in(s.operator_namespace), operator_pod, [&s](kube::Client& c, const json&) {
         c.list_all(
             core("pods"), s.operator_namespace,
             labelled(std::string(app::kStageServiceLabel) + "=" + app::kStageServiceServing));
       }});
  add({"operator: patch its Pod's stage-service label", Identity::kHubOperator, "patch", "pods",
       in(s.operator_namespace), operator_pod, [&s](kube::Client& c, const json& pod) {
         c.patch(
             core("pods"), s.operator_namespace, kube::object_name(pod), kube::PatchType::kMerge,
             {{"metadata", {{"labels", {{app::kStageServiceLabel, app::kStageServiceServing}}}}}});
       }});

  // --- the operator in a member (operator/controller: member_registry.cpp's informers,
  // trainingjob_reconciler.cpp's stage objects, prober_peers_writer.cpp) ---
  const auto member_pods = [world](kube::Client& m) { return world->member_pods(m); };
  const auto node_of = [world](kube::Client& m) { return world->node(m); };
  add({"operator: list a member's Nodes", Identity::kMemberOperator, "list", "nodes",
       "cluster-wide", node_of,
       [](kube::Client& c, const json&) { c.list_all(core("nodes"), ""); }});
  add({"operator: watch a member's Nodes", Identity::kMemberOperator, "watch", "nodes",
       "cluster-wide", node_of,
       [](kube::Client& c, const json&) { watch_once(c, core("nodes"), "", {}); }});
  const std::string hub_pods = std::string(labels::kHubLabel) + "=" + s.hub_id;
  add({"operator: list this hub's Pods in a member", Identity::kMemberOperator, "list", "pods",
       "all namespaces", member_pods, [hub_pods](kube::Client& c, const json&) {
         c.list_all(core("pods"), "", labelled(hub_pods));
       }});
  add({"operator: watch this hub's Pods in a member", Identity::kMemberOperator, "watch", "pods",
       "all namespaces", member_pods, [hub_pods](kube::Client& c, const json&) {
         watch_once(c, core("pods"), "", labelled(hub_pods));
       }});
  // member_registry.cpp's kBoundPodsSelector.
  const std::string bound = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed";
  add({"operator: list the Pods bound to a member's nodes", Identity::kMemberOperator, "list",
       "pods", "all namespaces", member_pods,
       [bound](kube::Client& c, const json&) { c.list_all(core("pods"), "", fielded(bound)); }});
  add({"operator: watch the Pods bound to a member's nodes", Identity::kMemberOperator, "watch",
       "pods", "all namespaces", member_pods,
       [bound](kube::Client& c, const json&) { watch_once(c, core("pods"), "", fielded(bound)); }});
  add({"operator: create a stage Pod in a member", Identity::kMemberOperator, "create", "pods",
       in(s.job_namespace), member_pods, [world, &s](kube::Client& c, const json& pod) {
         json stage =
             world->pod(s.job_namespace, fresh_name("rbac-stage"), pod["metadata"]["labels"]);
         c.create(core("pods"), s.job_namespace, stage);
       }});
  // trainingjob_reconciler.cpp delete_labelled: list by the job's labels, delete each.
  add({"operator: list a job's Pods in a member", Identity::kMemberOperator, "list", "pods",
       in(s.job_namespace), member_pods, [world, &s](kube::Client& c, const json&) {
         c.list_all(core("pods"), s.job_namespace, labelled(world->remote_selector()));
       }});
  add({"operator: delete a stage Pod in a member", Identity::kMemberOperator, "delete", "pods",
       in(s.job_namespace),
       [world, &s](kube::Client& m) {
         return ensure(
             m, core("pods"),
             world->pod(s.job_namespace, fresh_name("rbac-doomed"), world->remote_labels()));
       },
       [&s](kube::Client& c, const json& pod) {
         c.remove(core("pods"), s.job_namespace, kube::object_name(pod));
       }});
  // trainingjob_reconciler.cpp: a job's Secret and ConfigMap (job.json) in each member: created,
  // else read and replaced; listed and deleted with the job.
  for (const std::string plural : {"configmaps", "secrets"}) {
    const std::string kind = plural == "secrets" ? "Secret" : "ConfigMap";
    const std::string fixed = "rbac-job-" + plural;
    const auto existing = [world, plural, fixed](kube::Client& m) {
      return world->job_object(m, plural, fixed);
    };
    add({"operator: create a job's " + kind + " in a member", Identity::kMemberOperator, "create",
         plural, in(s.job_namespace), nothing,
         [world, plural, kind, &s](kube::Client& c, const json&) {
           c.create(core(plural.c_str()), s.job_namespace,
                    {{"apiVersion", "v1"},
                     {"kind", kind},
                     {"metadata", metadata(fresh_name("rbac-job-" + plural), s.job_namespace,
                                           world->remote_labels())},
                     {"data", json::object()}});
         }});
    add({"operator: get a job's " + kind + " in a member", Identity::kMemberOperator, "get", plural,
         in(s.job_namespace), existing, [plural, &s](kube::Client& c, const json& o) {
           c.get(core(plural.c_str()), s.job_namespace, kube::object_name(o));
         }});
    add({"operator: update a job's " + kind + " in a member", Identity::kMemberOperator, "update",
         plural, in(s.job_namespace), existing, [plural](kube::Client& c, const json& o) {
           json replaced = o;
           replaced["data"]["rbac-check"] = plural == "secrets" ? "Y2hlY2s=" : "check";
           c.update(core(plural.c_str()), replaced);
         }});
    add({"operator: list a job's " + kind + "s in a member", Identity::kMemberOperator, "list",
         plural, in(s.job_namespace), existing, [world, plural, &s](kube::Client& c, const json&) {
           c.list_all(core(plural.c_str()), s.job_namespace, labelled(world->remote_selector()));
         }});
    add({"operator: delete a job's " + kind + " in a member", Identity::kMemberOperator, "delete",
         plural, in(s.job_namespace),
         [world, plural](kube::Client& m) {
           return world->job_object(m, plural, fresh_name("rbac-doomed-" + plural));
         },
         [plural, &s](kube::Client& c, const json& o) {
           c.remove(core(plural.c_str()), s.job_namespace, kube::object_name(o));
         }});
  }
  // prober_peers_writer.cpp: the probers' peers ConfigMap in --prober-namespace: read, created
  // when missing, replaced when stale.
  const auto peers = [world](kube::Client& m) { return world->peers_configmap(m); };
  add({"operator: get the probers' peers ConfigMap", Identity::kMemberOperator, "get",
       "configmaps/" + s.peers_configmap, in(s.prober_namespace), peers,
       [&s](kube::Client& c, const json&) {
         c.get(core("configmaps"), s.prober_namespace, s.peers_configmap);
       }});
  add({"operator: create the probers' peers ConfigMap", Identity::kMemberOperator, "create",
       "configmaps", in(s.prober_namespace), nothing, [&s](kube::Client& c, const json&) {
         c.create(core("configmaps"), s.prober_namespace,
                  {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata", metadata(fresh_name(s.peers_configmap), s.prober_namespace)},
                   {"data", {{api::kProberPeersKey, "{}"}}}});
       }});
  add({"operator: update the probers' peers ConfigMap", Identity::kMemberOperator, "update",
       "configmaps/" + s.peers_configmap, in(s.prober_namespace), peers,
       [](kube::Client& c, const json& live) {
         json updated = live;
         updated["data"][api::kProberPeersKey] = "{}";
         c.update(core("configmaps"), updated);
       }});

  // --- the prober (noderuntime/prober/app/prober_daemon.cpp, node_annotator.cpp) ---
  const auto prober_pod = [world](kube::Client& m) { return world->prober_pod(m); };
  add({"prober: list its peers' Pods", Identity::kProber, "list", "pods", in(s.prober_namespace),
       prober_pod, [&s](kube::Client& c, const json&) {
         c.list_all(core("pods"), s.prober_namespace, labelled(s.peer_selector));
       }});
  add({"prober: watch its peers' Pods", Identity::kProber, "watch", "pods", in(s.prober_namespace),
       prober_pod, [&s](kube::Client& c, const json&) {
         watch_once(c, core("pods"), s.prober_namespace, labelled(s.peer_selector));
       }});
  const std::string peers_field = "metadata.name=" + s.peers_configmap;
  add({"prober: list the peers ConfigMap", Identity::kProber, "list", "configmaps",
       in(s.prober_namespace), peers, [&s, peers_field](kube::Client& c, const json&) {
         c.list_all(core("configmaps"), s.prober_namespace, fielded(peers_field));
       }});
  add({"prober: watch the peers ConfigMap", Identity::kProber, "watch", "configmaps",
       in(s.prober_namespace), peers, [&s, peers_field](kube::Client& c, const json&) {
         watch_once(c, core("configmaps"), s.prober_namespace, fielded(peers_field));
       }});
  add({"prober: get its Node", Identity::kProber, "get", "nodes/" + s.node_name, "cluster-wide",
       node_of, [&s](kube::Client& c, const json&) { c.get(core("nodes"), "", s.node_name); }});
  add({"prober: patch its Node's annotations", Identity::kProber, "patch", "nodes/" + s.node_name,
       "cluster-wide", node_of, [&s](kube::Client& c, const json&) {
         c.patch(core("nodes"), "", s.node_name, kube::PatchType::kMerge,
                 kube::annotation_merge_patch("net.tessel.dev/rbac-check", s.job_namespace));
       }});
  return ops;
}

}  // namespace tessel::testing::helm
