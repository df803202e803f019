// One Pod on a node of the process kubelet, from first sight to removal, on a thread of its own
// (the kubelet's pod worker):
//   - writes status Pending (containers waiting ContainerCreating), sets up the volumes, then
//     starts the init containers one after the other and, once they all succeeded, the app
//     containers;
//   - restarts exited containers as restartPolicy says (Always; OnFailure on a non-zero exit;
//     init containers unless Never) after the kubelet's back-off: the first restart at once,
//     then `initial`, doubling up to `cap`, the container waiting in CrashLoopBackOff meanwhile;
//   - writes the pod status (strategic merge patch of pods/<name>/status) whenever it changes;
//   - on graceful deletion (deletionTimestamp set) stops starting containers, sends SIGTERM to
//     every process group (SIGKILL at once for a grace period of 0), SIGKILL once the grace
//     period (counted from when it saw the deletion, as the kubelet does) has passed, writes the
//     final status (containers are not restarted while terminating, so the phase ends
//     Succeeded when every container exited 0, else Failed) and deletes the pod with
//     gracePeriodSeconds=0 and its uid as precondition;
//   - when the pod disappears from the API (force deletion), kills its processes at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kube/client.h"
#include "kube/log.h"
#include "tests/support/process_kubelet_container_setup.h"
#include "tests/support/process_kubelet_pod_status.h"
#include "tests/support/process_kubelet_process.h"

namespace tessel::testing {

// What every pod worker of a kubelet shares.
struct PodWorkerSettings {
  kube::Client* client = nullptr;  // outlives the worker
  std::string address;             // the node's InternalIP: status.hostIP and status.podIP
  std::string network_namespace;   // the node's; empty: the host's network (ProcessSpec)
  std::string node_root;           // the node's file system: where its hostPath volumes lie
  std::map<std::string, std::string> image_entrypoints;
  std::vector<std::pair<std::string, std::string>> base_environment;
  std::chrono::milliseconds restart_backoff_initial{10'000};
  std::chrono::milliseconds restart_backoff_cap{300'000};
  // Before trying again after a failed API request, a missing ConfigMap or Secret, a volume
  // that could not be set up.
  std::chrono::milliseconds retry_interval{1'000};
  std::shared_ptr<const kube::Logger> logger;
};

// The node's admission decision for the pod.
struct PodAdmission {
  bool admitted = true;
  std::string reason;                    // when rejected: OutOfnvidia.com/gpu, ...
  std::string message;                   // when rejected: "Pod was rejected: ..."
  std::vector<std::string> gpu_devices;  // the GPUs the pod was given
};

class PodWorker {
 public:
  // Starts the thread. `pod_dir` (emptied first) receives the volumes, the container roots
  // and the logs. on_released runs once, on the worker's thread, when the pod stops holding
  // its GPUs: it reached Succeeded or Failed, or its containers are gone for good.
  PodWorker(PodWorkerSettings settings, nlohmann::json pod, std::string pod_dir,
            PodAdmission admission, std::function<void()> on_released);
  // shutdown(), then waits for the thread.
  ~PodWorker();
  PodWorker(const PodWorker&) = delete;
  PodWorker& operator=(const PodWorker&) = delete;

  // A newer state of the pod, from the informer.
  void update(nlohmann::json pod);
  // The pod is gone from the API: its processes are killed at once.
  void removed();
  // The kubelet stops, or its node failed: processes are killed at once and nothing more is
  // written to the API.
  void shutdown();
  // The thread has returned (its processes are gone).
  bool finished() const;
  const std::string& uid() const { return uid_; }

 private:
  using SteadyTime = std::chrono::steady_clock::time_point;

  struct Container {
    nlohmann::json spec;
    bool init = false;
    ContainerView view;
    std::unique_ptr<ContainerProcess> process;
    std::vector<std::string> gpu_devices;
    int runs = 0;                                  // processes started (or failed to start)
    std::optional<ContainerTermination> last_run;  // how the latest run ended
    SteadyTime next_start{};                       // no (re)start before this
    bool done = false;                             // will not start again
  };

  struct Inbox {
    std::optional<nlohmann::json> pod;
    bool removed = false;
    bool shutdown = false;
  };

  void run();
  Inbox wait_for_work(SteadyTime deadline);
  void notify();

  // The containers that may start now or once their back-off ends: the first init container
  // that has not succeeded, else every app container that is not done.
  std::vector<Container*> startable();
  void start_due_containers();
  void start_container(Container& container);
  void run_ended(Container& container, const ContainerTermination& termination);
  void collect_exits();
  void terminate();
  bool processes_running() const;
  void kill_all();

  bool prepare_volumes_once();
  nlohmann::json build_status();
  void write_status();
  bool delete_pod();
  void release();
  SteadyTime next_wake();
  ObjectReader object_reader() const;
  TokenIssuer token_issuer() const;
  std::string restart_policy() const;
  std::string new_container_id();

  const PodWorkerSettings settings_;
  const std::string uid_;
  const std::string key_;
  const std::string pod_dir_;
  const PodAdmission admission_;
  const std::function<void()> on_released_;
  const kube::Logger log_;
  const kube::ResourceInfo pods_;

  // The inbox, shared with the informer's thread and the process waiters.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  Inbox inbox_;
  bool pending_ = false;
  bool finished_ = false;

  // Owned by the worker's thread.
  nlohmann::json pod_;
  std::vector<Container> containers_;  // init containers first
  std::string start_time_;
  bool volumes_ready_ = false;
  bool gone_ = false;  // the API answered 404 for the pod
  bool terminating_ = false;
  bool killed_ = false;
  std::int64_t observed_grace_ = 0;
  SteadyTime kill_deadline_{};
  std::optional<SteadyTime> retry_at_;
  std::string terminal_phase_;
  nlohmann::json conditions_ = nlohmann::json::array();
  nlohmann::json written_status_ = nlohmann::json::object();
  bool released_ = false;
  std::mt19937_64 random_;

  std::thread thread_;  // last: starts once everything above is initialised
};

}  // namespace tessel::testing
