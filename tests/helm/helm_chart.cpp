#include "tests/helm/helm_chart.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace tessel::testing::helm {
namespace {

// Generous: helm renders a chart in well under a second, but the build machine is shared.
constexpr std::chrono::seconds kHelmTimeout{120};

ProcessResult run_helm(std::vector<std::string> args) {
  const auto helm = helm_binary();
  if (!helm) throw std::runtime_error("helm is not on PATH");
  args.insert(args.begin(), *helm);
  return run_process(args, kHelmTimeout);
}

std::vector<std::string> strings(const YAML::Node& list) {
  std::vector<std::string> out;
  if (list) {
    for (const auto& item : list) out.push_back(item.as<std::string>());
  }
  return out;
}

}  // namespace

std::optional<std::string> helm_binary() { return find_on_path("helm"); }

std::string chart_dir(const std::string& chart) {
  return std::string(TESSEL_SOURCE_DIR) + "/helm/" + chart;
}

std::vector<std::string> example_values(const std::string& chart) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(chart_dir(chart) + "/examples")) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

ProcessResult lint(const std::string& chart, const std::string& values_file) {
  std::vector<std::string> args{"lint", "--strict", chart_dir(chart)};
  if (!values_file.empty()) args.insert(args.end(), {"-f", values_file});
  return run_helm(args);
}

ProcessResult package(const std::string& chart, const std::string& destination) {
  return run_helm({"package", chart_dir(chart), "-d", destination});
}

ProcessResult render(const std::string& chart, const std::string& values_file,
                     const std::vector<std::string>& extra, const std::string& release,
                     const std::string& ns) {
  std::vector<std::string> args{"template", release, chart_dir(chart), "-n", ns};
  if (!values_file.empty()) args.insert(args.end(), {"-f", values_file});
  args.insert(args.end(), extra.begin(), extra.end());
  return run_helm(args);
}

std::vector<YAML::Node> parse_objects(const std::string& yaml) {
  std::vector<YAML::Node> objects;
  for (const auto& doc : YAML::LoadAll(yaml)) {
    if (doc.IsMap()) objects.push_back(doc);
  }
  return objects;
}

std::vector<YAML::Node> of_kind(const std::vector<YAML::Node>& objects, const std::string& kind) {
  std::vector<YAML::Node> out;
  for (const auto& o : objects) {
    if (o["kind"] && o["kind"].as<std::string>() == kind) out.push_back(o);
  }
  return out;
}

YAML::Node find(const std::vector<YAML::Node>& objects, const std::string& kind,
                const std::string& name, const std::string& ns) {
  std::vector<YAML::Node> found;
  for (const auto& o : of_kind(objects, kind)) {
    if ((name.empty() || o["metadata"]["name"].as<std::string>() == name) &&
        (ns.empty() || o["metadata"]["namespace"].as<std::string>("") == ns)) {
      found.push_back(o);
    }
  }
  if (found.size() != 1) {
    throw std::runtime_error("rendered " + std::to_string(found.size()) + " " + kind +
                             (name.empty() ? "" : " named " + name) +
                             (ns.empty() ? "" : " in " + ns) + ", expected one");
  }
  return found.front();
}

Grants expand(const std::vector<Rule>& rules) {
  Grants grants;
  for (const auto& rule : rules) {
    const std::vector<std::string> names =
        rule.resource_names.empty() ? std::vector<std::string>{""} : rule.resource_names;
    for (const auto& resource : rule.resources) {
      for (const auto& name : names) {
        for (const auto& verb : rule.verbs) {
          grants.emplace(rule.scope, rule.group, resource, name, verb);
        }
      }
    }
  }
  return grants;
}

Grants grants_of_service_account(const std::vector<YAML::Node>& objects, const std::string& ns,
                                 const std::string& name) {
  Grants grants;
  for (const std::string binding_kind : {"ClusterRoleBinding", "RoleBinding"}) {
    for (const auto& binding : of_kind(objects, binding_kind)) {
      bool bound = false;
      for (const auto& subject : binding["subjects"]) {
        bound = bound || (subject["kind"].as<std::string>() == "ServiceAccount" &&
                          subject["name"].as<std::string>() == name &&
                          subject["namespace"].as<std::string>() == ns);
      }
      if (!bound) continue;
      const std::string scope =
          binding_kind == "RoleBinding" ? binding["metadata"]["namespace"].as<std::string>() : "*";
      // A RoleBinding's Role is in the binding's namespace.
      const auto role =
          find(objects, binding["roleRef"]["kind"].as<std::string>(),
               binding["roleRef"]["name"].as<std::string>(), scope == "*" ? "" : scope);
      std::vector<Rule> rules;
      for (const auto& r : role["rules"]) {
        for (const auto& group : strings(r["apiGroups"])) {
          rules.push_back({scope, group, strings(r["resources"]), strings(r["resourceNames"]),
                           strings(r["verbs"])});
        }
      }
      grants.merge(expand(rules));
    }
  }
  return grants;
}

std::string to_string(const Grants& grants) {
  std::ostringstream out;
  for (const auto& [scope, group, resource, name, verb] : grants) {
    out << "  " << (scope == "*" ? "cluster-wide" : "in " + scope) << ": "
        << (group.empty() ? "core" : group) << " " << resource
        << (name.empty() ? "" : "[" + name + "]") << " " << verb << "\n";
  }
  return out.str();
}

std::string base64_decode(const std::string& text) {
  static const std::string alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (const char c : text) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    const auto value = alphabet.find(c);
    if (value == std::string::npos)
      throw std::invalid_argument("not base64: " + text.substr(0, 40));
    buffer = (buffer << 6) | static_cast<unsigned>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  return out;
}

}  // namespace tessel::testing::helm
