// Pods: the v1 defaults, the admission plugins of a default kube-apiserver (ServiceAccount,
// Priority, DefaultTolerationSeconds), the create strategy (status phase and QoS class), and
// ValidatePod / ValidatePodUpdate.
#include <random>
#include <set>

#include "tests/support/builtin_semantics.h"
#include "tests/support/builtin_semantics_errors.h"
#include "tests/support/builtin_semantics_kinds.h"
#include "tests/support/builtin_semantics_pod_diff.h"
#include "tests/support/builtin_semantics_quantity.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
namespace v = validation;

constexpr const char* kContainerLists[] = {"initContainers", "containers", "ephemeralContainers"};
constexpr const char* kTokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount";
constexpr std::int64_t kMaxInt32 = 2147483647;

void set_default(json& object, const char* field, const json& value) {
  if (!object.contains(field) || object[field].is_null() ||
      (object[field].is_string() && object[field].get<std::string>().empty())) {
    object[field] = value;
  }
}

// "Always" for an image without a tag or tagged latest, else "IfNotPresent".
std::string default_pull_policy(const std::string& image) {
  if (image.find('@') != std::string::npos) return "IfNotPresent";
  const auto slash = image.rfind('/');
  const auto colon = image.rfind(':');
  const bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
  if (!tagged || image.substr(colon + 1) == "latest") return "Always";
  return "IfNotPresent";
}

void default_probe(json& probe) {
  if (!probe.is_object()) return;
  set_default(probe, "timeoutSeconds", 1);
  set_default(probe, "periodSeconds", 10);
  set_default(probe, "successThreshold", 1);
  set_default(probe, "failureThreshold", 3);
  if (probe.contains("httpGet") && probe["httpGet"].is_object()) {
    set_default(probe["httpGet"], "path", "/");
    set_default(probe["httpGet"], "scheme", "HTTP");
  }
}

void default_container(json& container) {
  if (!container.is_object()) return;
  set_default(container, "terminationMessagePath", "/dev/termination-log");
  set_default(container, "terminationMessagePolicy", "File");
  set_default(container, "imagePullPolicy", default_pull_policy(container.value("image", "")));
  if (container.contains("ports") && container["ports"].is_array()) {
    for (auto& port : container["ports"]) {
      if (port.is_object()) set_default(port, "protocol", "TCP");
    }
  }
  if (container.contains("env") && container["env"].is_array()) {
    for (auto& env : container["env"]) {
      if (env.is_object() && env.contains("valueFrom") && env["valueFrom"].is_object() &&
          env["valueFrom"].contains("fieldRef") && env["valueFrom"]["fieldRef"].is_object()) {
        set_default(env["valueFrom"]["fieldRef"], "apiVersion", "v1");
      }
    }
  }
  for (const char* probe : {"livenessProbe", "readinessProbe", "startupProbe"}) {
    if (container.contains(probe)) default_probe(container[probe]);
  }
  // requests default to the limits they lack (SetDefaults_Pod)
  if (!container.contains("resources") || !container["resources"].is_object()) {
    container["resources"] = json::object();
  }
  json& resources = container["resources"];
  if (resources.contains("limits") && resources["limits"].is_object() &&
      !resources["limits"].empty()) {
    if (!resources.contains("requests") || !resources["requests"].is_object()) {
      resources["requests"] = json::object();
    }
    for (const auto& [name, quantity] : resources["limits"].items()) {
      if (!resources["requests"].contains(name)) resources["requests"][name] = quantity;
    }
  }
}

void default_volume(json& volume) {
  if (!volume.is_object()) return;
  bool has_source = false;
  for (const auto& [k, unused] : volume.items()) has_source |= k != "name";
  if (!has_source) volume["emptyDir"] = json::object();
  for (const char* source : {"secret", "configMap", "downwardAPI", "projected"}) {
    if (volume.contains(source) && volume[source].is_object()) {
      set_default(volume[source], "defaultMode", 420);
    }
  }
}

void pod_decode_defaults(json& pod) {
  if (!pod.contains("spec") || !pod["spec"].is_object()) pod["spec"] = json::object();
  json& spec = pod["spec"];
  set_default(spec, "dnsPolicy", "ClusterFirst");
  set_default(spec, "restartPolicy", "Always");
  set_default(spec, "terminationGracePeriodSeconds", 30);
  set_default(spec, "schedulerName", "default-scheduler");
  set_default(spec, "enableServiceLinks", true);
  if (!spec.contains("securityContext") || spec["securityContext"].is_null()) {
    spec["securityContext"] = json::object();
  }
  // The deprecated serviceAccount mirrors serviceAccountName.
  if (spec.value("serviceAccountName", "").empty() && !spec.value("serviceAccount", "").empty()) {
    spec["serviceAccountName"] = spec["serviceAccount"];
  }
  if (!spec.value("serviceAccountName", "").empty()) {
    spec["serviceAccount"] = spec["serviceAccountName"];
  }
  for (const char* list : kContainerLists) {
    if (spec.contains(list) && spec[list].is_array()) {
      for (auto& c : spec[list]) default_container(c);
    }
  }
  if (spec.contains("volumes") && spec["volumes"].is_array()) {
    for (auto& volume : spec["volumes"]) default_volume(volume);
  }
  // PodCondition.lastProbeTime is a metav1.Time struct: omitempty never omits it, and the zero
  // time serialises as null, so every condition shows it.
  if (pod.contains("status") && pod["status"].is_object() && pod["status"].contains("conditions") &&
      pod["status"]["conditions"].is_array()) {
    for (auto& condition : pod["status"]["conditions"]) {
      if (condition.is_object() && !condition.contains("lastProbeTime")) {
        condition["lastProbeTime"] = nullptr;
      }
    }
  }
}

// The projected volume the ServiceAccount admission plugin mounts into every container.
json token_volume(const std::string& name) {
  return {
      {"name", name},
      {"projected",
       {{"sources",
         json::array({{{"serviceAccountToken", {{"expirationSeconds", 3607}, {"path", "token"}}}},
                      {{"configMap",
                        {{"name", "kube-root-ca.crt"},
                         {"items", json::array({{{"key", "ca.crt"}, {"path", "ca.crt"}}})}}}},
                      {{"downwardAPI",
                        {{"items", json::array({{{"path", "namespace"},
                                                 {"fieldRef",
                                                  {{"apiVersion", "v1"},
                                                   {"fieldPath", "metadata.namespace"}}}}})}}}}})},
        {"defaultMode", 420}}}};
}

std::string random_suffix() {
  static const std::string alphabet = "bcdfghjklmnpqrstvwxz2456789";
  static thread_local std::mt19937 generator{std::random_device{}()};
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::string out;
  for (int i = 0; i < 5; ++i) out += alphabet[pick(generator)];
  return out;
}

void mount_token(json& spec) {
  bool mounted = false;
  for (const char* list : kContainerLists) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (const auto& c : spec[list]) {
      for (const auto& m : c.value("volumeMounts", json::array())) {
        mounted |= m.value("mountPath", "") == kTokenMountPath;
      }
    }
  }
  if (mounted) return;
  const std::string name = "kube-api-access-" + random_suffix();
  if (!spec.contains("volumes") || !spec["volumes"].is_array()) spec["volumes"] = json::array();
  spec["volumes"].push_back(token_volume(name));
  for (const char* list : {"initContainers", "containers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (auto& c : spec[list]) {
      if (!c.contains("volumeMounts") || !c["volumeMounts"].is_array()) {
        c["volumeMounts"] = json::array();
      }
      c["volumeMounts"].push_back(
          {{"name", name}, {"readOnly", true}, {"mountPath", kTokenMountPath}});
    }
  }
}

void add_default_tolerations(json& spec) {
  if (!spec.contains("tolerations") || !spec["tolerations"].is_array()) {
    spec["tolerations"] = json::array();
  }
  for (const char* key : {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}) {
    bool tolerated = false;
    for (const auto& t : spec["tolerations"]) {
      const std::string k = t.value("key", "");
      const std::string effect = t.value("effect", "");
      tolerated |= (k == key || k.empty()) && (effect == "NoExecute" || effect.empty());
    }
    if (!tolerated) {
      spec["tolerations"].push_back({{"key", key},
                                     {"operator", "Exists"},
                                     {"effect", "NoExecute"},
                                     {"tolerationSeconds", 300}});
    }
  }
}

// k8s.io/kubernetes/pkg/apis/core/helper/qos: only cpu and memory count.
std::string qos_class(const json& spec) {
  std::map<std::string, long double> requests;
  std::map<std::string, long double> limits;
  bool guaranteed = true;
  for (const char* list : {"containers", "initContainers"}) {
    for (const auto& c : spec.value(list, json::array())) {
      const json resources = c.value("resources", json::object());
      std::set<std::string> limits_found;
      for (const char* kind : {"requests", "limits"}) {
        const json entries = resources.value(kind, json::object());
        for (const auto& [name, quantity] : entries.items()) {
          if (name != "cpu" && name != "memory") continue;
          const auto value =
              parse_quantity(quantity.is_string() ? quantity.get<std::string>() : quantity.dump());
          if (!value || *value <= 0) continue;
          if (std::string(kind) == "requests") {
            requests[name] += *value;
          } else {
            limits[name] += *value;
            limits_found.insert(name);
          }
        }
      }
      if (limits_found.size() < 2) guaranteed = false;
    }
  }
  if (requests.empty() && limits.empty()) return "BestEffort";
  if (guaranteed) {
    for (const auto& [name, value] : requests) {
      if (!limits.contains(name) || limits[name] != value) guaranteed = false;
    }
  }
  return guaranteed && requests.size() == limits.size() ? "Guaranteed" : "Burstable";
}

void pod_admission_defaults(json& pod) {
  json& spec = pod["spec"];
  if (spec.value("serviceAccountName", "").empty()) spec["serviceAccountName"] = "default";
  spec["serviceAccount"] = spec["serviceAccountName"];
  if (spec.value("automountServiceAccountToken", true)) mount_token(spec);
  set_default(spec, "priority", 0);
  set_default(spec, "preemptionPolicy", "PreemptLowerPriority");
  add_default_tolerations(spec);
  pod["status"] = {{"phase", "Pending"}, {"qosClass", qos_class(spec)}};
}

// ---- validation ----

std::string text_of(const json& object, const char* field) {
  return object.contains(field) && object[field].is_string() ? object[field].get<std::string>()
                                                             : "";
}

std::vector<FieldError> validate_resources(const json& resources, const std::string& path) {
  std::vector<FieldError> out;
  if (!resources.is_object()) return out;
  const json limits = resources.value("limits", json::object());
  for (const char* kind : {"limits", "requests"}) {
    const json entries = resources.value(kind, json::object());
    for (const auto& [name, quantity] : entries.items()) {
      const std::string text = quantity.is_string() ? quantity.get<std::string>() : quantity.dump();
      const auto value = parse_quantity(text);
      const std::string field = v::key(path + "." + kind, name);
      if (value && *value < 0) {
        out.push_back(v::invalid(field, text, "must be greater than or equal to 0"));
      }
      if (std::string(kind) == "requests" && value && limits.contains(name)) {
        const json& limit = limits[name];
        const auto limit_value =
            parse_quantity(limit.is_string() ? limit.get<std::string>() : limit.dump());
        if (limit_value && *value > *limit_value) {
          out.push_back(
              v::invalid(field, text, "must be less than or equal to " + name + " limit"));
        }
      }
    }
  }
  return out;
}

std::vector<FieldError> validate_container(const json& c, const std::string& path,
                                           const std::set<std::string>& volumes,
                                           std::set<std::string>& names) {
  std::vector<FieldError> out;
  const std::string name = text_of(c, "name");
  if (name.empty()) {
    out.push_back(v::required(path + ".name"));
  } else {
    for (const auto& m : v::dns1123_label(name)) out.push_back(v::invalid(path + ".name", name, m));
    if (!names.insert(name).second) out.push_back(v::duplicate(path + ".name", name));
  }
  if (text_of(c, "image").empty()) out.push_back(v::required(path + ".image"));
  std::set<std::string> port_names;
  const json ports = c.value("ports", json::array());
  for (std::size_t i = 0; i < ports.size(); ++i) {
    const json& port = ports[i];
    const std::string p = v::index(path + ".ports", i);
    const std::string port_name = text_of(port, "name");
    if (!port_name.empty()) {
      for (const auto& m : v::port_name(port_name))
        out.push_back(v::invalid(p + ".name", port_name, m));
      if (!port_names.insert(port_name).second) out.push_back(v::duplicate(p + ".name", port_name));
    }
    const std::int64_t number = port.value("containerPort", std::int64_t{0});
    if (number == 0) {
      out.push_back(v::required(p + ".containerPort"));
    } else if (number < 1 || number > 65535) {
      out.push_back(
          v::invalid(p + ".containerPort", number, "must be between 1 and 65535, inclusive"));
    }
    const std::int64_t host_port = port.value("hostPort", std::int64_t{0});
    if (host_port != 0 && (host_port < 1 || host_port > 65535)) {
      out.push_back(
          v::invalid(p + ".hostPort", host_port, "must be between 1 and 65535, inclusive"));
    }
    const std::string protocol = text_of(port, "protocol");
    if (protocol.empty()) {
      out.push_back(v::required(p + ".protocol"));
    } else if (protocol != "TCP" && protocol != "UDP" && protocol != "SCTP") {
      out.push_back(v::not_supported(p + ".protocol", protocol, {"SCTP", "TCP", "UDP"}));
    }
  }
  const json env = c.value("env", json::array());
  for (std::size_t i = 0; i < env.size(); ++i) {
    const std::string p = v::index(path + ".env", i) + ".name";
    const std::string env_name = text_of(env[i], "name");
    if (env_name.empty()) {
      out.push_back(v::required(p));
    } else {
      for (const auto& m : v::env_var_name(env_name)) out.push_back(v::invalid(p, env_name, m));
    }
  }
  const json mounts = c.value("volumeMounts", json::array());
  for (std::size_t i = 0; i < mounts.size(); ++i) {
    const std::string p = v::index(path + ".volumeMounts", i);
    const std::string volume = text_of(mounts[i], "name");
    if (volume.empty()) {
      out.push_back(v::required(p + ".name"));
    } else if (!volumes.contains(volume)) {
      out.push_back(v::not_found(p + ".name", volume));
    }
    if (text_of(mounts[i], "mountPath").empty()) out.push_back(v::required(p + ".mountPath"));
  }
  v::append(out, validate_resources(c.value("resources", json::object()), path + ".resources"));
  const std::string pull = text_of(c, "imagePullPolicy");
  if (pull.empty()) {
    out.push_back(v::required(path + ".imagePullPolicy"));
  } else if (pull != "Always" && pull != "IfNotPresent" && pull != "Never") {
    out.push_back(
        v::not_supported(path + ".imagePullPolicy", pull, {"Always", "IfNotPresent", "Never"}));
  }
  const std::string message_policy = text_of(c, "terminationMessagePolicy");
  if (message_policy.empty()) {
    out.push_back(v::required(path + ".terminationMessagePolicy"));
  } else if (message_policy != "File" && message_policy != "FallbackToLogsOnError") {
    out.push_back(v::not_supported(path + ".terminationMessagePolicy", message_policy,
                                   {"File", "FallbackToLogsOnError"}));
  }
  return out;
}

std::vector<FieldError> validate_tolerations(const json& tolerations, const std::string& path) {
  std::vector<FieldError> out;
  if (!tolerations.is_array()) return out;
  for (std::size_t i = 0; i < tolerations.size(); ++i) {
    const json& t = tolerations[i];
    const std::string p = v::index(path, i);
    const std::string key = text_of(t, "key");
    if (!key.empty()) {
      for (const auto& m : v::qualified_name(key)) out.push_back(v::invalid(p + ".key", key, m));
    }
    const std::string op = text_of(t, "operator");
    if (key.empty() && op != "Exists") {
      out.push_back(v::invalid(p + ".operator", op,
                               "operator must be Exists when `key` is empty, which means \"match "
                               "all values and all keys\""));
    }
    if (t.contains("tolerationSeconds") && text_of(t, "effect") != "NoExecute") {
      out.push_back(v::invalid(p + ".effect", text_of(t, "effect"),
                               "effect must be 'NoExecute' when `tolerationSeconds` is set"));
    }
    if (op == "Exists" && !text_of(t, "value").empty()) {
      out.push_back(v::invalid(p + ".operator", t["value"],
                               "value must be empty when `operator` is 'Exists'"));
    } else if (!op.empty() && op != "Equal" && op != "Exists") {
      out.push_back(v::not_supported(p + ".operator", op, {"Equal", "Exists"}));
    }
    const std::string effect = text_of(t, "effect");
    if (!effect.empty() && effect != "NoSchedule" && effect != "PreferNoSchedule" &&
        effect != "NoExecute") {
      out.push_back(
          v::not_supported(p + ".effect", effect, {"NoSchedule", "PreferNoSchedule", "NoExecute"}));
    }
  }
  return out;
}

std::vector<FieldError> validate_pod_spec(const json& spec) {
  std::vector<FieldError> out;
  std::set<std::string> volumes;
  const json volume_list = spec.value("volumes", json::array());
  for (std::size_t i = 0; i < volume_list.size(); ++i) {
    const std::string p = v::index("spec.volumes", i) + ".name";
    const std::string name = text_of(volume_list[i], "name");
    if (name.empty()) {
      out.push_back(v::required(p));
    } else {
      for (const auto& m : v::dns1123_label(name)) out.push_back(v::invalid(p, name, m));
      if (!volumes.insert(name).second) out.push_back(v::duplicate(p, name));
    }
  }
  std::set<std::string> names;
  const json containers = spec.value("containers", json::array());
  if (!containers.is_array() || containers.empty()) out.push_back(v::required("spec.containers"));
  for (const char* list : {"containers", "initContainers"}) {
    const json items = spec.value(list, json::array());
    if (!items.is_array()) continue;
    for (std::size_t i = 0; i < items.size(); ++i) {
      v::append(out, validate_container(items[i], v::index("spec." + std::string(list), i), volumes,
                                        names));
    }
  }
  const std::string restart = text_of(spec, "restartPolicy");
  if (restart.empty()) {
    out.push_back(v::required("spec.restartPolicy"));
  } else if (restart != "Always" && restart != "OnFailure" && restart != "Never") {
    out.push_back(
        v::not_supported("spec.restartPolicy", restart, {"Always", "OnFailure", "Never"}));
  }
  const std::string dns = text_of(spec, "dnsPolicy");
  if (dns.empty()) {
    out.push_back(v::required("spec.dnsPolicy"));
  } else if (dns != "ClusterFirstWithHostNet" && dns != "ClusterFirst" && dns != "Default" &&
             dns != "None") {
    out.push_back(v::not_supported("spec.dnsPolicy", dns,
                                   {"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"}));
  }
  const std::string account = text_of(spec, "serviceAccountName");
  if (!account.empty()) {
    for (const auto& m : v::dns1123_subdomain(account)) {
      out.push_back(v::invalid("spec.serviceAccountName", account, m));
    }
  }
  const std::string node = text_of(spec, "nodeName");
  if (!node.empty()) {
    for (const auto& m : v::dns1123_subdomain(node))
      out.push_back(v::invalid("spec.nodeName", node, m));
  }
  if (spec.contains("activeDeadlineSeconds") && spec["activeDeadlineSeconds"].is_number()) {
    const auto seconds = spec["activeDeadlineSeconds"].get<std::int64_t>();
    if (seconds < 1 || seconds > kMaxInt32) {
      out.push_back(v::invalid("spec.activeDeadlineSeconds", seconds,
                               "must be between 1 and 2147483647, inclusive"));
    }
  }
  v::append(out, validate_tolerations(spec.value("tolerations", json()), "spec.tolerations"));
  return out;
}

std::vector<FieldError> validate_pod_create(const json& pod) {
  const json spec = pod.value("spec", json::object());
  std::vector<FieldError> out = validate_pod_spec(spec);
  if (spec.contains("ephemeralContainers") && spec["ephemeralContainers"].is_array() &&
      !spec["ephemeralContainers"].empty()) {
    out.push_back(v::forbidden("spec.ephemeralContainers", "cannot be set on create"));
  }
  return out;
}

const ApiResource& pod_info() { return served_builtin_resource("", "pods"); }

// Only additions to tolerations, and existing NoExecute ones may lower tolerationSeconds.
std::vector<FieldError> validate_added_tolerations(const json& now, const json& before) {
  std::vector<FieldError> out;
  for (const auto& old_toleration : before.is_array() ? before : json::array()) {
    bool kept = false;
    for (const auto& t : now.is_array() ? now : json::array()) {
      json a = t;
      json b = old_toleration;
      a.erase("tolerationSeconds");
      b.erase("tolerationSeconds");
      if (a == b) kept = true;
    }
    if (!kept) {
      out.push_back(v::forbidden("spec.tolerations",
                                 "existing toleration can not be modified except its "
                                 "tolerationSeconds"));
      break;
    }
  }
  return out;
}

std::vector<FieldError> validate_pod_update(const json& old_pod, const json& new_pod) {
  std::vector<FieldError> out = validate_object_metadata(pod_info(), new_pod);
  const json old_spec = old_pod.value("spec", json::object());
  const json new_spec = new_pod.value("spec", json::object());
  v::append(out, validate_pod_spec(new_spec));
  for (const char* list : {"containers", "initContainers"}) {
    const json now = new_spec.value(list, json::array());
    const json before = old_spec.value(list, json::array());
    const std::string path = "spec." + std::string(list);
    if (now.size() != before.size()) {
      out.push_back(v::forbidden(path, "pod updates may not add or remove containers"));
      return out;
    }
    for (std::size_t i = 0; i < now.size(); ++i) {
      const std::string image = text_of(now[i], "image");
      if (image.empty()) out.push_back(v::required(v::index(path, i) + ".image"));
      if (!image.empty() && (std::isspace(static_cast<unsigned char>(image.front())) ||
                             std::isspace(static_cast<unsigned char>(image.back())))) {
        out.push_back(v::invalid(v::index(path, i) + ".image", image,
                                 "must not have leading or trailing whitespace"));
      }
    }
  }
  if (new_spec.contains("activeDeadlineSeconds") && new_spec["activeDeadlineSeconds"].is_number()) {
    const auto now = new_spec["activeDeadlineSeconds"].get<std::int64_t>();
    if (now < 0 || now > kMaxInt32) {
      out.push_back(v::invalid("spec.activeDeadlineSeconds", now,
                               "must be between 0 and 2147483647, inclusive"));
      return out;
    }
    if (old_spec.contains("activeDeadlineSeconds") &&
        old_spec["activeDeadlineSeconds"].get<std::int64_t>() < now) {
      out.push_back(v::invalid("spec.activeDeadlineSeconds", now,
                               "must be less than or equal to previous value"));
      return out;
    }
  } else if (old_spec.contains("activeDeadlineSeconds")) {
    out.push_back(v::invalid("spec.activeDeadlineSeconds", nullptr,
                             "must not update from a positive integer to nil value"));
  }
  v::append(out, validate_added_tolerations(new_spec.value("tolerations", json()),
                                            old_spec.value("tolerations", json())));
  if (new_spec == old_spec) return out;

  // Everything else must stay: compare with the mutable fields taken from the old spec.
  json munged = new_spec;
  for (const char* list : {"containers", "initContainers"}) {
    if (!munged.contains(list)) continue;
    for (std::size_t i = 0; i < munged[list].size(); ++i) {
      munged[list][i]["image"] = old_spec[list][i].value("image", "");
    }
  }
  for (const char* field : {"activeDeadlineSeconds", "schedulingGates", "tolerations"}) {
    munged.erase(field);
    if (old_spec.contains(field)) munged[field] = old_spec[field];
  }
  if (old_spec.value("terminationGracePeriodSeconds", 0) < 0 &&
      munged.value("terminationGracePeriodSeconds", 0) == 1) {
    munged["terminationGracePeriodSeconds"] = old_spec["terminationGracePeriodSeconds"];
  }
  if (munged != old_spec) {
    out.push_back(v::forbidden(
        "spec",
        "pod updates may not change fields other than `spec.containers[*].image`, "
        "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only "
        "additions to existing tolerations) or `spec.terminationGracePeriodSeconds` (allow it to "
        "be set to 1 if it was previously negative)\n" +
            pod_spec_diff(old_spec, munged)));
  }
  return out;
}

}  // namespace

KindRules pod_rules() {
  return {v::name_is_dns1123_subdomain, pod_decode_defaults, pod_admission_defaults,
          validate_pod_create, validate_pod_update};
}

}  // namespace tessel::testing
