#include "operator/app/operator_app.h"

#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "api/crds.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/leader_election.h"
#include "kube/lease_client.h"
#include "kube/log.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "operator/app/stage_channel.h"
#include "operator/app/stage_service_label.h"
#include "operator/controller/conditions.h"
#include "operator/controller/labels.h"
#include "operator/controller/member_registry.h"
#include "operator/controller/membercluster_reconciler.h"
#include "operator/controller/trainingjob_reconciler.h"
#include "operator/server/endpoint.h"
#include "operator/server/https_server.h"
#include "operator/server/metrics.h"
#include "operator/server/probes.h"
#include "operator/server/stage_service.h"
#include "operator/server/tls_key_pair.h"

namespace tessel::app {
namespace {

using nlohmann::json;

// Bounds on the stage-service label's requests (at most about 11 s to take it off at exit).
constexpr std::chrono::seconds kLabelRequestTimeout{5};
constexpr int kLabelAttempts = 2;

std::string read_file(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(flag + ": cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) throw std::runtime_error(flag + ": '" + path + "' is empty");
  return text.str();
}

std::string default_identity() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  unsigned char bytes[4] = {};
  if (getrandom(bytes, sizeof bytes, 0) != sizeof bytes)
    bytes[0] = static_cast<unsigned char>(getpid());
  char suffix[16];
  snprintf(suffix, sizeof suffix, "%02x%02x%02x%02x", bytes[0], bytes[1], bytes[2], bytes[3]);
  return std::string(host) + "_" + suffix;
}

kube::LogLevel log_level(const std::string& name) {
  if (name == "debug") return kube::LogLevel::kDebug;
  if (name == "warning") return kube::LogLevel::kWarning;
  if (name == "error") return kube::LogLevel::kError;
  return kube::LogLevel::kInfo;
}

kube::ResourceInfo served_resource(const json& crd) {
  const std::vector<kube::ResourceInfo> infos = kube::parse_custom_resource_definition(crd);
  for (const kube::ResourceInfo& info : infos) {
    if (info.gvr.version == "v1alpha1") return info;
  }
  throw std::logic_error("the compiled-in CRD serves no v1alpha1");
}

// The TrainingJob a member's pod belongs to, when this hub made it.
std::optional<std::string> job_key_of_pod(const json& pod, const std::string& hub_id) {
  if (kube::get_label(pod, controller::kHubLabel) != hub_id) return std::nullopt;
  const auto ns = kube::get_label(pod, controller::kJobNamespaceLabel);
  const auto name = kube::get_label(pod, controller::kJobNameLabel);
  if (!ns || !name) return std::nullopt;
  return *ns + "/" + *name;
}

double reachable(const json& member) {
  return controller::condition_is_true(
             member.value("status", json::object()).value("conditions", json::array()), "Reachable")
             ? 1
             : 0;
}

struct Shared {
  const OperatorFlags& flags;
  std::shared_ptr<const kube::Logger> logger;
  std::string cert_pem, key_pem, ca_pem;
  std::string identity;
  server::OperatorMetrics& metrics;
  server::Readiness& readiness;
  kube::Client& hub;
  kube::ResourceInfo jobs_resource, members_resource;
  StageServiceLabel* stage_label;  // nullptr: --pod-name is empty
};

kube::Reconciler timed(const std::string& name, server::OperatorMetrics& metrics,
                       kube::Controller*& controller,
                       std::function<kube::ReconcileResult(const std::string&)> reconcile) {
  return [name, &metrics, &controller, reconcile = std::move(reconcile)](const std::string& key) {
    const auto start = std::chrono::steady_clock::now();
    std::string result = "error";
    try {
      kube::ReconcileResult r = reconcile(key);
      result = r.requeue || r.requeue_after > kube::Clock::duration::zero() ? "requeue" : "success";
      metrics.reconcile_total.inc({name, result});
      metrics.reconcile_seconds.observe(
          {name}, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (controller) metrics.workqueue_depth.set({name}, double(controller->queue().size()));
      return r;
    } catch (...) {
      metrics.reconcile_total.inc({name, result});
      metrics.reconcile_seconds.observe(
          {name}, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      throw;
    }
  };
}

// The controllers, with their informers and the stage service, until `stop`.
void run_controllers(Shared& s, std::stop_token stop) {
  const OperatorFlags& flags = s.flags;
  kube::Controller* jobs_controller_ptr = nullptr;
  kube::Controller* members_controller_ptr = nullptr;

  kube::InformerOptions resync;
  resync.resync_period = std::chrono::minutes(10);
  kube::SharedInformer jobs(s.hub, s.jobs_resource, flags.watch_namespace, resync);
  kube::InformerOptions member_options_informer = resync;
  member_options_informer.reflector.selectors.label_selector = flags.member_selector;
  kube::SharedInformer members(s.hub, s.members_resource, "", member_options_informer);
  // tessel_member_reachable follows each MemberCluster's Reachable condition.
  members.add_event_handler(
      {.on_add =
           [&s](const json& m) {
             s.metrics.member_reachable.set({kube::object_name(m)}, reachable(m));
           },
       .on_update =
           [&s](const json&, const json& m) {
             s.metrics.member_reachable.set({kube::object_name(m)}, reachable(m));
           },
       .on_delete = [&s](const json& m,
                         bool) { s.metrics.member_reachable.remove({kube::object_name(m)}); }});
  kube::SharedInformer secrets(s.hub, *kube::ResourceRegistry().find_kind("v1", "Secret"),
                               flags.namespace_name);

  server::StageService stage_service(flags.stage_service_address, s.cert_pem, s.key_pem,
                                     [&jobs_controller_ptr](const std::string& key) {
                                       if (jobs_controller_ptr)
                                         jobs_controller_ptr->queue().add(key);
                                     });
  StageServiceChannel channel(stage_service);
  // The stage Service sends stage pods to this replica once its Pod carries the label.
  std::jthread stage_label_thread;
  if (s.stage_label) {
    stage_label_thread = std::jthread([&s](std::stop_token t) { s.stage_label->run(t); });
  }

  controller::TrainingJobReconciler* job_reconciler_ptr = nullptr;
  controller::MemberRegistry::Options registry_options;
  registry_options.operator_namespace = flags.namespace_name;
  registry_options.hub_id = flags.hub_id;
  registry_options.logger = s.logger;
  registry_options.client.qps = 50;
  registry_options.client.burst = 100;
  registry_options.client.logger = s.logger;
  registry_options.client.request_timeout = std::chrono::seconds(30);  // a hung member stops
  registry_options.observe_client = [&s](const std::string& name) {
    return s.metrics.api_request_counter(name);
  };
  registry_options.prober_namespace = flags.prober_namespace;
  registry_options.prober_selector = flags.prober_selector;
  // A member's probers are every other member's peers: each one's ConfigMap is rewritten.
  registry_options.on_probers = [&](const std::string&) {
    if (!members_controller_ptr) return;
    for (const kube::ObjectSnapshot& member : members.store().list())
      members_controller_ptr->queue().add(kube::object_name(*member));
  };
  controller::MemberRegistry registry(
      registry_options,
      [&](const std::string& cluster, const json& pod) {
        if (job_reconciler_ptr) job_reconciler_ptr->pod_observed(cluster, pod);
        if (auto key = job_key_of_pod(pod, flags.hub_id); key && jobs_controller_ptr) {
          jobs_controller_ptr->queue().add(*key);
        }
      },
      [&](const std::string& cluster) {
        if (members_controller_ptr) members_controller_ptr->queue().add(cluster);
        if (jobs_controller_ptr && job_reconciler_ptr) {
          for (const std::string& key : job_reconciler_ptr->waiting_jobs()) {
            jobs_controller_ptr->queue().add(key);
          }
        }
      });

  kube::EventRecorder events(s.hub,
                             {.component = "tessel-operator", .host = "", .instance = s.identity});

  controller::TrainingJobReconcilerOptions job_options;
  job_options.hub_id = flags.hub_id;
  job_options.stage_image = flags.stage_image;
  job_options.data_root = flags.data_root;
  job_options.stage_service_address = flags.stage_service_advertise;
  job_options.ca_pem = s.ca_pem;
  job_options.status_interval =
      std::chrono::milliseconds(static_cast<int64_t>(flags.status_interval_s * 1000));
  job_options.logger = s.logger;
  job_options.on_placement = [&s](bool placed, double seconds) {
    s.metrics.placements_total.inc({placed ? "placed" : "unschedulable"});
    if (placed) s.metrics.placement_seconds.observe({}, seconds);
  };
  job_options.on_progress = [&s](const std::string& key, const controller::JobProgress* progress) {
    const auto slash = key.find('/');
    const std::string ns = key.substr(0, slash), name = key.substr(slash + 1);
    if (!progress) {
      s.metrics.forget_job(ns, name);
    } else if (progress->step >= 0) {
      s.metrics.set_job_progress(ns, name, double(progress->step), progress->loss,
                                 progress->tokens_per_s);
    }
  };
  controller::TrainingJobReconciler job_reconciler(s.hub, s.jobs_resource, jobs.store(), registry,
                                                   channel, events, job_options);
  job_reconciler_ptr = &job_reconciler;

  controller::MemberClusterReconcilerOptions member_options;
  member_options.resync =
      std::chrono::milliseconds(static_cast<int64_t>(flags.member_resync_s * 1000));
  member_options.logger = s.logger;
  controller::MemberClusterReconciler member_reconciler(s.hub, s.members_resource, members.store(),
                                                        secrets.store(), registry, events,
                                                        member_options);

  kube::ControllerOptions job_controller_options;
  job_controller_options.name = "trainingjob";
  job_controller_options.workers = flags.workers;
  job_controller_options.logger = s.logger;
  kube::Controller jobs_controller(
      timed("trainingjob", s.metrics, jobs_controller_ptr,
            [&](const std::string& key) { return job_reconciler.reconcile(key); }),
      std::move(job_controller_options));
  jobs_controller_ptr = &jobs_controller;
  // Its own status writes (every progress update) do not bring a job back: it requeues itself.
  jobs_controller.watch(jobs, kube::not_only_status_changed);

  kube::ControllerOptions member_controller_options;
  member_controller_options.name = "membercluster";
  member_controller_options.workers = 2;
  member_controller_options.logger = s.logger;
  kube::Controller members_controller(
      timed("membercluster", s.metrics, members_controller_ptr,
            [&](const std::string& key) { return member_reconciler.reconcile(key); }),
      std::move(member_controller_options));
  members_controller_ptr = &members_controller;
  members_controller.watch(members);
  // A kubeconfig Secret changing reconnects the MemberClusters that name it.
  members_controller.watch(secrets, [&members](const json& secret) {
    return controller::members_using_secret(members.store(), secret);
  });

  jobs.start();
  members.start();
  secrets.start();
  std::jthread members_thread([&](std::stop_token t) { members_controller.run(t); });
  std::jthread jobs_thread([&](std::stop_token t) { jobs_controller.run(t); });
  if (jobs.wait_for_sync(stop) && members.wait_for_sync(stop) && secrets.wait_for_sync(stop)) {
    s.readiness.set_ready();
    s.logger->info("controllers started", {{"identity", s.identity}});
  }
  std::mutex mutex;
  std::condition_variable_any wake;
  std::unique_lock lock(mutex);
  wake.wait(lock, stop, [] { return false; });

  s.readiness.set_not_ready("stopping");
  // The label goes first: the Service stops sending stage pods here before the service closes.
  if (stage_label_thread.joinable()) {
    stage_label_thread.request_stop();
    stage_label_thread.join();
  }
  job_reconciler.cancel();
  jobs_thread.request_stop();
  members_thread.request_stop();
  jobs_thread.join();
  members_thread.join();
  jobs_controller_ptr = nullptr;
  members_controller_ptr = nullptr;
  registry.stop();
  jobs.stop();
  members.stop();
  secrets.stop();
}

}  // namespace

int run_operator(const OperatorFlags& flags, std::stop_token stop) {
  auto logger = std::make_shared<const kube::Logger>("tessel-operator", log_level(flags.log_level));
  const std::string cert = read_file(flags.tls_cert_file, "--tls-cert-file");
  const std::string key = read_file(flags.tls_key_file, "--tls-key-file");
  const std::string ca = read_file(flags.tls_ca_file, "--tls-ca-file");
  try {
    server::check_tls_key_pair(cert, key);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("--tls-cert-file/--tls-key-file: " + std::string(e.what()));
  }

  server::OperatorMetrics metrics;
  server::Readiness readiness(flags.leader_elect ? "not the leader yet" : "informers not synced");
  // Non-leaders serve the webhooks too: they are ready once the server is up.
  const auto [https_host, https_port] = split_address(flags.https_address, "--https-address");
  std::unique_ptr<server::HttpsServer> https =
      server::start_https_server(https_host, static_cast<uint16_t>(https_port), cert, key,
                                 server::operator_endpoint(metrics.registry, readiness));
  logger->info("serving HTTPS", {{"url", https->url()}});

  const kube::ClusterConfig config = kube::load_default_config(flags.kubeconfig);
  kube::ClientOptions hub_options;
  hub_options.qps = 50;
  hub_options.burst = 100;
  hub_options.user_agent = "tessel-operator";
  hub_options.field_manager = "tessel-operator";
  hub_options.logger = logger;
  hub_options.on_response = metrics.api_request_counter("hub");
  const std::shared_ptr<kube::Client> hub = kube::Client::from_config(config, hub_options);
  const kube::ResourceInfo jobs_resource = served_resource(api::trainingjob_crd());
  const kube::ResourceInfo members_resource = served_resource(api::membercluster_crd());
  hub->register_resource(jobs_resource);
  hub->register_resource(members_resource);

  // Its own client: a label left behind misroutes stage pods, but removing it must not hold up a
  // replica's exit (kLabelRequestTimeout per request, kLabelAttempts attempts).
  std::shared_ptr<kube::Client> label_client;
  std::optional<StageServiceLabel> stage_label;
  if (!flags.pod_name.empty()) {
    kube::ClientOptions label_options = hub_options;
    label_options.request_timeout = kLabelRequestTimeout;
    label_options.backoff.steps = kLabelAttempts;
    label_client = kube::Client::from_config(config, label_options);
    stage_label.emplace(
        *label_client,
        StageServiceLabelOptions{
            .namespace_name = flags.namespace_name, .pod_name = flags.pod_name, .logger = logger});
  }

  Shared shared{flags,
                logger,
                cert,
                key,
                ca,
                flags.identity.empty() ? default_identity() : flags.identity,
                metrics,
                readiness,
                *hub,
                jobs_resource,
                members_resource,
                stage_label ? &*stage_label : nullptr};

  if (!flags.leader_elect) {
    run_controllers(shared, stop);
    return 0;
  }
  readiness.set_ready();  // every replica serves the webhooks and probes, leading or not
  kube::RestLeaseClient leases(*hub);
  kube::LeaderElectionConfig election;
  election.lease_namespace = flags.namespace_name;
  election.lease_name = flags.lease_name;
  election.identity = shared.identity;
  election.lease_duration = std::chrono::seconds(flags.lease_duration_s);
  election.renew_deadline = std::chrono::seconds(flags.renew_deadline_s);
  election.retry_period = std::chrono::seconds(flags.retry_period_s);
  std::jthread controllers;
  std::atomic<bool> led{false};
  kube::LeaderElector elector(
      leases, election,
      {.on_started_leading =
           [&] {
             led = true;
             logger->info("became the leader", {{"identity", shared.identity}});
             controllers = std::jthread([&](std::stop_token t) { run_controllers(shared, t); });
           },
       .on_stopped_leading =
           [&] {
             logger->info("stopped leading", {{"identity", shared.identity}});
             controllers.request_stop();
           },
       .on_new_leader =
           [&](const std::string& leader) {
             if (leader != shared.identity) logger->info("the leader is", {{"identity", leader}});
           }});
  std::stop_callback on_stop(stop, [&] { elector.stop(); });
  elector.run();
  if (controllers.joinable()) controllers.join();
  return led && !stop.stop_requested() ? 1 : 0;
}

}  // namespace tessel::app
