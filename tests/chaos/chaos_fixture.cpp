#include "tests/chaos/chaos_fixture.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>

#include "kube/api_error.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr std::chrono::milliseconds kPollInterval{100};

const kube::ResourceInfo& pods_resource() {
  static const kube::ResourceInfo pods = *kube::ResourceRegistry().find_resource("", "pods");
  return pods;
}

bool terminal(const json& pod) {
  const std::string phase = pod.value("/status/phase"_json_pointer, std::string());
  return phase == "Succeeded" || phase == "Failed";
}

std::string label(const json& object, const std::string& key) {
  const json labels = object.value("/metadata/labels"_json_pointer, json::object());
  return labels.value(key, std::string());
}

int64_t integer_at(const json& object, const json::json_pointer& at) {
  return object.contains(at) && object[at].is_number_integer() ? object[at].get<int64_t>() : -1;
}

}  // namespace

// --- PodWatch -----------------------------------------------------------------------------------

PodWatch::PodWatch(std::vector<std::shared_ptr<kube::Client>> members, std::string pod_namespace)
    : members_(std::move(members)), namespace_(std::move(pod_namespace)) {
  thread_ = std::jthread([this](std::stop_token stop) {
    while (!stop.stop_requested()) {
      poll();
      std::this_thread::sleep_for(kPollInterval);
    }
  });
}

PodWatch::~PodWatch() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

void PodWatch::poll() {
  // tasklet -> the live pods of it, "<member>/<pod>" each, over every member.
  std::map<std::string, std::vector<std::string>> live;
  kube::ListOptions options;
  options.label_selector = "tessel.dev/stage";  // the stage pods of every job of the run
  for (size_t m = 0; m < members_.size(); ++m) {
    json list;
    try {
      list = members_[m]->list(pods_resource(), namespace_, options);
    } catch (const std::exception&) {
      return;  // an injected fault: this poll sees nothing
    }
    for (const json& pod : list.value("items", json::array())) {
      if (terminal(pod)) continue;
      const std::string tasklet = label(pod, "tessel.dev/job-uid") + " stage " +
                                  label(pod, "tessel.dev/stage") + " replica " +
                                  label(pod, "tessel.dev/replica");
      live[tasklet].push_back("member " + std::to_string(m) + ": " +
                              pod["metadata"].value("name", "") + " (uid " +
                              pod["metadata"].value("uid", "") + ")");
    }
  }
  ++polls_;
  std::lock_guard lock(mutex_);
  for (const auto& [tasklet, pods] : live) {
    if (pods.size() < 2) continue;
    std::string report = tasklet + ":";
    for (const std::string& pod : pods) report += " " + pod;
    reports_.push_back(report);
  }
}

int PodWatch::duplicates() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(reports_.size());
}

std::vector<std::string> PodWatch::duplicate_reports() const {
  std::lock_guard lock(mutex_);
  return reports_;
}

// --- JobWatch -----------------------------------------------------------------------------------

JobWatch::JobWatch(std::shared_ptr<kube::Client> hub, std::string job_namespace, std::string name)
    : hub_(std::move(hub)),
      jobs_(hub_->resource_for("tessel.dev/v1alpha1", "TrainingJob")),
      namespace_(std::move(job_namespace)),
      name_(std::move(name)) {
  thread_ = std::jthread([this](std::stop_token stop) {
    while (!stop.stop_requested()) {
      try {
        const json job = hub_->get(jobs_, namespace_, name_);
        JobSample sample;
        sample.at = std::chrono::steady_clock::now();
        sample.status = job.value("status", json::object());
        sample.phase = sample.status.value("phase", "");
        sample.restarts = std::max<int64_t>(0, integer_at(sample.status, "/restarts"_json_pointer));
        sample.resizes = std::max<int64_t>(0, integer_at(sample.status, "/resizes"_json_pointer));
        sample.replicas = integer_at(sample.status, "/replicas"_json_pointer);
        const json loss = sample.status.value("/progress/loss"_json_pointer, json());
        if (loss.is_number()) sample.loss = loss.get<double>();
        sample.step = integer_at(sample.status, "/progress/step"_json_pointer);
        sample.checkpoint = integer_at(sample.status, "/progress/lastCheckpointStep"_json_pointer);
        sample.updated = sample.status.value("/progress/updatedAt"_json_pointer, std::string());
        std::lock_guard lock(mutex_);
        samples_.push_back(std::move(sample));
      } catch (const std::exception&) {
        // Not there yet, gone, or an injected fault: the next poll tries again.
      }
      std::this_thread::sleep_for(kPollInterval);
    }
  });
}

JobWatch::~JobWatch() {
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

std::vector<JobSample> JobWatch::samples() const {
  std::lock_guard lock(mutex_);
  return samples_;
}

std::optional<JobSample> JobWatch::latest() const {
  std::lock_guard lock(mutex_);
  if (samples_.empty()) return std::nullopt;
  return samples_.back();
}

std::string condition_field(const json& status, const std::string& type, const std::string& field) {
  for (const json& condition : status.value("conditions", json::array()))
    if (condition.value("type", "") == type) return condition.value(field, "");
  return "";
}

// --- recovery_after -----------------------------------------------------------------------------

Recovery recovery_after(const std::vector<JobSample>& samples, SteadyTime fault,
                        int64_t attempt_before) {
  Recovery r;
  for (const JobSample& s : samples) {
    if (s.at >= fault || s.attempt() != attempt_before) continue;
    r.last_step = std::max(r.last_step, s.step);
    r.last_checkpoint = std::max(r.last_checkpoint, s.checkpoint);
  }
  // The restart keeps the old attempt's status.progress until the new attempt's stages have all
  // started and their first progress is written: the first progress of a later attempt that
  // differs from that copy is the new one, and its checkpoint step is the one resumed from.
  std::optional<json> copied;
  bool resumed = false;
  for (const JobSample& s : samples) {
    if (s.at < fault) continue;
    if (s.phase == "Failed") {
      r.failure = condition_field(s.status, "Failed", "reason") + ": " +
                  condition_field(s.status, "Failed", "message");
      return r;
    }
    if (s.attempt() <= attempt_before) continue;
    const json progress = s.status.value("progress", json::object());
    if (!copied) {
      copied = progress;
      continue;
    }
    if (!resumed) {
      if (progress == *copied || s.step < 0) continue;
      resumed = true;
      // No checkpoint step: the stages started afresh, from step 0.
      r.resumed_from = std::max<int64_t>(0, s.checkpoint);
    }
    if (s.phase == "Running" && s.step > r.resumed_from) {
      r.recovered = true;
      r.recover_s = std::chrono::duration<double>(s.at - fault).count();
      return r;
    }
  }
  return r;
}

// --- ChaosE2e -----------------------------------------------------------------------------------

void ChaosE2e::SetUp() {
  OperatorE2e::SetUp();
  if (IsSkipped() || HasFatalFailure()) return;
  restarter_ = std::jthread([this](std::stop_token stop) { restart_exited_operators(stop); });
  // A client of its own: the proxy asks from its own thread.
  stage_service_.set_upstream(
      [this, hub = federation_->hub().client()] { return serving_stage_port(*hub); });
}

int ChaosE2e::serving_stage_port(kube::Client& hub) {
  kube::ListOptions options;
  options.label_selector = "tessel.dev/stage-service=serving";
  const json pods = hub.list(pods_resource(), federation_->namespace_name(), options);
  std::lock_guard lock(operators_mutex_);
  for (const json& pod : pods.value("items", json::array()))
    for (const auto& replica : operators_)
      if (replica->settings().identity == pod["metadata"].value("name", ""))
        return replica->stage_port();
  return -1;
}

void ChaosE2e::restart_exited_operators(std::stop_token stop) {
  while (!stop.stop_requested()) {
    {
      std::lock_guard lock(operators_mutex_);
      for (size_t i = 0; i < operators_.size(); ++i) {
        if (operators_[i]->running()) continue;
        ++operator_exits_;
        try {
          restart_operator(i);
        } catch (const std::exception& error) {
          restart_errors_.push_back(error.what());
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void ChaosE2e::kill_and_restart_operator(size_t index) {
  std::lock_guard lock(operators_mutex_);
  restart_operator(index);
}

void ChaosE2e::signal_operator(size_t index, int signal) {
  std::lock_guard lock(operators_mutex_);
  operators_.at(index)->send_signal(signal);
}

void ChaosE2e::start_follower(const std::string& replica) {
  std::lock_guard lock(operators_mutex_);
  start_operator(replica);
}

void ChaosE2e::TearDown() {
  stage_service_.set_upstream({});
  if (restarter_.joinable()) {
    restarter_.request_stop();
    restarter_.join();
  }
  for (const std::string& error : restart_errors_)
    ADD_FAILURE() << "restarting an operator replica that had exited: " << error;
  job_watch_.reset();
  if (pod_watch_) {
    for (const std::string& report : pod_watch_->duplicate_reports())
      ADD_FAILURE() << "two live pods of one tasklet: " << report;
    pod_watch_.reset();
  }
  OperatorE2e::TearDown();
}

std::string ChaosE2e::apply_chaos_job(const std::string& name, int steps, int max_restarts,
                                      const std::function<void(json&)>& edit) {
  const std::string checkpoints = work_dir_ + "/checkpoints-" + name;
  kubectl_ok({"apply", "-f", example_job(name, steps, [&](json& job) {
                job["spec"]["checkpoint"]["intervalSteps"] = kCheckpointInterval;
                job["spec"]["checkpoint"]["keep"] = 3;
                job["spec"]["checkpoint"]["path"] = checkpoints;
                // Mounted at its own path, so that job.json's path is the same in the pod and on
                // the node (suspend case of the operator e2e).
                job["spec"]["template"]["volumes"] = {
                    {{"name", "checkpoints"},
                     {"hostPath", {{"path", checkpoints}, {"type", "DirectoryOrCreate"}}}}};
                job["spec"]["template"]["volumeMounts"] = {
                    {{"name", "checkpoints"}, {"mountPath", checkpoints}}};
                job["spec"]["failurePolicy"] = {{"maxRestarts", max_restarts},
                                                {"backoffSeconds", 1},
                                                {"startTimeoutSeconds", 20}};
                job["spec"]["network"]["ioTimeoutSeconds"] = kChaosIoTimeoutSeconds;
                if (edit) edit(job);
              })});
  return checkpoints;
}

void ChaosE2e::watch_pods() {
  if (pod_watch_) return;
  std::vector<std::shared_ptr<kube::Client>> members;
  for (int m = 0; m < federation_->member_count(); ++m)
    members.push_back(federation_->member(m).client());
  pod_watch_ = std::make_unique<PodWatch>(std::move(members), federation_->namespace_name());
}

int ChaosE2e::leader() {
  kube::Client& hub = federation_->hub().admin();
  const json leases =
      hub.list(hub.resource_for("coordination.k8s.io/v1", "Lease"), federation_->namespace_name());
  std::lock_guard lock(operators_mutex_);
  for (const json& lease : leases.value("items", json::array())) {
    const std::string holder = lease.value("/spec/holderIdentity"_json_pointer, std::string());
    for (size_t i = 0; i < operators_.size(); ++i)
      if (operators_[i]->settings().identity == holder) return static_cast<int>(i);
  }
  return -1;
}

void ChaosE2e::watch(const std::string& name) {
  watch_pods();
  job_watch_ =
      std::make_unique<JobWatch>(federation_->hub().client(), federation_->namespace_name(), name);
}

JobSample ChaosE2e::wait_for_step(const std::string& name, int64_t step) {
  JobSample seen;
  const bool reached = wait_for(
      [&] {
        const json job = trainingjob(name);
        seen.status = job.value("status", json::object());
        seen.phase = seen.status.value("phase", "");
        seen.step = integer_at(seen.status, "/progress/step"_json_pointer);
        seen.restarts = std::max<int64_t>(0, integer_at(seen.status, "/restarts"_json_pointer));
        seen.resizes = std::max<int64_t>(0, integer_at(seen.status, "/resizes"_json_pointer));
        seen.replicas = integer_at(seen.status, "/replicas"_json_pointer);
        seen.checkpoint = integer_at(seen.status, "/progress/lastCheckpointStep"_json_pointer);
        return seen.phase == "Running" && seen.step >= step;
      },
      kChaosTimeout);
  EXPECT_TRUE(reached) << "TrainingJob " << name << " did not run to step " << step << " within "
                       << kChaosTimeout.count() << " s; last status: " << seen.status.dump();
  return seen;
}

ChaosE2e::StagePod ChaosE2e::running_stage_pod(const std::string& name, int rank) {
  for (int m = 0; m < federation_->member_count(); ++m)
    for (const json& pod : pods_in(m, std::string(kJobLabel) + "=" + name)) {
      if (pod.value("/status/phase"_json_pointer, std::string()) != "Running") continue;
      if (pod["metadata"].contains("deletionTimestamp")) continue;
      const std::string rank_text = label(pod, "tessel.dev/rank");
      if (rank_text.empty() || (rank >= 0 && std::stoi(rank_text) != rank)) continue;
      return {m, pod["metadata"].value("name", ""), pod["spec"].value("nodeName", ""),
              std::stoi(rank_text)};
    }
  ADD_FAILURE() << "no Running stage pod of " << name
                << (rank >= 0 ? " for rank " + std::to_string(rank) : std::string());
  return {};
}

int ChaosE2e::stage_pid(const StagePod& pod) {
  if (pod.member < 0) return -1;
  const fs::path directory = fs::weakly_canonical(
      fleet_->kubelet(pod.member).pod_directory(federation_->namespace_name(), pod.name));
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/proc", error)) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code ignored;
    const fs::path exe = fs::read_symlink(entry.path() / "exe", ignored);
    if (ignored || exe.filename() != "tessel-stage") continue;
    const fs::path cwd = fs::read_symlink(entry.path() / "cwd", ignored);
    if (ignored) continue;
    // Its working directory is the pod's directory, or a folder under it (workingDir).
    const std::string under = cwd.string();
    if (under == directory.string() || under.rfind(directory.string() + "/", 0) == 0)
      return std::stoi(pid);
  }
  return -1;
}

int ChaosE2e::delete_and_count_leftovers(const std::string& name) {
  const json job = trainingjob(name);
  if (job.is_null()) return 0;
  const std::string uid = job["metadata"]["uid"];
  kubectl_ok({"delete", "trainingjob", name, "--wait=false"});
  std::vector<std::string> left;
  const bool clean = wait_for(
      [&] {
        left = leftovers(uid);
        return left.empty() && trainingjob(name).is_null();
      },
      std::chrono::seconds(60));
  EXPECT_TRUE(clean) << "left of " << name
                     << " after its deletion: " << ::testing::PrintToString(left);
  return static_cast<int>(left.size());
}

int ChaosE2e::duplicates_seen() { return pod_watch_ ? pod_watch_->duplicates() : 0; }

ChaosResult ChaosE2e::finish_restart_case(const std::string& case_name,
                                          const std::string& fault_text, const std::string& job,
                                          SteadyTime fault, int64_t attempt_before, int64_t bound) {
  ChaosResult row;
  row.case_name = case_name;
  row.fault = fault_text;
  Recovery r;
  const bool settled = wait_for(
      [&] {
        r = recovery_after(job_watch_->samples(), fault, attempt_before);
        return r.recovered || !r.failure.empty();
      },
      kChaosTimeout);
  EXPECT_TRUE(settled) << job << " neither recovered nor failed within " << kChaosTimeout.count()
                       << " s of the fault; last status: "
                       << (job_watch_->latest() ? job_watch_->latest()->status.dump() : "none");
  row.outcome = r.recovered ? "recovered" : "failed: " + r.failure;
  row.last_step = r.last_step;
  row.resumed_from = r.resumed_from;
  // The status trails the stages: they may have checkpointed a step newer than it showed.
  row.steps_lost = r.resumed_from >= 0 && r.last_step >= 0
                       ? std::max<int64_t>(0, r.last_step - r.resumed_from)
                       : -1;
  row.bound = bound;
  row.recover_s = r.recover_s;
  EXPECT_TRUE(r.recovered) << job << ": " << row.outcome;
  if (r.recovered) {
    EXPECT_LE(row.steps_lost, bound)
        << job << " resumed from step " << r.resumed_from << " after step " << r.last_step;
    // Never from a checkpoint older than the newest one made before the fault, less what the
    // bound allows beyond one interval (a corrupted newest checkpoint).
    EXPECT_GE(r.resumed_from, r.last_checkpoint - (bound - kCheckpointInterval))
        << job << " had a checkpoint of step " << r.last_checkpoint << " before the fault";
  }
  // The job ends as it should after the restart, then goes without a trace.
  const json done = wait_for_phase(job, "Succeeded", kChaosTimeout);
  EXPECT_EQ(done.value("/status/progress/step"_json_pointer, int64_t{-1}),
            done.value("/spec/training/steps"_json_pointer, int64_t{-2}))
      << done.value("status", json::object()).dump();
  row.leaked = delete_and_count_leftovers(job);
  row.duplicates = duplicates_seen();
  EXPECT_EQ(row.leaked, 0);
  EXPECT_EQ(row.duplicates, 0);
  record_result(row);
  return row;
}

}  // namespace tessel::testing
