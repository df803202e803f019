#include "tests/operator_e2e/operator_pod.h"

#include <algorithm>
#include <stdexcept>

namespace tessel::testing {

using nlohmann::json;

json pod_from_template(const json& deployment, const std::string& name) {
  const json& template_ = deployment.at("spec").at("template");
  json metadata = template_.value("metadata", json::object());
  metadata["name"] = name;
  metadata["namespace"] = deployment.at("metadata").at("namespace");
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", metadata},
          {"spec", template_.at("spec")}};
}

std::map<std::string, std::string> container_env(const json& pod, const json& container) {
  std::map<std::string, std::string> env;
  for (const json& variable : container.value("env", json::array())) {
    const std::string name = variable.value("name", "");
    if (variable.contains("value")) {
      env[name] = expand_references(variable.value("value", ""), env);
      continue;
    }
    const std::string field =
        variable.value("/valueFrom/fieldRef/fieldPath"_json_pointer, std::string());
    if (field == "metadata.name" || field == "metadata.namespace") {
      env[name] = pod.at("metadata").value(field.substr(std::string("metadata.").size()), "");
    } else if (field == "status.podIP") {
      env[name] = kPodIp;
    } else if (field == "spec.serviceAccountName") {
      env[name] = pod.at("spec").value("serviceAccountName", "default");
    } else {
      throw std::runtime_error("container " + container.value("name", "") + ": env " + name +
                               " comes from " + variable.value("valueFrom", json()).dump() +
                               ", which the e2e does not resolve (value, or a fieldRef of "
                               "metadata.name, metadata.namespace, status.podIP, "
                               "spec.serviceAccountName)");
    }
  }
  return env;
}

std::string expand_references(const std::string& text,
                              const std::map<std::string, std::string>& env) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$' || i + 1 >= text.size()) {
      out += text[i];
    } else if (text[i + 1] == '$') {
      out += '$';
      ++i;
    } else if (text[i + 1] == '(') {
      const size_t close = text.find(')', i + 2);
      const auto found =
          close == std::string::npos ? env.end() : env.find(text.substr(i + 2, close - i - 2));
      if (found == env.end()) {
        out += text[i];  // not a defined variable: kept as written
      } else {
        out += found->second;
        i = close;
      }
    } else {
      out += text[i];
    }
  }
  return out;
}

std::vector<std::string> map_mount_paths(const std::vector<std::string>& args,
                                         const std::map<std::string, std::string>& folders) {
  std::vector<std::pair<std::string, std::string>> longest_first(folders.begin(), folders.end());
  std::sort(longest_first.begin(), longest_first.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::vector<std::string> mapped;
  for (const std::string& arg : args) {
    const size_t equals = arg.find('=');
    const size_t start = arg.rfind("--", 0) == 0 && equals != std::string::npos ? equals + 1 : 0;
    std::string out = arg;
    if (start > 0 && arg.compare(0, start, "--data-root=") == 0) {
      mapped.push_back(out);
      continue;
    }
    for (const auto& [mount, folder] : longest_first) {
      if (arg.compare(start, mount.size(), mount) != 0) continue;
      const size_t end = start + mount.size();
      if (end != arg.size() && arg[end] != '/') continue;  // "/tmpfoo" is not under "/tmp"
      out = arg.substr(0, start) + folder + arg.substr(end);
      break;
    }
    mapped.push_back(out);
  }
  return mapped;
}

std::map<std::string, int> container_ports(const json& container) {
  std::map<std::string, int> ports;
  for (const json& port : container.value("ports", json::array()))
    if (port.contains("name")) ports[port.value("name", "")] = port.value("containerPort", 0);
  return ports;
}

json endpoints_for(const json& service, const std::string& pod_name,
                   const std::map<std::string, int>& pod_ports) {
  const std::string service_name = service.at("metadata").value("name", "");
  json ports = json::array();
  for (const json& port : service.at("spec").value("ports", json::array())) {
    const json target = port.value("targetPort", port.value("port", json(0)));
    auto found = pod_ports.end();
    if (target.is_string()) found = pod_ports.find(target.get<std::string>());
    if (found == pod_ports.end())
      throw std::runtime_error("Service " + service_name + " port " + port.value("name", "") +
                               ": targetPort " + target.dump() +
                               " names no port of the operator's container");
    ports.push_back({{"name", port.value("name", "")},
                     {"port", found->second},
                     {"protocol", port.value("protocol", "TCP")}});
  }
  const std::string namespace_ = service.at("metadata").value("namespace", "");
  return {{"apiVersion", "v1"},
          {"kind", "Endpoints"},
          {"metadata",
           {{"name", service_name},
            {"namespace", namespace_},
            {"labels", service.at("metadata").value("labels", json::object())}}},
          {"subsets",
           {{{"addresses",
              {{{"ip", kPodIp},
                {"targetRef", {{"kind", "Pod"}, {"name", pod_name}, {"namespace", namespace_}}}}}},
             {"ports", ports}}}}};
}

}  // namespace tessel::testing
