// What the pods of one start attempt of a job say, for the all-or-nothing start: the operator
// waits until every tasklet's pod runs, and tears the whole gang down when one fails or when
// they are not all running within the start timeout. Pure: it reads the pods the members'
// informers hold.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "operator/controller/pod_builder.h"

namespace tessel::controller {

// A node of a member cluster.
struct NodeRef {
  std::string cluster, node;
  auto operator<=>(const NodeRef&) const = default;
};

struct GangState {
  int expected = 0;                  // tasklets
  int found = 0;                     // their pods of this attempt
  int running = 0;                   // Running and not being deleted
  int succeeded = 0;                 // Succeeded
  std::vector<std::string> missing;  // pod names of tasklets with no pod of this attempt
  // "<cluster>/<pod>: <reason>: <message>" of the first Failed pod in rank order (rejected by
  // the kubelet's admission, e.g. OutOfnvidia.com/gpu; evicted; its container failed).
  std::optional<std::string> failed;
  std::optional<NodeRef> failed_node;  // where that pod was bound (its tasklet's node if unbound)
  // The attempt's pods bound to a node in `lost_nodes` (but those that Succeeded: their work is
  // done), "<cluster>/<pod> on node <node>", and those nodes, each once, in rank order.
  std::vector<std::string> on_lost_nodes;
  std::vector<NodeRef> lost;
  // The stage container's termination message of each Succeeded pod, in rank order ("" where
  // it left none): the final figures of training (proto/progress/termination_message.h).
  std::vector<std::string> termination_messages;

  // Every pod has started and none failed: each Running, or already Succeeded (a short job's
  // early finisher is not a start that failed).
  bool all_running() const;
  bool all_succeeded() const;
};

// tasklets: the placement, as build_stage_objects had it. pods_by_cluster: the job's pods (its
// kJobUidLabel) in each member cluster. A pod counts when its name is its tasklet's, it is in
// its tasklet's cluster and its kAttemptAnnotation is `attempt`; pods of other attempts do not.
// lost_nodes: the nodes (of any cluster) whose Ready condition is not True.
GangState observe_gang(const std::vector<TaskletPlace>& tasklets, const std::string& job,
                       const std::map<std::string, std::vector<nlohmann::json>>& pods_by_cluster,
                       int64_t attempt, const std::set<NodeRef>& lost_nodes = {});

}  // namespace tessel::controller
