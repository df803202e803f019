// The Table columns of built-in resources, as kube-apiserver 1.26's printers
// (pkg/printers/internalversion) make them, wide columns included (the server always prints
// wide); and the default convertor (Name, Created At) for everything else.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/table_converter_columns.h"
#include "tests/support/table_converter_time.h"

namespace tessel::testing {

using nlohmann::json;
using TimePoint = std::chrono::system_clock::time_point;

const char* const kNameColumnDescription =
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "http://kubernetes.io/docs/user-guide/identifiers#names";

const char* const kCreationTimestampDescription =
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#metadata";

json column_definition(const std::string& name, const std::string& type,
                       const std::string& description, int priority, const std::string& format) {
  return {{"name", name},
          {"type", type},
          {"format", format},
          {"description", description},
          {"priority", priority}};
}

namespace {

// Field descriptions of k8s.io/api 1.26 (the printers' column descriptions).
namespace doc {
const char* const kNodeAddresses =
    "List of addresses reachable to the node. Queried from cloud provider, if available. More "
    "info: https://kubernetes.io/docs/concepts/nodes/node/#addresses Note: This field is declared "
    "as mergeable, but the merge key is not sufficiently unique, which can cause data corruption "
    "when it is merged. Callers should instead use a full-replacement patch. See "
    "https://pr.k8s.io/79391 for an example.";
const char* const kPodIP =
    "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet "
    "allocated.";
const char* const kPodNodeName =
    "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the "
    "scheduler simply schedules this pod onto that node, assuming that it fits resource "
    "requirements.";
const char* const kPodNominatedNodeName =
    "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot "
    "be scheduled right away as preemption victims receive their graceful termination periods. "
    "This field does not guarantee that the pod will be scheduled on this node. Scheduler may "
    "decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also "
    "decide to give the resources on this node to a higher priority pod that is created after "
    "preemption. As a result, this field may be different than PodSpec.nodeName when the pod is "
    "scheduled.";
const char* const kPodReadinessGates =
    "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when "
    "all its containers are ready AND all conditions specified in the readiness gates have status "
    "equal to \"True\" More info: "
    "https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates";
const char* const kEventFieldPath =
    "If referring to a piece of an object instead of an entire object, this string should "
    "contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. "
    "For example, if the object reference is to a container within a pod, this would take on a "
    "value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container "
    "that triggered the event) or if no container name is specified \"spec.containers[2]\" "
    "(container with index 2 in this pod). This syntax is chosen only to have some well-defined "
    "way of referencing a part of an object.";
const char* const kConfigMapData =
    "Data contains the configuration data. Each key must consist of alphanumeric characters, "
    "'-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The "
    "keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced "
    "during validation process.";
const char* const kSecretType =
    "Used to facilitate programmatic handling of secret data. More info: "
    "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types";
const char* const kSecretData =
    "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' "
    "or '.'. The serialized form of the secret data is a base64 encoded string, representing the "
    "arbitrary (possibly non-string) data value here. Described in "
    "https://tools.ietf.org/html/rfc4648#section-4";
const char* const kServiceType =
    "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are "
    "ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a "
    "cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the "
    "selector or if that is not specified, by manual construction of an Endpoints object or "
    "EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the "
    "endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds "
    "on ClusterIP and allocates a port on every node which routes to the same endpoints as the "
    "clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if "
    "supported in the current cloud) which routes to the same endpoints as the clusterIP. "
    "\"ExternalName\" aliases this service to the specified externalName. Several other fields "
    "do not apply to ExternalName services. More info: "
    "https://kubernetes.io/docs/concepts/services-networking/service/"
    "#publishing-services-service-types";
const char* const kServiceClusterIP =
    "clusterIP is the IP address of the service and is usually assigned randomly. If an address "
    "is specified manually, is in-range (as per system configuration), and is not in use, it "
    "will be allocated to the service; otherwise creation of the service will fail. This field "
    "may not be changed through updates unless the type field is also being changed to "
    "ExternalName (which requires this field to be blank) or the type field is being changed "
    "from ExternalName (in which case this field may optionally be specified, as describe "
    "above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting "
    "this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct "
    "endpoint connections are preferred and proxying is not required.  Only applies to types "
    "ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service "
    "of type ExternalName, creation will fail. This field will be wiped when updating a Service "
    "to type ExternalName. More info: "
    "https://kubernetes.io/docs/concepts/services-networking/service/"
    "#virtual-ips-and-service-proxies";
const char* const kServiceExternalIPs =
    "externalIPs is a list of IP addresses for which nodes in the cluster will also accept "
    "traffic for this service.  These IPs are not managed by Kubernetes.  The user is "
    "responsible for ensuring that traffic arrives at a node with this IP.  A common example is "
    "external load-balancers that are not part of the Kubernetes system.";
const char* const kServicePorts =
    "The list of ports that are exposed by this service. More info: "
    "https://kubernetes.io/docs/concepts/services-networking/service/"
    "#virtual-ips-and-service-proxies";
const char* const kServiceSelector =
    "Route service traffic to pods with label keys and values matching this selector. If empty "
    "or not present, the service is assumed to have an external process managing its endpoints, "
    "which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and "
    "LoadBalancer. Ignored if type is ExternalName. More info: "
    "https://kubernetes.io/docs/concepts/services-networking/service/";
const char* const kServiceAccountSecrets =
    "Secrets is a list of the secrets in the same namespace that pods running using this "
    "ServiceAccount are allowed to use. Pods are only limited to this list if this service "
    "account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". This "
    "field should not be used to find auto-generated service account token secrets for use "
    "outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or "
    "service account token secrets can be manually created. More info: "
    "https://kubernetes.io/docs/concepts/configuration/secret";
}  // namespace doc

// A field of an object by JSON pointer, or null.
const json& get(const json& object, const char* pointer) {
  static const json null_value;
  const json::json_pointer path(pointer);
  return object.contains(path) ? object.at(path) : null_value;
}

std::string get_string(const json& object, const char* pointer) {
  const json& value = get(object, pointer);
  return value.is_string() ? value.get<std::string>() : "";
}

std::int64_t get_int(const json& object, const char* pointer) {
  const json& value = get(object, pointer);
  return value.is_number() ? value.get<std::int64_t>() : 0;
}

std::size_t get_size(const json& object, const char* pointer) {
  const json& value = get(object, pointer);
  return value.is_structured() ? value.size() : 0;
}

std::string or_placeholder(const std::string& value, const char* placeholder) {
  return value.empty() ? placeholder : value;
}

std::string join(const std::vector<std::string>& parts, const char* separator) {
  std::string joined;
  for (const auto& part : parts) joined += (joined.empty() ? "" : separator) + part;
  return joined;
}

json name_column() {
  return column_definition("Name", "string", kNameColumnDescription, 0, "name");
}

json age_column() { return column_definition("Age", "string", kCreationTimestampDescription); }

std::string age(const json& object, TimePoint now) {
  return age_cell(get(object, "/metadata/creationTimestamp"), now);
}

// ---- nodes -------------------------------------------------------------------------------------

std::string node_address(const json& node, const std::string& type) {
  for (const auto& address : get(node, "/status/addresses")) {
    if (address.value("type", "") == type) return address.value("address", "");
  }
  return "<none>";
}

std::shared_ptr<TableColumns> node_columns() {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {
      name_column(),
      column_definition("Status", "string", "The status of the node"),
      column_definition("Roles", "string", "The roles of the node"),
      age_column(),
      column_definition("Version", "string", "Kubelet Version reported by the node."),
      column_definition("Internal-IP", "string", doc::kNodeAddresses, 1),
      column_definition("External-IP", "string", doc::kNodeAddresses, 1),
      column_definition("OS-Image", "string",
                        "OS Image reported by the node from /etc/os-release (e.g. Debian "
                        "GNU/Linux 7 (wheezy)).",
                        1),
      column_definition("Kernel-Version", "string",
                        "Kernel Version reported by the node from 'uname -r' (e.g. "
                        "3.16.0-0.bpo.4-amd64).",
                        1),
      column_definition("Container-Runtime", "string",
                        "ContainerRuntime Version reported by the node through runtime remote "
                        "API (e.g. containerd://1.4.2).",
                        1)};
  columns->cells = [](const json& node, TimePoint now) {
    std::vector<std::string> status;
    for (const auto& condition : get(node, "/status/conditions")) {
      if (condition.value("type", "") == "Ready") {
        status = {condition.value("status", "") == "True" ? "Ready" : "NotReady"};
      }
    }
    if (status.empty()) status.push_back("Unknown");
    if (get(node, "/spec/unschedulable") == true) status.push_back("SchedulingDisabled");
    std::set<std::string> roles;
    for (const auto& [key, value] : get(node, "/metadata/labels").items()) {
      const std::string prefix = "node-role.kubernetes.io/";
      if (key.rfind(prefix, 0) == 0 && key.size() > prefix.size()) {
        roles.insert(key.substr(prefix.size()));
      } else if (key == "kubernetes.io/role" && value.is_string() && value != "") {
        roles.insert(value.get<std::string>());
      }
    }
    return json{
        node.value("/metadata/name"_json_pointer, std::string()),
        join(status, ","),
        or_placeholder(join({roles.begin(), roles.end()}, ","), "<none>"),
        age(node, now),
        get_string(node, "/status/nodeInfo/kubeletVersion"),
        node_address(node, "InternalIP"),
        node_address(node, "ExternalIP"),
        or_placeholder(get_string(node, "/status/nodeInfo/osImage"), "<unknown>"),
        or_placeholder(get_string(node, "/status/nodeInfo/kernelVersion"), "<unknown>"),
        or_placeholder(get_string(node, "/status/nodeInfo/containerRuntimeVersion"), "<unknown>")};
  };
  return columns;
}

// ---- pods --------------------------------------------------------------------------------------

struct PodSummary {
  std::string reason;
  int restarts = 0;
  int ready = 0;
  std::optional<TimePoint> last_restart;
};

void note_last_termination(const json& container, PodSummary& summary) {
  const json& finished = get(container, "/lastState/terminated/finishedAt");
  if (!finished.is_string()) return;
  const auto time = parse_rfc3339(finished.get<std::string>());
  if (time && (!summary.last_restart || *summary.last_restart < *time)) summary.last_restart = time;
}

std::string terminated_reason(const json& terminated, const std::string& prefix) {
  const std::string reason = terminated.value("reason", "");
  if (!reason.empty()) return prefix + reason;
  const std::int64_t signal = terminated.value("signal", 0);
  if (signal != 0) return prefix + "Signal:" + std::to_string(signal);
  return prefix + "ExitCode:" + std::to_string(terminated.value("exitCode", 0));
}

// printPod's reason, restarts and readiness.
PodSummary summarize_pod(const json& pod) {
  PodSummary summary;
  summary.reason = get_string(pod, "/status/phase");
  if (const std::string reason = get_string(pod, "/status/reason"); !reason.empty()) {
    summary.reason = reason;
  }
  for (const auto& condition : get(pod, "/status/conditions")) {
    if (condition.value("type", "") == "PodScheduled" &&
        condition.value("reason", "") == "SchedulingGated") {
      summary.reason = "SchedulingGated";
    }
  }
  bool initializing = false;
  const json& init_statuses = get(pod, "/status/initContainerStatuses");
  const std::size_t init_count = get_size(pod, "/spec/initContainers");
  for (std::size_t i = 0; i < init_statuses.size(); ++i) {
    const json& container = init_statuses[i];
    summary.restarts += container.value("restartCount", 0);
    note_last_termination(container, summary);
    const json& terminated = get(container, "/state/terminated");
    const std::string waiting_reason = get_string(container, "/state/waiting/reason");
    if (terminated.is_object() && terminated.value("exitCode", 0) == 0) continue;
    if (terminated.is_object()) {
      summary.reason = terminated_reason(terminated, "Init:");
    } else if (!waiting_reason.empty() && waiting_reason != "PodInitializing") {
      summary.reason = "Init:" + waiting_reason;
    } else {
      summary.reason = "Init:" + std::to_string(i) + "/" + std::to_string(init_count);
    }
    initializing = true;
    break;
  }
  if (!initializing) {
    summary.restarts = 0;
    bool has_running = false;
    const json& statuses = get(pod, "/status/containerStatuses");
    for (auto it = statuses.rbegin(); it != statuses.rend(); ++it) {
      const json& container = *it;
      summary.restarts += container.value("restartCount", 0);
      note_last_termination(container, summary);
      const std::string waiting_reason = get_string(container, "/state/waiting/reason");
      const json& terminated = get(container, "/state/terminated");
      if (!waiting_reason.empty()) {
        summary.reason = waiting_reason;
      } else if (terminated.is_object()) {
        summary.reason = terminated_reason(terminated, "");
      } else if (container.value("ready", false) && get(container, "/state/running").is_object()) {
        has_running = true;
        ++summary.ready;
      }
    }
    if (summary.reason == "Completed" && has_running) {
      bool pod_ready = false;
      for (const auto& condition : get(pod, "/status/conditions")) {
        if (condition.value("type", "") == "Ready" && condition.value("status", "") == "True") {
          pod_ready = true;
        }
      }
      summary.reason = pod_ready ? "Running" : "NotReady";
    }
  }
  if (!get(pod, "/metadata/deletionTimestamp").is_null()) {
    summary.reason = get_string(pod, "/status/reason") == "NodeLost" ? "Unknown" : "Terminating";
  }
  return summary;
}

std::string readiness_gates(const json& pod) {
  const json& gates = get(pod, "/spec/readinessGates");
  if (!gates.is_array() || gates.empty()) return "<none>";
  int true_conditions = 0;
  for (const auto& gate : gates) {
    for (const auto& condition : get(pod, "/status/conditions")) {
      if (condition.value("type", "") == gate.value("conditionType", "")) {
        if (condition.value("status", "") == "True") ++true_conditions;
        break;
      }
    }
  }
  return std::to_string(true_conditions) + "/" + std::to_string(gates.size());
}

std::shared_ptr<TableColumns> pod_columns() {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {
      name_column(),
      column_definition("Ready", "string",
                        "The aggregate readiness state of this pod for accepting traffic."),
      column_definition("Status", "string", "The aggregate status of the containers in this pod."),
      column_definition("Restarts", "string",
                        "The number of times the containers in this pod have been restarted and "
                        "when the last container in this pod has restarted."),
      age_column(),
      column_definition("IP", "string", doc::kPodIP, 1),
      column_definition("Node", "string", doc::kPodNodeName, 1),
      column_definition("Nominated Node", "string", doc::kPodNominatedNodeName, 1),
      column_definition("Readiness Gates", "string", doc::kPodReadinessGates, 1)};
  columns->cells = [](const json& pod, TimePoint now) {
    const PodSummary summary = summarize_pod(pod);
    std::string restarts = std::to_string(summary.restarts);
    if (summary.last_restart) {
      restarts += " (" + human_duration(now - *summary.last_restart) + " ago)";
    }
    std::string ip;
    const json& ips = get(pod, "/status/podIPs");
    if (ips.is_array() && !ips.empty()) ip = ips[0].value("ip", "");
    return json{
        pod.value("/metadata/name"_json_pointer, std::string()),
        std::to_string(summary.ready) + "/" + std::to_string(get_size(pod, "/spec/containers")),
        summary.reason,
        restarts,
        age(pod, now),
        or_placeholder(ip, "<none>"),
        or_placeholder(get_string(pod, "/spec/nodeName"), "<none>"),
        or_placeholder(get_string(pod, "/status/nominatedNodeName"), "<none>"),
        readiness_gates(pod)};
  };
  columns->conditions = [](const json& pod) -> json {
    const std::string phase = get_string(pod, "/status/phase");
    if (phase != "Succeeded" && phase != "Failed") return nullptr;
    return json::array({{{"type", "Completed"},
                         {"status", "True"},
                         {"reason", phase},
                         {"message", phase == "Succeeded" ? "The pod has completed successfully."
                                                          : "The pod failed."}}});
  };
  return columns;
}

// ---- events ------------------------------------------------------------------------------------

// An events.k8s.io/v1 Event in the core/v1 shape the printer reads.
json as_core_event(const json& event) {
  json core = event;
  auto move = [&](const char* from, const char* to) {
    if (event.contains(from)) core[to] = event[from];
  };
  move("regarding", "involvedObject");
  move("note", "message");
  move("deprecatedSource", "source");
  move("deprecatedFirstTimestamp", "firstTimestamp");
  move("deprecatedLastTimestamp", "lastTimestamp");
  move("deprecatedCount", "count");
  return core;
}

std::shared_ptr<TableColumns> event_columns(bool events_api) {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {
      column_definition("Last Seen", "string",
                        "The time at which the most recent occurrence of this event was "
                        "recorded."),
      column_definition("Type", "string",
                        "Type of this event (Normal, Warning), new types could be added in the "
                        "future"),
      column_definition("Reason", "string",
                        "This should be a short, machine understandable string that gives the "
                        "reason for the transition into the object's current status."),
      column_definition("Object", "string", "The object that this event is about."),
      column_definition("Subobject", "string", doc::kEventFieldPath, 1),
      column_definition("Source", "string",
                        "The component reporting this event. Should be a short machine "
                        "understandable string.",
                        1),
      column_definition("Message", "string",
                        "A human-readable description of the status of this operation."),
      column_definition("First Seen", "string",
                        "The time at which the event was first recorded. (Time of server receipt "
                        "is in TypeMeta.)",
                        1),
      column_definition("Count", "string", "The number of times this event has occurred.", 1),
      column_definition("Name", "string", kNameColumnDescription, 1, "name")};
  columns->cells = [events_api](const json& original, TimePoint now) {
    const json event = events_api ? as_core_event(original) : original;
    std::string first_seen = age_cell(get(event, "/firstTimestamp"), now);
    if (get(event, "/firstTimestamp").is_null())
      first_seen = age_cell(get(event, "/eventTime"), now);
    std::string last_seen = get(event, "/lastTimestamp").is_null()
                                ? first_seen
                                : age_cell(get(event, "/lastTimestamp"), now);
    std::int64_t count = get_int(event, "/count");
    if (get(event, "/series").is_object()) {
      last_seen = age_cell(get(event, "/series/lastObservedTime"), now);
      count = get_int(event, "/series/count");
    } else if (count == 0) {
      count = 1;  // singleton events of the new API carry no count
    }
    std::string kind = get_string(event, "/involvedObject/kind");
    std::transform(kind.begin(), kind.end(), kind.begin(), ::tolower);
    const std::string name = get_string(event, "/involvedObject/name");
    std::string component = get_string(event, "/source/component");
    if (component.empty()) component = get_string(event, "/reportingComponent");
    if (component.empty()) component = get_string(event, "/reportingController");
    std::string instance = get_string(event, "/source/host");
    if (instance.empty()) instance = get_string(event, "/reportingInstance");
    std::string message = get_string(event, "/message");
    message.erase(0, message.find_first_not_of(" \t\r\n"));
    message.erase(message.find_last_not_of(" \t\r\n") + 1);
    return json{last_seen,
                get_string(event, "/type"),
                get_string(event, "/reason"),
                name.empty() ? kind : kind + "/" + name,
                get_string(event, "/involvedObject/fieldPath"),
                instance.empty() ? component : component + ", " + instance,
                message,
                first_seen,
                count,
                get_string(event, "/metadata/name")};
  };
  return columns;
}

// ---- services ----------------------------------------------------------------------------------

std::string service_external_ip(const json& service) {
  std::vector<std::string> external_ips;
  for (const auto& ip : get(service, "/spec/externalIPs")) external_ips.push_back(ip);
  const std::string type = get_string(service, "/spec/type");
  if (type == "ClusterIP" || type == "NodePort") {
    return external_ips.empty() ? "<none>" : join(external_ips, ",");
  }
  if (type == "LoadBalancer") {
    std::vector<std::string> addresses;
    for (const auto& ingress : get(service, "/status/loadBalancer/ingress")) {
      if (ingress.contains("ip")) {
        addresses.push_back(ingress["ip"]);
      } else if (ingress.contains("hostname")) {
        addresses.push_back(ingress["hostname"]);
      }
    }
    addresses.insert(addresses.end(), external_ips.begin(), external_ips.end());
    return addresses.empty() ? "<pending>" : join(addresses, ",");
  }
  if (type == "ExternalName") return get_string(service, "/spec/externalName");
  return "<unknown>";
}

std::string service_ports(const json& service) {
  std::vector<std::string> ports;
  for (const auto& port : get(service, "/spec/ports")) {
    const std::string protocol = port.value("protocol", "");
    const std::int64_t node_port = port.value("nodePort", 0);
    ports.push_back(std::to_string(port.value("port", 0)) +
                    (node_port > 0 ? ":" + std::to_string(node_port) : "") + "/" + protocol);
  }
  return or_placeholder(join(ports, ","), "<none>");
}

std::string service_selector(const json& service) {
  std::vector<std::string> pairs;
  for (const auto& [key, value] : get(service, "/spec/selector").items()) {
    pairs.push_back(key + "=" + value.get<std::string>());
  }
  return or_placeholder(join(pairs, ","), "<none>");
}

std::shared_ptr<TableColumns> service_columns() {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {name_column(),
                          column_definition("Type", "string", doc::kServiceType),
                          column_definition("Cluster-IP", "string", doc::kServiceClusterIP),
                          column_definition("External-IP", "string", doc::kServiceExternalIPs),
                          column_definition("Port(s)", "string", doc::kServicePorts),
                          age_column(),
                          column_definition("Selector", "string", doc::kServiceSelector, 1)};
  columns->cells = [](const json& service, TimePoint now) {
    const json& cluster_ips = get(service, "/spec/clusterIPs");
    const std::string cluster_ip =
        cluster_ips.is_array() && !cluster_ips.empty() ? cluster_ips[0].get<std::string>() : "";
    return json{get_string(service, "/metadata/name"),
                get_string(service, "/spec/type"),
                or_placeholder(cluster_ip, "<none>"),
                service_external_ip(service),
                service_ports(service),
                age(service, now),
                service_selector(service)};
  };
  return columns;
}

// ---- small printers ----------------------------------------------------------------------------

// Name, one more column computed from the object, Age.
std::shared_ptr<TableColumns> name_value_age_columns(json value_column,
                                                     std::function<json(const json&)> value) {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {name_column(), std::move(value_column), age_column()};
  columns->cells = [value = std::move(value)](const json& object, TimePoint now) {
    return json{get_string(object, "/metadata/name"), value(object), age(object, now)};
  };
  return columns;
}

std::shared_ptr<TableColumns> secret_columns() {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {name_column(), column_definition("Type", "string", doc::kSecretType),
                          column_definition("Data", "string", doc::kSecretData), age_column()};
  columns->cells = [](const json& secret, TimePoint now) {
    return json{get_string(secret, "/metadata/name"), get_string(secret, "/type"),
                static_cast<std::int64_t>(get_size(secret, "/data")), age(secret, now)};
  };
  return columns;
}

// rest.NewDefaultTableConvertor: Name and the creation time as RFC 3339.
std::shared_ptr<TableColumns> default_columns() {
  auto columns = std::make_shared<TableColumns>();
  columns->definitions = {name_column(),
                          column_definition("Created At", "date", kCreationTimestampDescription)};
  columns->cells = [](const json& object, TimePoint) {
    return json{get_string(object, "/metadata/name"),
                rfc3339_cell(get(object, "/metadata/creationTimestamp"))};
  };
  columns->null_rows_when_empty = true;
  return columns;
}

}  // namespace

std::shared_ptr<const TableColumns> builtin_table_columns(const std::string& group,
                                                          const std::string& resource) {
  if (auto columns = install_table_columns(group, resource)) return columns;
  if (group.empty()) {
    if (resource == "nodes") return node_columns();
    if (resource == "pods") return pod_columns();
    if (resource == "events") return event_columns(false);
    if (resource == "services") return service_columns();
    if (resource == "secrets") return secret_columns();
    if (resource == "namespaces") {
      return name_value_age_columns(
          column_definition("Status", "string", "The status of the namespace"),
          [](const json& ns) { return get_string(ns, "/status/phase"); });
    }
    if (resource == "configmaps") {
      return name_value_age_columns(
          column_definition("Data", "string", doc::kConfigMapData), [](const json& map) {
            return static_cast<std::int64_t>(get_size(map, "/data") + get_size(map, "/binaryData"));
          });
    }
    if (resource == "serviceaccounts") {
      return name_value_age_columns(
          column_definition("Secrets", "string", doc::kServiceAccountSecrets),
          [](const json& account) {
            return static_cast<std::int64_t>(get_size(account, "/secrets"));
          });
    }
  } else if (group == "coordination.k8s.io" && resource == "leases") {
    return name_value_age_columns(
        column_definition("Holder", "string",
                          "holderIdentity contains the identity of the holder of a current "
                          "lease."),
        [](const json& lease) {
          const json& holder = get(lease, "/spec/holderIdentity");
          return holder.is_string() ? holder.get<std::string>() : "<none>";
        });
  } else if (group == "events.k8s.io" && resource == "events") {
    return event_columns(true);
  }
  return default_columns();
}

}  // namespace tessel::testing
