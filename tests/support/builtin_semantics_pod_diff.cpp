#include "tests/support/builtin_semantics_pod_diff.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "tests/support/builtin_semantics_quantity.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// The internal Go types, as far as the diff needs them.

enum class Kind { kString, kInt, kBool, kFloat, kPtr, kStruct, kSlice, kMap, kQuantity, kAny };

struct GoType;
struct GoField {
  std::string go_name;
  std::string json_name;
  const GoType* type;
};

struct GoType {
  Kind kind;
  std::string name;  // as go-cmp prints it: "core.PodSpec", "[]string", "map[string]string"
  const GoType* elem = nullptr;
  std::vector<GoField> fields;  // kStruct; empty for objects known only by their JSON
};

const GoType kString{Kind::kString, "string", nullptr, {}};
const GoType kInt{Kind::kInt, "int64", nullptr, {}};
const GoType kBool{Kind::kBool, "bool", nullptr, {}};
const GoType kFloat{Kind::kFloat, "float64", nullptr, {}};
const GoType kQuantity{Kind::kQuantity, "resource.Quantity", nullptr, {}};
const GoType kAny{Kind::kAny, "", nullptr, {}};  // resolved from the JSON value
const GoType kPtrInt{Kind::kPtr, "*int64", &kInt, {}};
const GoType kPtrBool{Kind::kPtr, "*bool", &kBool, {}};
const GoType kPtrString{Kind::kPtr, "*string", &kString, {}};
const GoType kStrings{Kind::kSlice, "[]string", &kString, {}};
const GoType kStringMap{Kind::kMap, "map[string]string", &kString, {}};
const GoType kResourceList{Kind::kMap, "core.ResourceList", &kQuantity, {}};
const GoType kObject{Kind::kStruct, "", nullptr, {}};  // a struct known only by its JSON
const GoType kPtrObject{Kind::kPtr, "", &kObject, {}};
const GoType kObjects{Kind::kSlice, "", &kObject, {}};

GoType make_struct(std::string name, std::vector<GoField> fields) {
  return {Kind::kStruct, std::move(name), nullptr, std::move(fields)};
}

const GoType& container_port() {
  static const GoType t =
      make_struct("core.ContainerPort", {{"Name", "name", &kString},
                                         {"HostPort", "hostPort", &kInt},
                                         {"ContainerPort", "containerPort", &kInt},
                                         {"Protocol", "protocol", &kString},
                                         {"HostIP", "hostIP", &kString}});
  return t;
}

const GoType& env_var() {
  static const GoType t = make_struct("core.EnvVar", {{"Name", "name", &kString},
                                                      {"Value", "value", &kString},
                                                      {"ValueFrom", "valueFrom", &kPtrObject}});
  return t;
}

const GoType& volume_mount() {
  static const GoType t =
      make_struct("core.VolumeMount", {{"Name", "name", &kString},
                                       {"ReadOnly", "readOnly", &kBool},
                                       {"MountPath", "mountPath", &kString},
                                       {"SubPath", "subPath", &kString},
                                       {"MountPropagation", "mountPropagation", &kPtrString},
                                       {"SubPathExpr", "subPathExpr", &kString}});
  return t;
}

const GoType& resource_requirements() {
  static const GoType t =
      make_struct("core.ResourceRequirements", {{"Limits", "limits", &kResourceList},
                                                {"Requests", "requests", &kResourceList},
                                                {"Claims", "claims", &kObjects}});
  return t;
}

const GoType& slice_of(const GoType& elem) {
  static std::map<const GoType*, std::unique_ptr<GoType>> slices;
  auto& slot = slices[&elem];
  if (!slot) slot = std::make_unique<GoType>(GoType{Kind::kSlice, "[]" + elem.name, &elem, {}});
  return *slot;
}

const GoType& pointer_to(const GoType& elem) {
  static std::map<const GoType*, std::unique_ptr<GoType>> pointers;
  auto& slot = pointers[&elem];
  if (!slot) slot = std::make_unique<GoType>(GoType{Kind::kPtr, "*" + elem.name, &elem, {}});
  return *slot;
}

const GoType& container() {
  static const GoType t = make_struct(
      "core.Container", {{"Name", "name", &kString},
                         {"Image", "image", &kString},
                         {"Command", "command", &kStrings},
                         {"Args", "args", &kStrings},
                         {"WorkingDir", "workingDir", &kString},
                         {"Ports", "ports", &slice_of(container_port())},
                         {"EnvFrom", "envFrom", &kObjects},
                         {"Env", "env", &slice_of(env_var())},
                         {"Resources", "resources", &resource_requirements()},
                         {"VolumeMounts", "volumeMounts", &slice_of(volume_mount())},
                         {"VolumeDevices", "volumeDevices", &kObjects},
                         {"LivenessProbe", "livenessProbe", &kPtrObject},
                         {"ReadinessProbe", "readinessProbe", &kPtrObject},
                         {"StartupProbe", "startupProbe", &kPtrObject},
                         {"Lifecycle", "lifecycle", &kPtrObject},
                         {"TerminationMessagePath", "terminationMessagePath", &kString},
                         {"TerminationMessagePolicy", "terminationMessagePolicy", &kString},
                         {"ImagePullPolicy", "imagePullPolicy", &kString},
                         {"SecurityContext", "securityContext", &kPtrObject},
                         {"Stdin", "stdin", &kBool},
                         {"StdinOnce", "stdinOnce", &kBool},
                         {"TTY", "tty", &kBool}});
  return t;
}

const GoType& toleration() {
  static const GoType t =
      make_struct("core.Toleration", {{"Key", "key", &kString},
                                      {"Operator", "operator", &kString},
                                      {"Value", "value", &kString},
                                      {"Effect", "effect", &kString},
                                      {"TolerationSeconds", "tolerationSeconds", &kPtrInt}});
  return t;
}

// Internally the host namespace switches live in the pod security context.
const GoType& pod_security_context() {
  static const GoType t = make_struct(
      "core.PodSecurityContext", {{"HostNetwork", "hostNetwork", &kBool},
                                  {"HostPID", "hostPID", &kBool},
                                  {"HostIPC", "hostIPC", &kBool},
                                  {"ShareProcessNamespace", "shareProcessNamespace", &kPtrBool},
                                  {"HostUsers", "hostUsers", &kPtrBool},
                                  {"SELinuxOptions", "seLinuxOptions", &kPtrObject},
                                  {"WindowsOptions", "windowsOptions", &kPtrObject},
                                  {"RunAsUser", "runAsUser", &kPtrInt},
                                  {"RunAsGroup", "runAsGroup", &kPtrInt},
                                  {"RunAsNonRoot", "runAsNonRoot", &kPtrBool},
                                  {"SupplementalGroups", "supplementalGroups", &kObjects},
                                  {"FSGroup", "fsGroup", &kPtrInt},
                                  {"FSGroupChangePolicy", "fsGroupChangePolicy", &kPtrString},
                                  {"Sysctls", "sysctls", &kObjects},
                                  {"SeccompProfile", "seccompProfile", &kPtrObject}});
  return t;
}

const GoType& volume() {
  static const GoType source{Kind::kStruct, "core.VolumeSource", nullptr, {}};
  static const GoType t =
      make_struct("core.Volume", {{"Name", "name", &kString}, {"VolumeSource", "", &source}});
  return t;
}

const GoType& local_object_reference() {
  static const GoType t = make_struct("core.LocalObjectReference", {{"Name", "name", &kString}});
  return t;
}

const GoType& pod_spec() {
  static const GoType t =
      make_struct("core.PodSpec",
                  {{"Volumes", "volumes", &slice_of(volume())},
                   {"InitContainers", "initContainers", &slice_of(container())},
                   {"Containers", "containers", &slice_of(container())},
                   {"EphemeralContainers", "ephemeralContainers", &kObjects},
                   {"RestartPolicy", "restartPolicy", &kString},
                   {"TerminationGracePeriodSeconds", "terminationGracePeriodSeconds", &kPtrInt},
                   {"ActiveDeadlineSeconds", "activeDeadlineSeconds", &kPtrInt},
                   {"DNSPolicy", "dnsPolicy", &kString},
                   {"NodeSelector", "nodeSelector", &kStringMap},
                   {"ServiceAccountName", "serviceAccountName", &kString},
                   {"AutomountServiceAccountToken", "automountServiceAccountToken", &kPtrBool},
                   {"NodeName", "nodeName", &kString},
                   {"SecurityContext", "securityContext", &pointer_to(pod_security_context())},
                   {"ImagePullSecrets", "imagePullSecrets", &slice_of(local_object_reference())},
                   {"Hostname", "hostname", &kString},
                   {"Subdomain", "subdomain", &kString},
                   {"SetHostnameAsFQDN", "setHostnameAsFQDN", &kPtrBool},
                   {"Affinity", "affinity", &kPtrObject},
                   {"SchedulerName", "schedulerName", &kString},
                   {"Tolerations", "tolerations", &slice_of(toleration())},
                   {"HostAliases", "hostAliases", &kObjects},
                   {"PriorityClassName", "priorityClassName", &kString},
                   {"Priority", "priority", &kPtrInt},
                   {"PreemptionPolicy", "preemptionPolicy", &kPtrString},
                   {"DNSConfig", "dnsConfig", &kPtrObject},
                   {"ReadinessGates", "readinessGates", &kObjects},
                   {"RuntimeClassName", "runtimeClassName", &kPtrString},
                   {"Overhead", "overhead", &kResourceList},
                   {"EnableServiceLinks", "enableServiceLinks", &kPtrBool},
                   {"TopologySpreadConstraints", "topologySpreadConstraints", &kObjects},
                   {"OS", "os", &kPtrObject},
                   {"SchedulingGates", "schedulingGates", &kObjects},
                   {"ResourceClaims", "resourceClaims", &kObjects}});
  return t;
}

// The v1 JSON of a Pod spec as the internal type holds it.
json to_internal(json spec) {
  spec.erase("serviceAccount");
  json security = spec.contains("securityContext") ? spec["securityContext"] : json::object();
  for (const char* host :
       {"hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "hostUsers"}) {
    if (spec.contains(host)) {
      security[host] = spec[host];
      spec.erase(host);
    }
  }
  spec["securityContext"] = security;
  if (spec.contains("volumes") && spec["volumes"].is_array()) {
    for (auto& v : spec["volumes"]) {
      json source = v;
      source.erase("name");
      v = {{"name", v.value("name", "")}, {"", source}};
    }
  }
  return spec;
}

// ---------------------------------------------------------------------------------------------
// Values

bool is_null(const json* v) { return v == nullptr || v->is_null(); }

// The type of a value known only by its JSON.
const GoType& resolve(const GoType& t, const json* x, const json* y) {
  if (t.kind != Kind::kAny) return t;
  const json* v = !is_null(x) ? x : y;
  if (is_null(v)) return kString;
  if (v->is_string()) return kString;
  if (v->is_boolean()) return kBool;
  if (v->is_number_float()) return kFloat;
  if (v->is_number()) return kInt;
  if (v->is_array()) return kObjects;
  return kObject;
}

std::string go_field_name(const std::string& json_name) {
  static const std::map<std::string, std::string> special = {
      {"ip", "IP"},     {"uid", "UID"},     {"tcpSocket", "TCPSocket"}, {"httpGet", "HTTPGet"},
      {"grpc", "GRPC"}, {"podIP", "PodIP"}, {"hostIP", "HostIP"}};
  if (const auto it = special.find(json_name); it != special.end()) return it->second;
  std::string out = json_name;
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

// A field of an object; the embedded VolumeSource is kept under "" by to_internal.
const json* member(const json* object, const std::string& name) {
  if (is_null(object) || !object->is_object()) return nullptr;
  const auto it = object->find(name);
  return it == object->end() ? nullptr : &*it;
}

std::vector<GoField> fields_of(const GoType& t, const json* x, const json* y) {
  if (!t.fields.empty()) return t.fields;
  std::set<std::string> names;
  for (const json* side : {x, y}) {
    if (is_null(side) || !side->is_object()) continue;
    for (const auto& [k, unused] : side->items()) names.insert(k);
  }
  std::vector<GoField> out;
  for (const auto& n : names) out.push_back({go_field_name(n), n, &kAny});
  return out;
}

const json* field_value(const json* object, const GoField& f) {
  return member(object, f.json_name);
}

bool is_zero(const GoType& type, const json* v) {
  const GoType& t = resolve(type, v, nullptr);
  if (is_null(v)) return true;
  switch (t.kind) {
    case Kind::kString:
      return v->is_string() && v->get<std::string>().empty();
    case Kind::kInt:
    case Kind::kFloat:
      return v->is_number() && v->get<double>() == 0;
    case Kind::kBool:
      return v->is_boolean() && !v->get<bool>();
    case Kind::kStruct:
      for (const auto& f : fields_of(t, v, nullptr)) {
        if (!is_zero(*f.type, field_value(v, f))) return false;
      }
      return true;
    default:
      return false;  // a non-nil pointer, slice or map is not zero
  }
}

bool equal(const GoType& type, const json* x, const json* y) {
  const GoType& t = resolve(type, x, y);
  switch (t.kind) {
    case Kind::kStruct:
      for (const auto& f : fields_of(t, x, y)) {
        if (!equal(*f.type, field_value(x, f), field_value(y, f))) return false;
      }
      return true;
    case Kind::kPtr:
    case Kind::kSlice:
    case Kind::kMap:
      if (is_null(x) || is_null(y)) return is_null(x) == is_null(y);
      if (t.kind == Kind::kPtr) return equal(*t.elem, x, y);
      return *x == *y;
    default:
      if (is_null(x) || is_null(y)) return is_zero(t, x) && is_zero(t, y);
      return *x == *y;
  }
}

// ---------------------------------------------------------------------------------------------
// go-cmp's text nodes: a line, or a wrapped list of records.

struct Text;
using TextPtr = std::shared_ptr<Text>;

struct Record {
  char diff = ' ';  // ' ', '-', '+'
  std::string key;
  TextPtr value;
  std::string comment;
  bool ellipsis = false;
};

struct Text {
  bool is_line = true;
  std::string line;
  std::string prefix;
  std::vector<Record> records;
  std::string suffix;
};

TextPtr line(std::string s) {
  auto t = std::make_shared<Text>();
  t->line = std::move(s);
  return t;
}

TextPtr wrap(std::string prefix, std::vector<Record> records, std::string suffix = "}") {
  auto t = std::make_shared<Text>();
  t->is_line = false;
  t->prefix = std::move(prefix);
  t->records = std::move(records);
  t->suffix = std::move(suffix);
  return t;
}

Record ellipsis(const std::string& comment = "") {
  Record r;
  r.ellipsis = true;
  r.comment = comment;
  return r;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// resource.Quantity as go-cmp prints the struct (its String method has a pointer receiver).
TextPtr format_quantity(const json& v, int verbosity) {
  const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  std::string format = "DecimalSI";
  if (text.find('i') != std::string::npos) format = "BinarySI";
  if (text.find_first_of("eE") != std::string::npos) format = "DecimalExponent";
  if (verbosity <= 1) {
    return wrap("{", {{' ', "i", line("{...}"), "", false},
                      {' ', "Format", line(quote(format)), "", false}});
  }
  long double value = parse_quantity(text).value_or(0);
  int scale = 0;
  while (value != std::floor(value) && scale > -9) {
    value *= 10;
    --scale;
  }
  std::vector<Record> amount = {
      {' ', "value", line(std::to_string(static_cast<long long>(value))), "", false}};
  if (scale != 0) amount.push_back({' ', "scale", line(std::to_string(scale)), "", false});
  return wrap("{", {{' ', "i", wrap("{", amount), "", false},
                    {' ', "Format", line(quote(format)), "", false}});
}

std::string scalar_text(const GoType& t, const json* v) {
  switch (t.kind) {
    case Kind::kString:
      return quote(is_null(v) ? "" : v->is_string() ? v->get<std::string>() : v->dump());
    case Kind::kBool:
      return is_null(v) ? "false" : v->dump();
    default:
      return is_null(v) ? "0" : v->dump();
  }
}

std::size_t max_records(int verbosity) {
  return verbosity <= 0 ? 0 : static_cast<std::size_t>(((1 << verbosity) >> 1) << 2);
}

// go-cmp's FormatValue: one value on its own (identical records use verbosity 1 at every
// level; removed and inserted values start at 3 and lose one per level).
TextPtr format_value(const GoType& type, const json* v, char mode, bool elide_type, int verbosity,
                     bool reset_verbosity) {
  const GoType& t = resolve(type, v, nullptr);
  const int child_verbosity = reset_verbosity ? verbosity : verbosity - 1;
  const auto typed = [&](std::vector<Record> records) {
    const bool show_type = !elide_type && mode != ' ' && !t.name.empty();
    return wrap(show_type ? t.name + "{" : "{", std::move(records));
  };
  switch (t.kind) {
    case Kind::kPtr:
      if (is_null(v)) return line("nil");
      {
        TextPtr inner = format_value(*t.elem, v, mode, elide_type, verbosity, reset_verbosity);
        if (inner->is_line) return line("&" + inner->line);
        inner->prefix = "&" + inner->prefix;
        return inner;
      }
    case Kind::kStruct: {
      std::vector<Record> records;
      const std::size_t limit = max_records(verbosity);
      for (const auto& f : fields_of(t, v, nullptr)) {
        const json* fv = field_value(v, f);
        if (is_zero(*f.type, fv)) continue;
        if (records.size() == limit) {
          records.push_back(ellipsis());
          break;
        }
        records.push_back({' ', f.go_name,
                           format_value(*f.type, fv, mode, false, child_verbosity, reset_verbosity),
                           "", false});
      }
      return typed(std::move(records));
    }
    case Kind::kSlice:
    case Kind::kMap: {
      if (is_null(v)) return line("nil");
      std::vector<Record> records;
      const std::size_t limit = max_records(verbosity);
      const auto add = [&](const std::string& key, const json& item) {
        if (records.size() == limit) {
          records.push_back(ellipsis());
          return false;
        }
        records.push_back(
            {' ', key, format_value(*t.elem, &item, mode, true, child_verbosity, reset_verbosity),
             "", false});
        return true;
      };
      if (t.kind == Kind::kSlice) {
        for (const auto& item : *v) {
          if (!add("", item)) break;
        }
      } else {
        for (const auto& [k, item] : v->items()) {
          if (!add(quote(k), item)) break;
        }
      }
      return typed(std::move(records));
    }
    case Kind::kQuantity:
      return is_null(v) ? line("{}") : format_quantity(*v, verbosity);
    default:
      return line(scalar_text(t, v));
  }
}

TextPtr identical(const GoType& t, const json* v) { return format_value(t, v, ' ', true, 1, true); }
TextPtr removed(const GoType& t, const json* v, bool elide) {
  return format_value(t, v, '-', elide, 3, false);
}
TextPtr inserted(const GoType& t, const json* v, bool elide) {
  return format_value(t, v, '+', elide, 3, false);
}

// ---------------------------------------------------------------------------------------------
// Differences

struct Item {
  std::string key;
  const GoType* type;
  const json* x;
  const json* y;
  bool has_x = true;
  bool has_y = true;
  bool same() const { return has_x && has_y && equal(*type, x, y); }
};

TextPtr format_diff(const GoType& type, const json* x, const json* y, bool elide_type);

// The depth of go-cmp's value tree under two values, and the number of its direct children:
// a value whose children are all leaves is printed as a "-"/"+" pair rather than opened up.
int depth(const GoType& type, const json* x, const json* y);

std::vector<std::pair<int, int>> edit_script(const GoType& elem, const json& xs, const json& ys);

bool leaf(const GoType& type, const json* x, const json* y) {
  const GoType& t = resolve(type, x, y);
  switch (t.kind) {
    case Kind::kPtr:
    case Kind::kSlice:
    case Kind::kMap:
      return is_null(x) || is_null(y);
    case Kind::kStruct:
      return false;
    default:
      return true;
  }
}

int children(const GoType& type, const json* x, const json* y) {
  const GoType& t = resolve(type, x, y);
  if (leaf(t, x, y)) return 0;
  switch (t.kind) {
    case Kind::kPtr:
      return 1;
    case Kind::kStruct:
      return static_cast<int>(fields_of(t, x, y).size());
    case Kind::kSlice:
      return static_cast<int>(edit_script(*t.elem, *x, *y).size());
    default: {
      std::set<std::string> keys;
      for (const auto& [k, unused] : x->items()) keys.insert(k);
      for (const auto& [k, unused] : y->items()) keys.insert(k);
      return static_cast<int>(keys.size());
    }
  }
}

int depth(const GoType& type, const json* x, const json* y) {
  const GoType& t = resolve(type, x, y);
  if (leaf(t, x, y)) return 0;
  int deepest = 0;
  switch (t.kind) {
    case Kind::kPtr:
      return 1 + depth(*t.elem, x, y);
    case Kind::kStruct:
      for (const auto& f : fields_of(t, x, y)) {
        deepest = std::max(deepest, depth(*f.type, field_value(x, f), field_value(y, f)));
      }
      return 1 + deepest;
    case Kind::kSlice:
      for (const auto& [i, j] : edit_script(*t.elem, *x, *y)) {
        if (i >= 0 && j >= 0) deepest = std::max(deepest, depth(*t.elem, &(*x)[i], &(*y)[j]));
      }
      return 1 + deepest;
    default:
      for (const auto& [k, value] : x->items()) {
        if (y->contains(k)) deepest = std::max(deepest, depth(*t.elem, &value, &(*y)[k]));
      }
      return 1 + deepest;
  }
}

// Leaves that agree and disagree under two values, for go-cmp's "similar" test.
void count_leaves(const GoType& type, const json* x, const json* y, int& same, int& different) {
  const GoType& t = resolve(type, x, y);
  if (leaf(t, x, y) || t.kind == Kind::kSlice || t.kind == Kind::kMap) {
    (equal(t, x, y) ? same : different) += 1;
    return;
  }
  if (t.kind == Kind::kPtr) return count_leaves(*t.elem, x, y, same, different);
  for (const auto& f : fields_of(t, x, y)) {
    count_leaves(*f.type, field_value(x, f), field_value(y, f), same, different);
  }
}

bool similar(const GoType& elem, const json& x, const json& y) {
  int same = 0;
  int different = 0;
  count_leaves(elem, &x, &y, same, different);
  return same + 1 >= different;
}

// Pairs (i, j): both indexes for identical or modified elements, -1 on one side for an element
// only the other list has. Most identical elements first, then most modified pairs, earliest.
std::vector<std::pair<int, int>> edit_script(const GoType& elem, const json& xs, const json& ys) {
  const int n = static_cast<int>(xs.size());
  const int m = static_cast<int>(ys.size());
  // score[i][j]: best (identical, modified) for xs[i:], ys[j:]
  std::vector<std::vector<std::pair<int, int>>> score(n + 1,
                                                      std::vector<std::pair<int, int>>(m + 1));
  std::vector<std::vector<int>> kind(n + 1,
                                     std::vector<int>(m + 1, 0));  // 0 x-only, 1 y-only, 2 pair
  for (int i = n; i >= 0; --i) {
    for (int j = m; j >= 0; --j) {
      if (i == n && j == m) continue;
      std::pair<int, int> best{-1, -1};
      if (i < n && j < m) {
        const bool same = equal(elem, &xs[i], &ys[j]);
        if (same || similar(elem, xs[i], ys[j])) {
          auto s = score[i + 1][j + 1];
          (same ? s.first : s.second) += 1;
          best = s;
          kind[i][j] = 2;
        }
      }
      if (i < n && score[i + 1][j] > best) {
        best = score[i + 1][j];
        kind[i][j] = 0;
      }
      if (j < m && score[i][j + 1] > best) {
        best = score[i][j + 1];
        kind[i][j] = 1;
      }
      score[i][j] = best;
    }
  }
  std::vector<std::pair<int, int>> out;
  int i = 0;
  int j = 0;
  while (i < n || j < m) {
    switch (kind[i][j]) {
      case 2:
        out.emplace_back(i++, j++);
        break;
      case 0:
        out.emplace_back(i++, -1);
        break;
      default:
        out.emplace_back(-1, j++);
    }
  }
  return out;
}

// go-cmp's formatDiffList: differing records in full, runs of equal ones shortened to two
// records of context on each side and "... // N identical <name>s".
std::vector<Record> diff_records(const std::vector<Item>& items, const std::string& name,
                                 bool elide_types) {
  constexpr std::size_t kContext = 2;
  std::vector<std::pair<bool, std::vector<const Item*>>> groups;
  for (const auto& item : items) {
    const bool same = item.same();
    if (groups.empty() || groups.back().first != same) groups.push_back({same, {}});
    groups.back().second.push_back(&item);
  }
  std::vector<Record> out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& [same, group] = groups[g];
    if (same) {
      const std::size_t count = group.size();
      std::size_t lo = 0;
      std::size_t hi = 0;
      while (lo < kContext && lo + hi < count && g != 0) ++lo;
      while (hi < kContext && lo + hi < count && g != groups.size() - 1) ++hi;
      if (count - (lo + hi) == 1) ++hi;
      for (std::size_t k = 0; k < lo; ++k) {
        out.push_back({' ', group[k]->key, identical(*group[k]->type, group[k]->x), "", false});
      }
      if (count > lo + hi) {
        const std::size_t elided = count - lo - hi;
        out.push_back(
            ellipsis(std::to_string(elided) + " identical " + name + (elided > 1 ? "s" : "")));
      }
      for (std::size_t k = count - hi; k < count; ++k) {
        out.push_back({' ', group[k]->key, identical(*group[k]->type, group[k]->x), "", false});
      }
      continue;
    }
    for (const Item* item : group) {
      const bool elide = elide_types;
      if (!item->has_y) {
        out.push_back({'-', item->key, removed(*item->type, item->x, elide), "", false});
      } else if (!item->has_x) {
        out.push_back({'+', item->key, inserted(*item->type, item->y, elide), "", false});
      } else if (children(*item->type, item->x, item->y) == depth(*item->type, item->x, item->y)) {
        out.push_back({'-', item->key, removed(*item->type, item->x, elide), "", false});
        out.push_back({'+', item->key, inserted(*item->type, item->y, elide), "", false});
      } else {
        out.push_back(
            {' ', item->key, format_diff(*item->type, item->x, item->y, elide), "", false});
      }
    }
  }
  return out;
}

TextPtr format_diff(const GoType& type, const json* x, const json* y, bool elide_type) {
  const GoType& t = resolve(type, x, y);
  const std::string open = elide_type || t.name.empty() ? "{" : t.name + "{";
  switch (t.kind) {
    case Kind::kPtr: {
      TextPtr inner = format_diff(*t.elem, x, y, elide_type);
      inner->prefix = "&" + inner->prefix;
      return inner;
    }
    case Kind::kStruct: {
      std::vector<Item> items;
      for (const auto& f : fields_of(t, x, y)) {
        items.push_back({f.go_name, f.type, field_value(x, f), field_value(y, f)});
      }
      return wrap(open, diff_records(items, "field", false));
    }
    case Kind::kSlice: {
      std::vector<Item> items;
      for (const auto& [i, j] : edit_script(*t.elem, *x, *y)) {
        items.push_back(
            {"", t.elem, i >= 0 ? &(*x)[i] : nullptr, j >= 0 ? &(*y)[j] : nullptr, i >= 0, j >= 0});
      }
      return wrap(open, diff_records(items, "element", true));
    }
    default: {
      std::set<std::string> keys;
      for (const auto& [k, unused] : x->items()) keys.insert(k);
      for (const auto& [k, unused] : y->items()) keys.insert(k);
      std::vector<Item> items;
      for (const auto& k : keys) {
        items.push_back({quote(k), t.elem, x->contains(k) ? &(*x)[k] : nullptr,
                         y->contains(k) ? &(*y)[k] : nullptr, x->contains(k), y->contains(k)});
      }
      return wrap(open, diff_records(items, "entry", true));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Printing

constexpr std::size_t kMaxColumnLength = 80;

// go-cmp prints a node on one line where it can: no "-"/"+" records, no comments, nothing that
// is itself several lines, and for a removed or inserted node at most 80 columns.
TextPtr compact(const TextPtr& node, char mode) {
  if (node->is_line) return node;
  auto out = std::make_shared<Text>(*node);
  bool multi_line = false;
  std::string list;
  for (std::size_t i = 0; i < out->records.size(); ++i) {
    Record& r = out->records[i];
    const char d = r.diff != ' ' ? r.diff : mode;
    if (r.diff != ' ') multi_line = true;
    if (!r.comment.empty()) multi_line = true;
    if (r.ellipsis) {
      list += "...";
    } else {
      r.value = compact(r.value, d);
      if (!r.value->is_line) multi_line = true;
      list += r.key + (r.key.empty() ? "" : ": ") + (r.value->is_line ? r.value->line : "");
    }
    if (i + 1 < out->records.size()) list += ", ";
  }
  if ((mode == '-' || mode == '+') && list.size() > kMaxColumnLength) multi_line = true;
  const std::string text = out->prefix + list + out->suffix;
  if (!multi_line) return line(text);
  return out;
}

std::string indent(char mode, int depth) {
  std::string out = mode == '-' ? "- " : mode == '+' ? "+ " : "  ";
  return out + std::string(static_cast<std::size_t>(depth), '\t');
}

void expand(const Text& node, char mode, int depth, std::string& out) {
  if (node.is_line) {
    out += node.line;
    return;
  }
  out += node.prefix;
  // Keys of consecutive one-line records are padded to the same width.
  std::vector<std::size_t> pad(node.records.size(), 0);
  for (std::size_t start = 0; start < node.records.size();) {
    const auto aligned = [&](const Record& r) {
      return !r.ellipsis && !r.key.empty() && r.value->is_line;
    };
    if (!aligned(node.records[start])) {
      ++start;
      continue;
    }
    std::size_t end = start;
    std::size_t widest = 0;
    while (end < node.records.size() && aligned(node.records[end])) {
      widest = std::max(widest, node.records[end].key.size());
      ++end;
    }
    for (std::size_t k = start; k < end; ++k) pad[k] = widest - node.records[k].key.size();
    start = end;
  }
  for (std::size_t i = 0; i < node.records.size(); ++i) {
    const Record& r = node.records[i];
    const char d = r.diff != ' ' ? r.diff : mode;
    out += "\n" + indent(d, depth + 1);
    if (r.ellipsis) {
      out += "...";
      if (!r.comment.empty()) out += " // " + r.comment;
      continue;
    }
    if (!r.key.empty()) out += r.key + ": " + std::string(pad[i], ' ');
    expand(*r.value, d, depth + 1, out);
    out += ",";
  }
  out += "\n" + indent(mode, depth) + node.suffix;
}

}  // namespace

std::string pod_spec_diff(const json& old_spec, const json& new_spec) {
  const json x = to_internal(old_spec);
  const json y = to_internal(new_spec);
  if (equal(pod_spec(), &x, &y)) return "";
  const TextPtr root = compact(format_diff(pod_spec(), &x, &y, false), ' ');
  std::string out = indent(' ', 0);
  expand(*root, ' ', 0, out);
  return out + "\n";
}

}  // namespace tessel::testing
