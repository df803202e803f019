#include "tests/support/process_kubelet_pod_status.h"

#include <openssl/evp.h>

#include <cstdio>

namespace tessel::testing {
namespace {

using nlohmann::json;
using State = ContainerView::State;

json termination_json(const ContainerTermination& termination) {
  json out = {{"exitCode", termination.exit_code},
              {"reason", termination.reason},
              {"startedAt", termination.started_at},
              {"finishedAt", termination.finished_at}};
  if (termination.signal != 0) out["signal"] = termination.signal;
  if (!termination.message.empty()) out["message"] = termination.message;
  if (!termination.container_id.empty()) out["containerID"] = termination.container_id;
  return out;
}

// Go's fmt "%s" of a []string: "[a b]".
std::string go_list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? " " : "") + names[i];
  return out + "]";
}

json condition(const std::string& type, bool status, const std::string& reason = "",
               const std::string& message = "") {
  json out = {{"type", type}, {"status", status ? "True" : "False"}, {"lastProbeTime", nullptr}};
  if (!reason.empty()) out["reason"] = reason;
  if (!message.empty()) out["message"] = message;
  return out;
}

// The ContainersReady / Ready condition of the kubelet's GenerateContainersReadyCondition.
json readiness_condition(const std::string& type, const std::vector<ContainerView>& containers,
                         std::string_view phase) {
  if (phase == "Succeeded") return condition(type, false, "PodCompleted");
  std::vector<std::string> unready;
  for (const ContainerView& container : containers) {
    if (!container_ready(container, false)) unready.push_back(container.name);
  }
  if (unready.empty()) return condition(type, true);
  return condition(type, false, "ContainersNotReady",
                   "containers with unready status: " + go_list(unready));
}

json initialized_condition(const std::vector<ContainerView>& init_containers,
                           std::string_view phase) {
  std::vector<std::string> incomplete;
  for (const ContainerView& container : init_containers) {
    if (!container_ready(container, true)) incomplete.push_back(container.name);
  }
  if (incomplete.empty()) {
    return condition("Initialized", true, phase == "Succeeded" ? "PodCompleted" : "");
  }
  return condition("Initialized", false, "ContainersNotInitialized",
                   "containers with incomplete status: " + go_list(incomplete));
}

std::string sha256_hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  char byte[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(byte, sizeof byte, "%02x", digest[i]);
    hex += byte;
  }
  return hex;
}

}  // namespace

std::string termination_reason(int exit_code) { return exit_code == 0 ? "Completed" : "Error"; }

bool container_ready(const ContainerView& container, bool init_container) {
  if (init_container) {
    return container.state == State::kTerminated && container.terminated &&
           container.terminated->exit_code == 0;
  }
  return container.state == State::kRunning;
}

json container_status(const ContainerView& container, bool init_container) {
  json state;
  switch (container.state) {
    case State::kWaiting:
      state["waiting"] = {{"reason", container.waiting_reason}};
      if (!container.waiting_message.empty()) {
        state["waiting"]["message"] = container.waiting_message;
      }
      break;
    case State::kRunning:
      state["running"] = {{"startedAt", container.running_since}};
      break;
    case State::kTerminated:
      state["terminated"] = termination_json(*container.terminated);
      break;
  }
  json out = {{"name", container.name},
              {"state", state},
              {"lastState", json::object()},
              {"ready", container_ready(container, init_container)},
              {"restartCount", container.restart_count},
              {"image", container.image},
              {"imageID", container.image_id},
              {"started", container.state == State::kRunning}};
  if (container.last_termination) {
    out["lastState"]["terminated"] = termination_json(*container.last_termination);
  }
  if (container.state == State::kRunning) {
    out["containerID"] = container.container_id;
  } else if (container.state == State::kTerminated && !container.terminated->container_id.empty()) {
    out["containerID"] = container.terminated->container_id;
  }
  return out;
}

std::string pod_phase(const std::vector<ContainerView>& init_containers,
                      const std::vector<ContainerView>& containers,
                      std::string_view restart_policy) {
  int pending_initialization = 0;
  int failed_initialization = 0;
  for (const ContainerView& container : init_containers) {
    switch (container.state) {
      case State::kRunning:
        ++pending_initialization;
        break;
      case State::kTerminated:
        if (container.terminated->exit_code != 0) ++failed_initialization;
        break;
      case State::kWaiting:
        if (!container.last_termination) {
          ++pending_initialization;
        } else if (container.last_termination->exit_code != 0) {
          ++failed_initialization;
        }
        break;
    }
  }
  int running = 0;
  int waiting = 0;
  int stopped = 0;
  int succeeded = 0;
  for (const ContainerView& container : containers) {
    switch (container.state) {
      case State::kRunning:
        ++running;
        break;
      case State::kTerminated:
        ++stopped;
        if (container.terminated->exit_code == 0) ++succeeded;
        break;
      case State::kWaiting:
        if (container.last_termination) {
          ++stopped;
        } else {
          ++waiting;
        }
        break;
    }
  }
  if (failed_initialization > 0 && restart_policy == "Never") return "Failed";
  if (pending_initialization > 0 || waiting > 0) return "Pending";
  if (running > 0) return "Running";
  if (stopped > 0) {
    if (restart_policy == "Always") return "Running";
    if (stopped == succeeded) return "Succeeded";
    if (restart_policy == "Never") return "Failed";
    return "Running";  // OnFailure: the failed containers restart
  }
  return "Pending";
}

json pod_conditions(const std::vector<ContainerView>& init_containers,
                    const std::vector<ContainerView>& containers, std::string_view phase,
                    const json& previous, const std::string& now) {
  json conditions = json::array({initialized_condition(init_containers, phase),
                                 readiness_condition("Ready", containers, phase),
                                 readiness_condition("ContainersReady", containers, phase),
                                 condition("PodScheduled", true)});
  for (json& entry : conditions) {
    entry["lastTransitionTime"] = now;
    if (!previous.is_array()) continue;
    for (const json& old : previous) {
      if (old.value("type", "") == entry["type"] && old.value("status", "") == entry["status"] &&
          old.contains("lastTransitionTime")) {
        entry["lastTransitionTime"] = old["lastTransitionTime"];
      }
    }
  }
  return conditions;
}

std::string image_id(const std::string& image) {
  std::string repository = image;
  std::string digest;
  if (const std::size_t at = repository.find('@'); at != std::string::npos) {
    digest = repository.substr(at + 1);
    repository.resize(at);
  }
  const std::size_t slash = repository.rfind('/');
  const std::size_t colon = repository.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    repository.resize(colon);  // the tag
  }
  const std::size_t first_slash = repository.find('/');
  const std::string first = repository.substr(0, first_slash);
  const bool has_registry =
      first_slash != std::string::npos &&
      (first.find_first_of(".:") != std::string::npos || first == "localhost");
  if (!has_registry) {
    repository =
        (first_slash == std::string::npos ? "docker.io/library/" : "docker.io/") + repository;
  }
  if (digest.empty()) digest = "sha256:" + sha256_hex(image);
  return repository + "@" + digest;
}

}  // namespace tessel::testing
