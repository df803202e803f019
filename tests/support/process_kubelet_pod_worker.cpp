#include "tests/support/process_kubelet_pod_worker.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "kube/api_error.h"
#include "kube/object.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using State = ContainerView::State;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr const char* kNeverStarted = "1970-01-01T00:00:00Z";  // startedAt of a StartError
constexpr int kStartErrorExitCode = 128;                       // as containerd reports it
constexpr std::int64_t kDefaultGracePeriodSeconds = 30;

std::string now_rfc3339() { return kube::format_rfc3339(std::chrono::system_clock::now()); }

// Go's time.Duration.String() for whole milliseconds: "50ms", "10s", "1m20s", "5m0s".
std::string go_duration(milliseconds duration) {
  const long long total = duration.count();
  if (total < 1000) return std::to_string(total) + "ms";
  const long long hours = total / 3'600'000;
  const long long minutes = total / 60'000 % 60;
  const long long millis = total % 60'000;
  std::string out;
  if (hours > 0) out += std::to_string(hours) + "h";
  if (hours > 0 || minutes > 0) out += std::to_string(minutes) + "m";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%lld.%03lld", millis / 1000, millis % 1000);
  std::string text = seconds;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return out + text + "s";
}

// The kubelet's restart back-off: the first restart at once, then initial, doubling to cap.
milliseconds restart_delay(int runs, milliseconds initial, milliseconds cap) {
  if (runs <= 1) return milliseconds::zero();
  milliseconds delay = initial;
  for (int i = 2; i < runs && delay < cap; ++i) delay *= 2;
  return std::min(delay, cap);
}

// The keys of `old_condition` missing from `condition`, as nulls: a strategic merge patch
// merges conditions by type, so a field that is no longer wanted must be deleted explicitly
// (as the kubelet's two-way merge patch does).
void null_removed_fields(json& condition, const json& old_conditions) {
  if (!old_conditions.is_array()) return;
  for (const json& old : old_conditions) {
    if (!old.is_object() || old.value("type", "") != condition.value("type", "")) continue;
    for (const auto& [key, value] : old.items()) {
      if (!condition.contains(key)) condition[key] = nullptr;
    }
  }
}

}  // namespace

PodWorker::PodWorker(PodWorkerSettings settings, json pod, std::string pod_dir,
                     PodAdmission admission, std::function<void()> on_released)
    : settings_(std::move(settings)),
      uid_(kube::object_uid(pod)),
      key_(kube::object_key(pod)),
      pod_dir_(std::move(pod_dir)),
      admission_(std::move(admission)),
      on_released_(std::move(on_released)),
      log_((settings_.logger ? *settings_.logger : kube::Logger("process-kubelet"))
               .with({{"pod", key_}, {"uid", uid_}})),
      pods_(settings_.client->resource_for("v1", "Pod")),
      pending_(true),
      pod_(std::move(pod)),
      random_(std::random_device{}()) {
  const json spec = pod_.value("spec", json::object());
  const bool has_init = spec.contains("initContainers") && !spec["initContainers"].empty();
  std::size_t next_device = 0;
  for (const char* field : {"initContainers", "containers"}) {
    if (!spec.contains(field) || !spec[field].is_array()) continue;
    for (const json& container_spec : spec[field]) {
      Container container;
      container.spec = container_spec;
      container.init = std::string(field) == "initContainers";
      container.view.name = container_spec.value("name", "");
      container.view.image = container_spec.value("image", "");
      container.view.waiting_reason = has_init ? "PodInitializing" : "ContainerCreating";
      // Each app container gets its own slice of the pod's GPUs; init containers run alone,
      // so each may take from the start.
      // Admission has parsed the requests already: an admitted pod's are whole numbers.
      const std::int64_t gpus = admission_.admitted ? container_gpu_request(container_spec) : 0;
      std::size_t first = container.init ? 0 : next_device;
      for (std::int64_t i = 0; i < gpus && first < admission_.gpu_devices.size(); ++i) {
        container.gpu_devices.push_back(admission_.gpu_devices[first++]);
      }
      if (!container.init) next_device = first;
      containers_.push_back(std::move(container));
    }
  }
  thread_ = std::thread([this] { run(); });
}

PodWorker::~PodWorker() {
  shutdown();
  if (thread_.joinable()) thread_.join();
}

void PodWorker::update(json pod) {
  std::lock_guard lock(mutex_);
  inbox_.pod = std::move(pod);
  pending_ = true;
  wake_.notify_one();
}

void PodWorker::removed() {
  std::lock_guard lock(mutex_);
  inbox_.removed = true;
  pending_ = true;
  wake_.notify_one();
}

void PodWorker::shutdown() {
  std::lock_guard lock(mutex_);
  inbox_.shutdown = true;
  pending_ = true;
  wake_.notify_one();
}

bool PodWorker::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

void PodWorker::notify() {
  std::lock_guard lock(mutex_);
  pending_ = true;
  wake_.notify_one();
}

PodWorker::Inbox PodWorker::wait_for_work(SteadyTime deadline) {
  std::unique_lock lock(mutex_);
  if (deadline == SteadyTime::max()) {
    wake_.wait(lock, [&] { return pending_; });
  } else {
    wake_.wait_until(lock, deadline, [&] { return pending_; });
  }
  pending_ = false;
  Inbox inbox = std::move(inbox_);
  inbox_ = Inbox{};
  return inbox;
}

void PodWorker::run() {
  try {
    std::filesystem::remove_all(pod_dir_);
    std::filesystem::create_directories(pod_dir_);
  } catch (const std::exception& error) {
    log_.error("cannot create the pod directory", {{"dir", pod_dir_}, {"error", error.what()}});
  }
  start_time_ = now_rfc3339();
  bool first = true;
  while (true) {
    const Inbox inbox = wait_for_work(next_wake());
    if (inbox.shutdown) break;
    if (inbox.pod) pod_ = *inbox.pod;
    try {
      // Pending, containers waiting: what the kubelet reports before it starts them.
      if (std::exchange(first, false)) write_status();
      collect_exits();
      if (inbox.removed || gone_) break;
      retry_at_.reset();
      if (kube::is_being_deleted(pod_)) {
        terminate();
      } else if (admission_.admitted && terminal_phase_.empty()) {
        start_due_containers();
      }
      write_status();
      if (terminating_ && !processes_running() && delete_pod()) break;
      if (gone_) break;
    } catch (const std::exception& error) {
      log_.error("pod sync failed", {{"error", error.what()}});
      retry_at_ = steady_clock::now() + settings_.retry_interval;
    }
  }
  kill_all();
  release();
  std::lock_guard lock(mutex_);
  finished_ = true;
}

std::vector<PodWorker::Container*> PodWorker::startable() {
  std::vector<Container*> out;
  if (!volumes_ready_ || terminating_ || !terminal_phase_.empty() || !admission_.admitted) {
    return out;
  }
  for (Container& container : containers_) {
    if (!container.init) continue;
    if (container.done && container.last_run && container.last_run->exit_code == 0) continue;
    // The first init container that has not succeeded runs alone; one that failed for good
    // stops the pod.
    if (!container.done && !container.process) out.push_back(&container);
    return out;
  }
  for (Container& container : containers_) {
    if (!container.done && !container.process) out.push_back(&container);
  }
  return out;
}

void PodWorker::start_due_containers() {
  if (!prepare_volumes_once()) return;
  const SteadyTime now = steady_clock::now();
  for (Container* container : startable()) {
    if (now >= container->next_start) start_container(*container);
  }
}

void PodWorker::start_container(Container& container) {
  ContainerContext context;
  context.pod = &pod_;
  context.pod_dir = pod_dir_;
  context.addresses = {settings_.address, settings_.address};
  context.reader = object_reader();
  context.image_entrypoints = settings_.image_entrypoints;
  context.base_environment = settings_.base_environment;
  context.gpu_devices = container.gpu_devices;
  const auto config_error = [&](const std::string& message) {
    container.view.state = State::kWaiting;
    container.view.waiting_reason = "CreateContainerConfigError";
    container.view.waiting_message = message;
    container.next_start = steady_clock::now() + settings_.retry_interval;
    log_.warning("cannot configure container",
                 {{"container", container.view.name}, {"error", message}});
  };
  std::string start_error;
  try {
    ProcessSpec spec = prepare_container(container.spec, context);
    spec.network_namespace = settings_.network_namespace;
    container.process = std::make_unique<ContainerProcess>(spec, [this] { notify(); });
  } catch (const ProcessStartError& error) {
    start_error = error.what();
  } catch (const std::exception& error) {  // ContainerConfigError, API and file system errors
    config_error(error.what());
    return;
  }
  if (container.runs++ > 0) ++container.view.restart_count;
  container.view.image_id = image_id(container.view.image);
  if (!start_error.empty()) {
    log_.warning("container failed to start",
                 {{"container", container.view.name}, {"error", start_error}});
    ContainerTermination termination;
    termination.exit_code = kStartErrorExitCode;
    termination.reason = "StartError";
    termination.message = start_error;
    termination.started_at = kNeverStarted;
    termination.finished_at = now_rfc3339();
    termination.container_id = new_container_id();
    run_ended(container, termination);
    return;
  }
  container.view.state = State::kRunning;
  container.view.running_since = kube::format_rfc3339(container.process->started_at());
  container.view.container_id = new_container_id();
  container.view.last_termination = container.last_run;
  container.view.terminated.reset();
  container.view.waiting_message.clear();
  log_.info("container started",
            {{"container", container.view.name}, {"pid", container.process->pid()}});
}

void PodWorker::collect_exits() {
  for (Container& container : containers_) {
    if (!container.process) continue;
    const std::optional<ProcessExit> exit = container.process->exit_status();
    if (!exit) continue;
    ContainerTermination termination;
    termination.exit_code = exit->exit_code;
    termination.reason = exit->status_unknown ? "Unknown" : termination_reason(exit->exit_code);
    termination.started_at = kube::format_rfc3339(container.process->started_at());
    termination.finished_at = kube::format_rfc3339(exit->finished_at);
    termination.container_id = container.view.container_id;
    termination.message =
        read_termination_message(termination_message_file(container.spec, pod_dir_));
    container.process.reset();
    log_.info("container exited",
              {{"container", container.view.name}, {"exitCode", exit->exit_code}});
    run_ended(container, termination);
  }
}

void PodWorker::run_ended(Container& container, const ContainerTermination& termination) {
  container.last_run = termination;
  container.view.state = State::kTerminated;
  container.view.terminated = termination;
  container.view.container_id.clear();
  const std::string policy = restart_policy();
  bool restart = false;
  if (!terminating_) {
    restart = container.init
                  ? policy != "Never" && termination.exit_code != 0
                  : policy == "Always" || (policy == "OnFailure" && termination.exit_code != 0);
  }
  if (!restart) {
    container.done = true;
    return;
  }
  const milliseconds delay = restart_delay(container.runs, settings_.restart_backoff_initial,
                                           settings_.restart_backoff_cap);
  container.next_start = steady_clock::now() + delay;
  if (delay > milliseconds::zero()) {
    container.view.state = State::kWaiting;
    container.view.waiting_reason = "CrashLoopBackOff";
    container.view.waiting_message =
        "back-off " + go_duration(delay) + " restarting failed container=" + container.view.name +
        " pod=" + kube::object_name(pod_) + "_" + kube::object_namespace(pod_) + "(" + uid_ + ")";
    container.view.last_termination = termination;
  }
}

void PodWorker::terminate() {
  const json metadata = pod_.value("metadata", json::object());
  const std::int64_t grace =
      metadata.value("deletionGracePeriodSeconds",
                     pod_.value("spec", json::object())
                         .value("terminationGracePeriodSeconds", kDefaultGracePeriodSeconds));
  const SteadyTime now = steady_clock::now();
  if (!terminating_) {
    terminating_ = true;
    observed_grace_ = grace;
    kill_deadline_ = now + std::chrono::seconds(grace);
    for (Container& container : containers_) {
      container.done = true;
      if (container.process) container.process->signal_group(grace > 0 ? SIGTERM : SIGKILL);
    }
    log_.info("pod deleted: stopping its containers", {{"gracePeriodSeconds", grace}});
  } else if (grace < observed_grace_) {
    observed_grace_ = grace;
    kill_deadline_ = std::min(kill_deadline_, now + std::chrono::seconds(grace));
  }
  if (!killed_ && now >= kill_deadline_) {
    killed_ = true;
    for (Container& container : containers_) {
      if (container.process) container.process->signal_group(SIGKILL);
    }
  }
}

bool PodWorker::processes_running() const {
  return std::any_of(containers_.begin(), containers_.end(),
                     [](const Container& container) { return container.process != nullptr; });
}

void PodWorker::kill_all() {
  for (Container& container : containers_) container.process.reset();  // SIGKILL and reap
}

bool PodWorker::prepare_volumes_once() {
  if (volumes_ready_) return true;
  try {
    prepare_volumes(pod_, pod_dir_ + "/volumes", settings_.node_root, object_reader(),
                    token_issuer(), {settings_.address, settings_.address});
    volumes_ready_ = true;
    return true;
  } catch (const std::exception& error) {
    log_.warning("cannot set up the pod's volumes", {{"error", error.what()}});
    for (Container& container : containers_) {
      if (container.runs == 0) container.view.waiting_message = error.what();
    }
    retry_at_ = steady_clock::now() + settings_.retry_interval;
    return false;
  }
}

ObjectReader PodWorker::object_reader() const {
  kube::Client* client = settings_.client;
  return [client](const std::string& kind, const std::string& ns,
                  const std::string& name) -> std::optional<json> {
    try {
      return client->get(client->resource_for("v1", kind), ns, name);
    } catch (const kube::ApiError& error) {
      if (error.is_not_found()) return std::nullopt;
      throw;
    }
  };
}

TokenIssuer PodWorker::token_issuer() const {
  kube::Client* client = settings_.client;
  return [client](const json& pod, const std::string& audience, std::int64_t expiration_seconds) {
    json spec = {{"expirationSeconds", expiration_seconds},
                 {"boundObjectRef",
                  {{"apiVersion", "v1"},
                   {"kind", "Pod"},
                   {"name", kube::object_name(pod)},
                   {"uid", kube::object_uid(pod)}}}};
    if (!audience.empty()) spec["audiences"] = json::array({audience});
    const std::string account =
        pod.value("spec", json::object()).value("serviceAccountName", "default");
    const json answer = client->create_subresource(
        client->resource_for("v1", "ServiceAccount"), kube::object_namespace(pod), account, "token",
        {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenRequest"}, {"spec", spec}});
    const std::string token = answer.value("status", json::object()).value("token", "");
    if (token.empty()) {
      throw std::runtime_error("the TokenRequest for service account " + account +
                               " returned no token");
    }
    return token;
  };
}

json PodWorker::build_status() {
  if (!admission_.admitted) {
    return {{"phase", "Failed"}, {"reason", admission_.reason}, {"message", admission_.message}};
  }
  std::vector<ContainerView> init_views;
  std::vector<ContainerView> views;
  json init_statuses = json::array();
  json statuses = json::array();
  for (const Container& container : containers_) {
    (container.init ? init_views : views).push_back(container.view);
    (container.init ? init_statuses : statuses)
        .push_back(container_status(container.view, container.init));
  }
  std::string phase =
      pod_phase(init_views, views, terminating_ ? std::string("Never") : restart_policy());
  if (!terminal_phase_.empty()) {
    phase = terminal_phase_;  // a pod never leaves Succeeded or Failed
  } else if (phase == "Succeeded" || phase == "Failed") {
    terminal_phase_ = phase;
    release();
  }
  conditions_ = pod_conditions(init_views, views, phase, conditions_, now_rfc3339());
  json status = {{"phase", phase},
                 {"conditions", conditions_},
                 {"hostIP", settings_.address},
                 {"podIP", settings_.address},
                 {"podIPs", json::array({{{"ip", settings_.address}}})},
                 {"startTime", start_time_},
                 {"containerStatuses", statuses}};
  if (!init_statuses.empty()) status["initContainerStatuses"] = init_statuses;
  return status;
}

void PodWorker::write_status() {
  const json status = build_status();
  if (status == written_status_) return;
  json patch_status = status;
  if (patch_status.contains("conditions")) {
    const json current = pod_.value("status", json::object()).value("conditions", json::array());
    for (json& condition : patch_status["conditions"]) {
      null_removed_fields(condition, current);
      null_removed_fields(condition, written_status_.value("conditions", json::array()));
    }
  }
  try {
    settings_.client->patch(pods_, kube::object_namespace(pod_), kube::object_name(pod_),
                            kube::PatchType::kStrategicMerge, {{"status", patch_status}}, {},
                            "status");
    written_status_ = status;
  } catch (const kube::ApiError& error) {
    if (error.is_not_found()) {
      gone_ = true;
      return;
    }
    log_.warning("cannot write the pod status", {{"error", error.what()}});
    retry_at_ = steady_clock::now() + settings_.retry_interval;
  } catch (const std::exception& error) {
    log_.warning("cannot write the pod status", {{"error", error.what()}});
    retry_at_ = steady_clock::now() + settings_.retry_interval;
  }
}

bool PodWorker::delete_pod() {
  kube::DeleteOptions options;
  options.grace_period_seconds = 0;
  options.precondition_uid = uid_;
  try {
    settings_.client->remove(pods_, kube::object_namespace(pod_), kube::object_name(pod_), options);
    log_.info("pod removed after its containers stopped");
    return true;
  } catch (const kube::ApiError& error) {
    // Gone already, or a new pod of that name (the uid precondition failed).
    if (error.is_not_found() || error.code() == 409) return true;
    log_.warning("cannot delete the pod", {{"error", error.what()}});
  } catch (const std::exception& error) {
    log_.warning("cannot delete the pod", {{"error", error.what()}});
  }
  retry_at_ = steady_clock::now() + settings_.retry_interval;
  return false;
}

void PodWorker::release() {
  if (released_) return;
  released_ = true;
  if (on_released_) on_released_();
}

PodWorker::SteadyTime PodWorker::next_wake() {
  SteadyTime wake = SteadyTime::max();
  if (retry_at_) wake = std::min(wake, *retry_at_);
  if (terminating_ && !killed_) wake = std::min(wake, kill_deadline_);
  for (const Container* container : startable()) wake = std::min(wake, container->next_start);
  return wake;
}

std::string PodWorker::restart_policy() const {
  return pod_.value("spec", json::object()).value("restartPolicy", "Always");
}

std::string PodWorker::new_container_id() {
  char hex[17];
  std::string id = "containerd://";
  for (int i = 0; i < 4; ++i) {
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(random_()));
    id += hex;
  }
  return id;
}

}  // namespace tessel::testing
