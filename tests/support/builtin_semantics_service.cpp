// Services: v1 defaults, cluster IP allocation from 10.96.0.0/12, and ValidateService.
#include <set>

#include "tests/support/builtin_semantics.h"
#include "tests/support/builtin_semantics_errors.h"
#include "tests/support/builtin_semantics_kinds.h"

namespace tessel::testing {
namespace {

using json = nlohmann::json;
namespace v = validation;

// kube-apiserver's default --service-cluster-ip-range.
constexpr std::uint32_t kRangeBase = (10u << 24) | (96u << 16);
constexpr std::uint32_t kRangeSize = 1u << 20;  // a /12
constexpr const char* kRange = "10.96.0.0/12";

std::string text_of(const json& object, const char* field) {
  return object.is_object() && object.contains(field) && object[field].is_string()
             ? object[field].get<std::string>()
             : "";
}

std::string address(std::uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." +
         std::to_string((ip >> 8) & 255) + "." + std::to_string(ip & 255);
}

std::optional<std::uint32_t> parse_ipv4(const std::string& text) {
  std::uint32_t out = 0;
  std::size_t start = 0;
  for (int part = 0; part < 4; ++part) {
    const std::size_t end = part < 3 ? text.find('.', start) : text.size();
    if (end == std::string::npos || end == start || end - start > 3) return std::nullopt;
    const std::string digits = text.substr(start, end - start);
    if (digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    const int value = std::stoi(digits);
    if (value > 255) return std::nullopt;
    out = (out << 8) | static_cast<std::uint32_t>(value);
    start = end + 1;
  }
  return out;
}

bool wants_cluster_ip(const json& spec) {
  const std::string type = text_of(spec, "type");
  return type != "ExternalName" && text_of(spec, "clusterIP") != "None";
}

void service_decode_defaults(json& service) {
  if (!service.contains("spec") || !service["spec"].is_object()) service["spec"] = json::object();
  json& spec = service["spec"];
  if (text_of(spec, "sessionAffinity").empty()) spec["sessionAffinity"] = "None";
  if (spec["sessionAffinity"] == "None") spec.erase("sessionAffinityConfig");
  if (text_of(spec, "type").empty()) spec["type"] = "ClusterIP";
  const std::string type = spec["type"];
  if (spec.contains("ports") && spec["ports"].is_array()) {
    for (auto& port : spec["ports"]) {
      if (!port.is_object()) continue;
      if (text_of(port, "protocol").empty()) port["protocol"] = "TCP";
      const json target = port.value("targetPort", json());
      if (target.is_null() || target == json(0) || target == json("")) {
        port["targetPort"] = port.value("port", 0);
      }
    }
  }
  if ((type == "NodePort" || type == "LoadBalancer") &&
      text_of(spec, "externalTrafficPolicy").empty()) {
    spec["externalTrafficPolicy"] = "Cluster";
  }
  if ((type == "NodePort" || type == "LoadBalancer" || type == "ClusterIP") &&
      !spec.contains("internalTrafficPolicy")) {
    spec["internalTrafficPolicy"] = "Cluster";
  }
  if (type == "LoadBalancer" && !spec.contains("allocateLoadBalancerNodePorts")) {
    spec["allocateLoadBalancerNodePorts"] = true;
  }
}

void service_admission_defaults(json& service) {
  json& spec = service["spec"];
  if (wants_cluster_ip(spec) || !spec.value("selector", json::object()).empty()) {
    if (!spec.contains("ipFamilies")) spec["ipFamilies"] = json::array({"IPv4"});
    if (!spec.contains("ipFamilyPolicy")) spec["ipFamilyPolicy"] = "SingleStack";
  }
  service["status"] = {{"loadBalancer", json::object()}};
}

std::vector<FieldError> validate_service(const json& service) {
  std::vector<FieldError> out;
  const json spec = service.value("spec", json::object());
  const std::string type = text_of(spec, "type");
  if (type != "ClusterIP" && type != "ExternalName" && type != "LoadBalancer" &&
      type != "NodePort") {
    out.push_back(v::not_supported("spec.type", type,
                                   {"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"}));
  }
  const json ports = spec.value("ports", json::array());
  if (type == "ExternalName") {
    const std::string name = text_of(spec, "externalName");
    if (name.empty()) {
      out.push_back(v::required("spec.externalName"));
    } else {
      for (const auto& m : v::dns1123_subdomain(name)) {
        out.push_back(v::invalid("spec.externalName", name, m));
      }
    }
  } else if (ports.empty() && text_of(spec, "clusterIP") != "None") {
    out.push_back(v::required("spec.ports"));
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < ports.size(); ++i) {
    const json& port = ports[i];
    const std::string path = v::index("spec.ports", i);
    const std::string name = text_of(port, "name");
    if (ports.size() > 1 && name.empty()) {
      out.push_back(v::required(path + ".name"));
    } else if (!name.empty()) {
      for (const auto& m : v::dns1123_label(name))
        out.push_back(v::invalid(path + ".name", name, m));
      if (!names.insert(name).second) out.push_back(v::duplicate(path + ".name", name));
    }
    const std::int64_t number = port.value("port", std::int64_t{0});
    if (number < 1 || number > 65535) {
      out.push_back(v::invalid(path + ".port", number, "must be between 1 and 65535, inclusive"));
    }
    const std::string protocol = text_of(port, "protocol");
    if (protocol != "TCP" && protocol != "UDP" && protocol != "SCTP") {
      out.push_back(v::not_supported(path + ".protocol", protocol, {"SCTP", "TCP", "UDP"}));
    }
    const json target = port.value("targetPort", json());
    if (target.is_number() &&
        (target.get<std::int64_t>() < 1 || target.get<std::int64_t>() > 65535)) {
      out.push_back(
          v::invalid(path + ".targetPort", target, "must be between 1 and 65535, inclusive"));
    } else if (target.is_string()) {
      for (const auto& m : v::port_name(target.get<std::string>())) {
        out.push_back(v::invalid(path + ".targetPort", target, m));
      }
    }
  }
  const json selector = spec.value("selector", json::object());
  if (selector.is_object()) {
    for (const auto& [k, value] : selector.items()) {
      for (const auto& m : v::qualified_name(k)) out.push_back(v::invalid("spec.selector", k, m));
      const std::string text = value.is_string() ? value.get<std::string>() : "";
      for (const auto& m : v::label_value(text))
        out.push_back(v::invalid("spec.selector", text, m));
    }
  }
  const std::string affinity = text_of(spec, "sessionAffinity");
  if (affinity != "ClientIP" && affinity != "None") {
    out.push_back(v::not_supported("spec.sessionAffinity", affinity, {"ClientIP", "None"}));
  }
  return out;
}

std::vector<FieldError> validate_service_update(const json& old_service, const json& new_service) {
  std::vector<FieldError> out = validate_service(new_service);
  const json old_spec = old_service.value("spec", json::object());
  const json new_spec = new_service.value("spec", json::object());
  const std::string old_ip = text_of(old_spec, "clusterIP");
  if (!old_ip.empty() && text_of(old_spec, "type") != "ExternalName" &&
      text_of(new_spec, "type") != "ExternalName" && text_of(new_spec, "clusterIP") != old_ip) {
    out.push_back(v::invalid("spec.clusterIPs[0]", new_spec.value("clusterIPs", json()),
                             "may not change once set"));
  }
  return out;
}

}  // namespace

KindRules service_rules() {
  return {v::name_is_dns1035_label, service_decode_defaults, service_admission_defaults,
          validate_service, validate_service_update};
}

std::vector<FieldError> ClusterIpAllocator::allocate(json& service) {
  json& spec = service["spec"];
  if (!wants_cluster_ip(spec)) {
    if (text_of(spec, "clusterIP") == "None") spec["clusterIPs"] = json::array({"None"});
    return {};
  }
  const std::string requested = text_of(spec, "clusterIP");
  const auto failure = [&](const std::string& ip, const std::string& why) {
    return std::vector<FieldError>{v::invalid("spec.clusterIPs", json::array({ip}),
                                              "failed to allocate IP " + ip + ": " + why)};
  };
  std::uint32_t ip = 0;
  if (!requested.empty()) {
    const auto parsed = parse_ipv4(requested);
    if (!parsed) {
      return {v::invalid("spec.clusterIPs[0]", requested,
                         "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")};
    }
    if (*parsed <= kRangeBase || *parsed >= kRangeBase + kRangeSize - 1) {
      return failure(requested, "the provided IP (" + requested +
                                    ") is not in the valid range. The range of valid IPs is " +
                                    kRange);
    }
    if (used_.contains(*parsed)) return failure(requested, "provided IP is already allocated");
    ip = *parsed;
  } else {
    // Network and broadcast addresses are never handed out.
    std::uint32_t tried = 0;
    while (used_.contains(kRangeBase + next_) && tried < kRangeSize - 2) {
      next_ = next_ + 1 >= kRangeSize - 1 ? 1 : next_ + 1;
      ++tried;
    }
    if (tried >= kRangeSize - 2) {
      return {v::forbidden("spec.clusterIPs", "failed to allocate a serviceIP: range is full")};
    }
    ip = kRangeBase + next_;
    next_ = next_ + 1 >= kRangeSize - 1 ? 1 : next_ + 1;
  }
  used_.insert(ip);
  spec["clusterIP"] = address(ip);
  spec["clusterIPs"] = json::array({address(ip)});
  return {};
}

void ClusterIpAllocator::release(const json& service) {
  const json spec = service.value("spec", json::object());
  if (const auto ip = parse_ipv4(text_of(spec, "clusterIP"))) used_.erase(*ip);
}

}  // namespace tessel::testing
