// The Pod status a v1.26 kubelet writes, built from what the process kubelet knows of each
// container: the container statuses, the phase (the kubelet's getPhase) and the conditions
// Initialized, Ready, ContainersReady and PodScheduled (the kubelet's generators). Pure
// functions: the pod worker owns the state, these only shape it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::testing {

// containerStatuses[].state.terminated (and lastState.terminated).
struct ContainerTermination {
  int exit_code = 0;
  int signal = 0;      // 0: none reported
  std::string reason;  // Completed, Error, StartError, Unknown
  std::string message;
  std::string started_at;  // RFC 3339
  std::string finished_at;
  std::string container_id;
};

// "Completed" for exit code 0, else "Error", as containerd reports.
std::string termination_reason(int exit_code);

// One container as the kubelet sees it now.
struct ContainerView {
  enum class State { kWaiting, kRunning, kTerminated };

  std::string name;
  std::string image;
  std::string image_id;  // "" until it has run once
  State state = State::kWaiting;
  std::string waiting_reason = "ContainerCreating";
  std::string waiting_message;
  std::string running_since;                             // kRunning: startedAt
  std::string container_id;                              // kRunning: the current run's ID
  std::optional<ContainerTermination> terminated;        // kTerminated
  std::optional<ContainerTermination> last_termination;  // the previous run, if any
  int restart_count = 0;
};

// An app container is ready while it runs (the process kubelet runs no probes); an init
// container once it has exited with code 0.
bool container_ready(const ContainerView& container, bool init_container);

// containerStatuses[] entry: name, state, lastState, ready, restartCount, image, imageID,
// containerID (when it has one), started.
nlohmann::json container_status(const ContainerView& container, bool init_container);

// The kubelet's getPhase: Pending, Running, Succeeded or Failed.
std::string pod_phase(const std::vector<ContainerView>& init_containers,
                      const std::vector<ContainerView>& containers,
                      std::string_view restart_policy);

// Initialized, Ready, ContainersReady, PodScheduled, each with lastProbeTime null. A
// condition's lastTransitionTime is kept from `previous` (status.conditions as last written)
// while its status is unchanged, else it is `now` (RFC 3339).
nlohmann::json pod_conditions(const std::vector<ContainerView>& init_containers,
                              const std::vector<ContainerView>& containers, std::string_view phase,
                              const nlohmann::json& previous, const std::string& now);

// "docker.io/library/busybox@sha256:<64 hex>" for "busybox:1.36": the repository as a runtime
// normalises it, with a digest derived from the image reference (no image is pulled).
std::string image_id(const std::string& image);

}  // namespace tessel::testing
