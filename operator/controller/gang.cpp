#include "operator/controller/gang.h"

#include <algorithm>

#include "operator/controller/labels.h"

namespace tessel::controller {
namespace {

using nlohmann::json;

const json* find_pod(const std::vector<json>& pods, const std::string& name,
                     const std::string& attempt) {
  for (const json& pod : pods) {
    const json& metadata = pod.value("metadata", json::object());
    if (metadata.value("name", "") != name) continue;
    const json annotations = metadata.value("annotations", json::object());
    if (annotations.value(kAttemptAnnotation, "") == attempt) return &pod;
  }
  return nullptr;
}

// The terminated state of the pod's first container that has one, or null.
json first_termination(const json& status) {
  for (const json& container : status.value("containerStatuses", json::array())) {
    const json terminated =
        container.value("state", json::object()).value("terminated", json::object());
    if (!terminated.empty()) {
      json out = terminated;
      out["container"] = container.value("name", "");
      return out;
    }
  }
  return nullptr;
}

// "<reason>: <message>" of a Failed pod: the pod's own (kubelet admission, eviction), else its
// container's termination.
std::string failure(const json& status) {
  std::string reason = status.value("reason", "");
  std::string message = status.value("message", "");
  if (reason.empty() || message.empty()) {
    const json terminated = first_termination(status);
    if (terminated.is_object()) {
      if (reason.empty()) reason = terminated.value("reason", "");
      if (message.empty()) {
        message = terminated.value("message", "");
        if (message.empty()) {
          message = "container " + terminated.value("container", std::string()) +
                    " exited with code " + std::to_string(terminated.value("exitCode", 0));
        }
      }
    }
  }
  if (reason.empty()) reason = "Failed";
  if (message.empty()) message = "the pod failed";
  return reason + ": " + message;
}

// The stage container's termination message ("" when it has none).
std::string stage_termination_message(const json& status) {
  for (const json& container : status.value("containerStatuses", json::array())) {
    if (container.value("name", "") != kStageContainerName) continue;
    return container.value("state", json::object())
        .value("terminated", json::object())
        .value("message", "");
  }
  return "";
}

}  // namespace

bool GangState::all_running() const {
  return expected > 0 && !failed && running + succeeded == expected;
}

bool GangState::all_succeeded() const { return expected > 0 && succeeded == expected; }

GangState observe_gang(const std::vector<TaskletPlace>& tasklets, const std::string& job,
                       const std::map<std::string, std::vector<json>>& pods_by_cluster,
                       int64_t attempt, const std::set<NodeRef>& lost_nodes) {
  GangState state;
  state.expected = static_cast<int>(tasklets.size());
  const std::string attempt_text = std::to_string(attempt);
  for (const TaskletPlace& tasklet : tasklets) {
    const std::string name = stage_pod_name(job, tasklet.stage, tasklet.replica);
    const auto cluster = pods_by_cluster.find(tasklet.cluster);
    const json* pod =
        cluster == pods_by_cluster.end() ? nullptr : find_pod(cluster->second, name, attempt_text);
    if (pod == nullptr) {
      state.missing.push_back(name);
      continue;
    }
    ++state.found;
    const json status = pod->value("status", json::object());
    const std::string phase = status.value("phase", "");
    const bool deleting = pod->value("metadata", json::object()).contains("deletionTimestamp");
    if (phase == "Running" && !deleting) ++state.running;
    if (phase == "Succeeded") {
      ++state.succeeded;
      state.termination_messages.push_back(stage_termination_message(status));
    }
    std::string bound = pod->value("spec", json::object()).value("nodeName", "");
    if (phase == "Failed" && !state.failed) {
      state.failed = tasklet.cluster + "/" + name + ": " + failure(status);
      state.failed_node = NodeRef{tasklet.cluster, bound.empty() ? tasklet.node : bound};
    }
    // A pod that finished its work is not lost with its node.
    if (const NodeRef node{tasklet.cluster, bound};
        phase != "Succeeded" && !bound.empty() && lost_nodes.contains(node)) {
      state.on_lost_nodes.push_back(tasklet.cluster + "/" + name + " on node " + bound);
      if (std::find(state.lost.begin(), state.lost.end(), node) == state.lost.end())
        state.lost.push_back(node);
    }
  }
  return state;
}

}  // namespace tessel::controller
