#include "tests/support/api_admission_config.h"

#include <arpa/inet.h>

#include <set>

#include "tests/support/builtin_semantics_errors.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
namespace v = validation;

const std::vector<std::string> kFailurePolicies = {"Fail", "Ignore"};
const std::vector<std::string> kMatchPolicies = {"Equivalent", "Exact"};
// v1 accepts only webhooks without side effects (Some and Unknown were v1beta1's).
const std::vector<std::string> kNoSideEffects = {"None", "NoneOnDryRun"};
const std::vector<std::string> kOperations = {"*", "CONNECT", "CREATE", "DELETE", "UPDATE"};
const std::vector<std::string> kScopes = {"*", "Cluster", "Namespaced"};
const std::vector<std::string> kReinvocationPolicies = {"IfNeeded", "Never"};
const std::vector<std::string> kProtocols = {"SCTP", "TCP", "UDP"};
const std::vector<std::string> kAdmissionReviewVersions = {"v1", "v1beta1"};
constexpr std::int64_t kDefaultTimeoutSeconds = 10;
constexpr std::int64_t kMinTimeoutSeconds = 1;
constexpr std::int64_t kMaxTimeoutSeconds = 30;
constexpr std::int64_t kDefaultServicePort = 443;
const std::string kUrlForm = "; desired format: https://host[/path]";

json array_at(const json& object, const char* field) {
  return object.is_object() && object.contains(field) && object[field].is_array() ? object[field]
                                                                                  : json::array();
}

bool contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

bool has_wildcard(const json& list) {
  for (const json& entry : list) {
    if (entry == "*") return true;
  }
  return false;
}

std::vector<std::string> port_number_errors(const json& port) {
  if (!port.is_number_integer() || port.get<std::int64_t>() < 1 ||
      port.get<std::int64_t>() > 65535) {
    return {"must be between 1 and 65535, inclusive"};
  }
  return {};
}

// ---- defaults ----

void default_webhooks(json& configuration, bool mutating) {
  if (!configuration.contains("webhooks") || !configuration["webhooks"].is_array()) return;
  for (json& hook : configuration["webhooks"]) {
    if (!hook.is_object()) continue;
    if (!hook.contains("failurePolicy")) hook["failurePolicy"] = "Fail";
    if (!hook.contains("matchPolicy")) hook["matchPolicy"] = "Equivalent";
    if (!hook.contains("namespaceSelector")) hook["namespaceSelector"] = json::object();
    if (!hook.contains("objectSelector")) hook["objectSelector"] = json::object();
    if (!hook.contains("timeoutSeconds")) hook["timeoutSeconds"] = kDefaultTimeoutSeconds;
    if (mutating && !hook.contains("reinvocationPolicy")) hook["reinvocationPolicy"] = "Never";
    if (hook.contains("rules") && hook["rules"].is_array()) {
      for (json& rule : hook["rules"]) {
        if (rule.is_object() && !rule.contains("scope")) rule["scope"] = "*";
      }
    }
    json& client = hook["clientConfig"];
    if (client.is_object() && client.contains("service") && client["service"].is_object() &&
        !client["service"].contains("port")) {
      client["service"]["port"] = kDefaultServicePort;
    }
  }
}

void default_validating(json& configuration) { default_webhooks(configuration, false); }
void default_mutating(json& configuration) { default_webhooks(configuration, true); }

// ---- validation ----

std::vector<FieldError> fully_qualified_name(const std::string& field, const std::string& name) {
  if (name.empty()) return {v::required(field)};
  if (const auto errors = v::dns1123_subdomain(name); !errors.empty()) {
    std::string joined;
    for (const std::string& error : errors) joined += (joined.empty() ? "" : ",") + error;
    return {v::invalid(field, name, joined)};
  }
  if (std::count(name.begin(), name.end(), '.') < 2) {
    return {v::invalid(field, name,
                       "should be a domain with at least three segments separated by dots")};
  }
  return {};
}

std::vector<FieldError> validate_resources(const json& resources, const std::string& field) {
  std::vector<FieldError> out;
  if (resources.empty()) out.push_back(v::required(field));
  std::set<std::string> with_wildcard_sub;         // x/*
  std::set<std::string> sub_of_wildcard_resource;  // */x
  bool double_wildcard = false;
  bool single_wildcard = false;
  bool plain_resource = false;
  for (std::size_t i = 0; i < resources.size(); ++i) {
    const std::string entry = resources[i].is_string() ? resources[i].get<std::string>() : "";
    const std::string at = v::index(field, i);
    if (entry.empty()) {
      out.push_back(v::required(at));
      continue;
    }
    if (entry == "*/*") double_wildcard = true;
    if (entry == "*") single_wildcard = true;
    const std::size_t slash = entry.find('/');
    if (slash == std::string::npos) {
      plain_resource = entry != "*";
      continue;
    }
    const std::string resource = entry.substr(0, slash);
    const std::string sub = entry.substr(slash + 1);
    if (with_wildcard_sub.count(resource)) {
      out.push_back(
          v::invalid(at, entry, "if '" + resource + "/*' is present, must not specify " + entry));
    }
    if (sub_of_wildcard_resource.count(sub)) {
      out.push_back(
          v::invalid(at, entry, "if '*/" + sub + "' is present, must not specify " + entry));
    }
    if (sub == "*") with_wildcard_sub.insert(resource);
    if (resource == "*") sub_of_wildcard_resource.insert(sub);
  }
  if (resources.size() > 1 && double_wildcard) {
    out.push_back(
        v::invalid(field, resources, "if '*/*' is present, must not specify other resources"));
  }
  if (single_wildcard && plain_resource) {
    out.push_back(v::invalid(field, resources,
                             "if '*' is present, must not specify other resources without "
                             "subresources"));
  }
  return out;
}

std::vector<FieldError> validate_rule(const json& rule, const std::string& field) {
  std::vector<FieldError> out;
  const json operations = array_at(rule, "operations");
  if (operations.empty()) out.push_back(v::required(field + ".operations"));
  if (operations.size() > 1 && has_wildcard(operations)) {
    out.push_back(v::invalid(field + ".operations", operations,
                             "if '*' is present, must not specify other operations"));
  }
  for (std::size_t i = 0; i < operations.size(); ++i) {
    const std::string operation = operations[i].is_string() ? operations[i].get<std::string>() : "";
    if (!contains(kOperations, operation)) {
      out.push_back(v::not_supported(v::index(field + ".operations", i), operation, kOperations));
    }
  }
  const json groups = array_at(rule, "apiGroups");
  if (groups.empty()) out.push_back(v::required(field + ".apiGroups"));
  if (groups.size() > 1 && has_wildcard(groups)) {
    out.push_back(v::invalid(field + ".apiGroups", groups,
                             "if '*' is present, must not specify other API groups"));
  }
  const json versions = array_at(rule, "apiVersions");
  if (versions.empty()) out.push_back(v::required(field + ".apiVersions"));
  if (versions.size() > 1 && has_wildcard(versions)) {
    out.push_back(v::invalid(field + ".apiVersions", versions,
                             "if '*' is present, must not specify other API versions"));
  }
  for (std::size_t i = 0; i < versions.size(); ++i) {
    if (versions[i] == "") out.push_back(v::required(v::index(field + ".apiVersions", i)));
  }
  v::append(out, validate_resources(array_at(rule, "resources"), field + ".resources"));
  if (rule.contains("scope")) {
    const std::string scope = rule["scope"].is_string() ? rule["scope"].get<std::string>() : "";
    if (!contains(kScopes, scope))
      out.push_back(v::not_supported(field + ".scope", scope, kScopes));
  }
  return out;
}

// webhook.ValidateWebhookURL with https forced.
std::vector<FieldError> validate_url(const std::string& url, const std::string& field) {
  std::vector<FieldError> out;
  const std::size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  std::string rest = scheme_end == std::string::npos ? url : url.substr(scheme_end + 3);
  std::string fragment;
  if (const std::size_t hash = rest.find('#'); hash != std::string::npos) {
    fragment = rest.substr(hash + 1);
    rest = rest.substr(0, hash);
  }
  std::string query;
  if (const std::size_t question = rest.find('?'); question != std::string::npos) {
    query = rest.substr(question + 1);
    rest = rest.substr(0, question);
  }
  std::string authority = scheme_end == std::string::npos ? "" : rest.substr(0, rest.find('/'));
  std::string user;
  if (const std::size_t at = authority.rfind('@'); at != std::string::npos) {
    user = authority.substr(0, at);
    authority = authority.substr(at + 1);
  }
  if (scheme != "https") {
    out.push_back(v::invalid(field, scheme, "'https' is the only allowed URL scheme" + kUrlForm));
  }
  if (authority.empty())
    out.push_back(v::invalid(field, authority, "host must be specified" + kUrlForm));
  if (!user.empty()) {
    out.push_back(v::invalid(field, user, "user information is not permitted in the URL"));
  }
  if (!fragment.empty()) {
    out.push_back(v::invalid(field, fragment, "fragments are not permitted in the URL"));
  }
  if (!query.empty()) {
    out.push_back(v::invalid(field, query, "query parameters are not permitted in the URL"));
  }
  return out;
}

// webhook.ValidateWebhookService.
std::vector<FieldError> validate_service(const json& service, const std::string& field) {
  std::vector<FieldError> out;
  if (service.value("name", "").empty()) {
    out.push_back(v::required(field + ".name", "service name is required"));
  }
  if (service.value("namespace", "").empty()) {
    out.push_back(v::required(field + ".namespace", "service namespace is required"));
  }
  const json port = service.value("port", json(kDefaultServicePort));
  if (const auto errors = port_number_errors(port); !errors.empty()) {
    out.push_back(v::invalid(field + ".port", port, "port is not valid: " + errors[0]));
  }
  if (!service.contains("path") || !service["path"].is_string()) return out;
  const std::string path = service["path"].get<std::string>();
  if (path.empty() || path == "/") return out;
  if (path == "//") {
    out.push_back(v::invalid(field + ".path", path, "segment[0] may not be empty"));
    return out;
  }
  if (path[0] != '/') out.push_back(v::invalid(field + ".path", path, "must start with a '/'"));
  std::string steps = path.substr(1);
  if (!steps.empty() && steps.back() == '/') steps.pop_back();
  std::size_t index = 0;
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = steps.find('/', start);
    const std::string step =
        steps.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    const std::string segment = "segment[" + std::to_string(index) + "]";
    if (step.empty()) {
      out.push_back(v::invalid(field + ".path", path, segment + " may not be empty"));
    } else {
      for (const std::string& error : v::dns1123_subdomain(step)) {
        out.push_back(v::invalid(field + ".path", path, segment + ": " + error));
      }
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
    ++index;
  }
  return out;
}

std::vector<FieldError> validate_admission_review_versions(const json& versions,
                                                           const std::string& field) {
  std::vector<FieldError> out;
  if (versions.empty()) {
    out.push_back(v::required(field, "must specify one of v1, v1beta1"));
    return out;
  }
  std::set<std::string> seen;
  bool accepted = false;
  for (std::size_t i = 0; i < versions.size(); ++i) {
    const std::string version = versions[i].is_string() ? versions[i].get<std::string>() : "";
    if (!seen.insert(version).second) {
      out.push_back(v::invalid(v::index(field, i), version, "duplicate version"));
      continue;
    }
    for (const std::string& error : v::dns1035_label(version)) {
      out.push_back(v::invalid(v::index(field, i), version, error));
    }
    accepted = accepted || contains(kAdmissionReviewVersions, version);
  }
  if (!accepted)
    out.push_back(v::invalid(field, versions, "must include at least one of v1, v1beta1"));
  return out;
}

std::vector<FieldError> validate_webhook(const json& hook, const std::string& field,
                                         bool mutating) {
  std::vector<FieldError> out = fully_qualified_name(field + ".name", hook.value("name", ""));
  const json rules = array_at(hook, "rules");
  for (std::size_t i = 0; i < rules.size(); ++i) {
    v::append(out, validate_rule(rules[i], v::index(field + ".rules", i)));
  }
  auto check_enum = [&](const char* name, const std::vector<std::string>& supported) {
    if (!hook.contains(name)) return;
    const std::string value = hook[name].is_string() ? hook[name].get<std::string>() : "";
    if (!contains(supported, value)) {
      out.push_back(v::not_supported(field + "." + name, value, supported));
    }
  };
  check_enum("failurePolicy", kFailurePolicies);
  check_enum("matchPolicy", kMatchPolicies);
  if (!hook.contains("sideEffects") || hook["sideEffects"].is_null()) {
    out.push_back(v::required(field + ".sideEffects", "must specify one of None, NoneOnDryRun"));
  } else {
    check_enum("sideEffects", kNoSideEffects);
  }
  const json timeout = hook.value("timeoutSeconds", json(kDefaultTimeoutSeconds));
  if (!timeout.is_number_integer() || timeout.get<std::int64_t>() < kMinTimeoutSeconds ||
      timeout.get<std::int64_t>() > kMaxTimeoutSeconds) {
    out.push_back(v::invalid(field + ".timeoutSeconds", timeout,
                             "the timeout value must be between 1 and 30 seconds"));
  }
  for (const char* selector : {"namespaceSelector", "objectSelector"}) {
    if (hook.contains(selector) && hook[selector].is_object()) {
      v::append(out, validate_label_selector(hook[selector], field + "." + selector));
    }
  }
  if (mutating) check_enum("reinvocationPolicy", kReinvocationPolicies);
  const json client = hook.value("clientConfig", json::object());
  const bool has_url = client.contains("url") && client["url"].is_string();
  const bool has_service = client.contains("service") && client["service"].is_object();
  if (has_url == has_service) {
    out.push_back(
        v::required(field + ".clientConfig", "exactly one of url or service is required"));
  } else if (has_url) {
    v::append(out, validate_url(client["url"].get<std::string>(), field + ".clientConfig.url"));
  } else {
    v::append(out, validate_service(client["service"], field + ".clientConfig.service"));
  }
  return out;
}

std::vector<FieldError> validate_configuration(const json& configuration, bool mutating) {
  std::vector<FieldError> out;
  const json hooks = array_at(configuration, "webhooks");
  std::set<std::string> names;
  for (std::size_t i = 0; i < hooks.size(); ++i) {
    const std::string at = v::index("webhooks", i);
    const json hook = hooks[i].is_object() ? hooks[i] : json::object();
    v::append(out, validate_webhook(hook, at, mutating));
    v::append(out, validate_admission_review_versions(array_at(hook, "admissionReviewVersions"),
                                                      at + ".admissionReviewVersions"));
    const std::string name = hook.value("name", "");
    if (!name.empty() && !names.insert(name).second) {
      out.push_back(v::duplicate(at + ".name", name));
    }
  }
  return out;
}

std::vector<FieldError> validate_validating(const json& object) {
  return validate_configuration(object, false);
}
std::vector<FieldError> validate_validating_update(const json&, const json& object) {
  return validate_configuration(object, false);
}
std::vector<FieldError> validate_mutating(const json& object) {
  return validate_configuration(object, true);
}
std::vector<FieldError> validate_mutating_update(const json&, const json& object) {
  return validate_configuration(object, true);
}

// ---- Endpoints ----

void endpoints_defaults(json& endpoints) {
  if (!endpoints.contains("subsets") || !endpoints["subsets"].is_array()) return;
  for (json& subset : endpoints["subsets"]) {
    if (!subset.is_object() || !subset.contains("ports") || !subset["ports"].is_array()) continue;
    for (json& port : subset["ports"]) {
      if (port.is_object() && !port.contains("protocol")) port["protocol"] = "TCP";
    }
  }
}

bool is_ip(const std::string& text) {
  unsigned char buffer[16];
  return inet_pton(AF_INET, text.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, text.c_str(), buffer) == 1;
}

std::vector<FieldError> validate_endpoints(const json& endpoints) {
  std::vector<FieldError> out;
  const json subsets = array_at(endpoints, "subsets");
  for (std::size_t i = 0; i < subsets.size(); ++i) {
    const std::string at = v::index("subsets", i);
    const json addresses = array_at(subsets[i], "addresses");
    const json not_ready = array_at(subsets[i], "notReadyAddresses");
    if (addresses.empty() && not_ready.empty()) {
      out.push_back(v::required(at, "must specify `addresses` or `notReadyAddresses`"));
    }
    for (const auto& [list, name] :
         {std::pair{addresses, "addresses"}, {not_ready, "notReadyAddresses"}}) {
      for (std::size_t j = 0; j < list.size(); ++j) {
        const std::string ip = list[j].value("ip", "");
        if (!is_ip(ip)) {
          out.push_back(
              v::invalid(v::index(at + "." + name, j) + ".ip", ip,
                         "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"));
        }
      }
    }
    const json ports = array_at(subsets[i], "ports");
    for (std::size_t j = 0; j < ports.size(); ++j) {
      const std::string port_at = v::index(at + ".ports", j);
      const json port = ports[j].is_object() ? ports[j] : json::object();
      if (ports.size() > 1 && port.value("name", "").empty())
        out.push_back(v::required(port_at + ".name"));
      const json number = port.value("port", json(0));
      for (const std::string& error : port_number_errors(number)) {
        out.push_back(v::invalid(port_at + ".port", number, error));
      }
      const std::string protocol = port.value("protocol", "");
      if (!contains(kProtocols, protocol)) {
        out.push_back(v::not_supported(port_at + ".protocol", protocol, kProtocols));
      }
    }
  }
  return out;
}

std::vector<FieldError> validate_endpoints_update(const json&, const json& endpoints) {
  return validate_endpoints(endpoints);
}

}  // namespace

std::vector<FieldError> validate_label_selector(const json& selector, const std::string& field) {
  std::vector<FieldError> out;
  const json labels = selector.value("matchLabels", json::object());
  if (labels.is_object()) {
    for (const auto& [key, value] : labels.items()) {
      for (const std::string& error : v::qualified_name(key)) {
        out.push_back(v::invalid(field + ".matchLabels", key, error));
      }
      const std::string text = value.is_string() ? value.get<std::string>() : "";
      for (const std::string& error : v::label_value(text)) {
        out.push_back(v::invalid(field + ".matchLabels", text, error));
      }
    }
  }
  const json expressions = array_at(selector, "matchExpressions");
  for (std::size_t i = 0; i < expressions.size(); ++i) {
    const std::string at = v::index(field + ".matchExpressions", i);
    const json& expression = expressions[i];
    const std::string op = expression.value("operator", "");
    const json values = array_at(expression, "values");
    if (op == "In" || op == "NotIn") {
      if (values.empty()) {
        out.push_back(
            v::required(at + ".values", "must be specified when `operator` is 'In' or 'NotIn'"));
      }
    } else if (op == "Exists" || op == "DoesNotExist") {
      if (!values.empty()) {
        out.push_back(v::forbidden(at + ".values",
                                   "may not be specified when `operator` is 'Exists' or "
                                   "'DoesNotExist'"));
      }
    } else {
      out.push_back(v::invalid(at + ".operator", op, "not a valid selector operator"));
    }
    const std::string key = expression.value("key", "");
    for (const std::string& error : v::qualified_name(key)) {
      out.push_back(v::invalid(at + ".key", key, error));
    }
  }
  return out;
}

KindRules validating_webhook_configuration_rules() {
  return {v::name_is_dns1123_subdomain, default_validating, no_defaults, validate_validating,
          validate_validating_update};
}

KindRules mutating_webhook_configuration_rules() {
  return {v::name_is_dns1123_subdomain, default_mutating, no_defaults, validate_mutating,
          validate_mutating_update};
}

KindRules endpoints_rules() {
  return {v::name_is_dns1123_subdomain, endpoints_defaults, no_defaults, validate_endpoints,
          validate_endpoints_update};
}

}  // namespace tessel::testing
