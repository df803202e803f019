// A replica of the hub chart's operator Deployment, run as a process on this machine: what a
// hub's controllers and kubelet would give its pod, made by the test from the Deployment the API
// stores (nothing of the operator's command line is written by hand):
// - the Pod, from the Deployment's template as the ReplicaSet controller makes it, so that
//   --pod-name has a Pod to label (the hub has no nodes: it stays Pending);
// - the container's args with $(VAR) references expanded from its env as the kubelet expands them
//   (fieldRef metadata.name and metadata.namespace; status.podIP is 127.0.0.1);
// - its Secret and emptyDir volumes as folders of the work folder (a Secret's keys written as
//   files from the Secret the API holds), every arg naming a file under a mountPath pointed there;
// - its named container ports (OperatorProcess maps each onto a loopback port of its own: the
//   pod's address is 127.0.0.1, as if each replica had its own network);
// - $KUBECONFIG: a kubeconfig with a token of the pod's ServiceAccount (`kubectl create token`),
//   in place of the in-cluster files of the service-account token volume;
// - the webhook Service's Endpoints, as the endpoints controller writes them for a ready pod.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::testing {

// The address every replica's pod has (status.podIP).
inline constexpr const char* kPodIp = "127.0.0.1";

// The Pod the ReplicaSet controller would make from `deployment`'s template, named `name`.
nlohmann::json pod_from_template(const nlohmann::json& deployment, const std::string& name);

// The container's env as the kubelet resolves it for `pod` (value, fieldRef metadata.name,
// metadata.namespace, status.podIP, spec.serviceAccountName); throws std::runtime_error naming
// the variable and its source when it is anything else.
std::map<std::string, std::string> container_env(const nlohmann::json& pod,
                                                 const nlohmann::json& container);

// `text` with every $(NAME) of `env` replaced by its value, "$$" by "$", and other references
// left as they are (Kubernetes' expansion of args).
std::string expand_references(const std::string& text,
                              const std::map<std::string, std::string>& env);

// `args` with each mount path (a key of `folders`) at the start of an arg or of its value after
// '=' replaced by the folder it maps to (the longest mount path wins). --data-root is left as it
// is: it names a path in the stage pods, which the operator only passes on, not one of its own
// container's (mapping it broke the e2e wherever the checkout was under the chart's /tmp mount).
std::vector<std::string> map_mount_paths(const std::vector<std::string>& args,
                                         const std::map<std::string, std::string>& folders);

// The container's ports: name -> containerPort.
std::map<std::string, int> container_ports(const nlohmann::json& container);

// The Endpoints of `service` (a Service object) the endpoints controller writes when `pod_name`
// is its one ready pod at kPodIp: each of the Service's ports by name at the port the pod's
// container listens on (`pod_ports`: targetPort name -> the port on this machine).
nlohmann::json endpoints_for(const nlohmann::json& service, const std::string& pod_name,
                             const std::map<std::string, int>& pod_ports);

}  // namespace tessel::testing
