#include "tests/helm/chart_rbac.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "kube/api_error.h"
#include "kube/object.h"
#include "tests/kubectl/kubectl.h"
#include "tests/support/api_yaml.h"

namespace tessel::testing::helm {
namespace {

using nlohmann::json;

std::string joined(const json& list, const std::string& suffix = "") {
  std::string out;
  for (const json& item : list) out += (out.empty() ? "" : ",") + item.get<std::string>() + suffix;
  return out;
}

// Created in this order, so that a binding finds its role and subject.
const std::vector<std::string> kKinds = {"ServiceAccount", "ClusterRole", "Role",
                                         "ClusterRoleBinding", "RoleBinding"};

}  // namespace

std::string describe_rule(const RenderedRole& role, std::size_t index) {
  const json& rule = role.rules.at(index);
  std::string resources;
  for (const json& group : rule.value("apiGroups", json::array())) {
    const std::string suffix =
        group.get<std::string>().empty() ? "" : "." + group.get<std::string>();
    resources +=
        (resources.empty() ? "" : " ") + joined(rule.value("resources", json::array()), suffix);
  }
  std::string text = role.kind + " " + role.name +
                     (role.namespace_name.empty() ? "" : " in " + role.namespace_name) + " rule " +
                     std::to_string(index) + " (" + joined(rule.at("verbs")) + " " + resources;
  if (rule.contains("resourceNames")) text += " named " + joined(rule["resourceNames"]);
  if (rule.contains("nonResourceURLs")) text += " " + joined(rule["nonResourceURLs"]);
  return text + ")";
}

std::vector<json> rendered_objects(const std::string& yaml) { return parse_yaml_documents(yaml); }

std::vector<std::string> container_args(const std::vector<json>& objects, const std::string& kind) {
  std::vector<const json*> found;
  for (const json& o : objects) {
    if (o.value("kind", "") == kind) found.push_back(&o);
  }
  if (found.size() != 1) {
    throw std::runtime_error("the chart rendered " + std::to_string(found.size()) + " " + kind +
                             ", expected one");
  }
  std::vector<std::string> args;
  for (const json& a : found.front()
                           ->at("spec")
                           .at("template")
                           .at("spec")
                           .at("containers")
                           .at(0)
                           .value("args", json::array())) {
    args.push_back(a.get<std::string>());
  }
  return args;
}

std::string flag_value(const std::vector<std::string>& args, const std::string& name,
                       const std::string& absent) {
  for (const std::string& a : args) {
    if (a.rfind(name + "=", 0) == 0) return a.substr(name.size() + 1);
  }
  return absent;
}

ChartRbac::ChartRbac(kube::Client& admin, const std::vector<json>& objects) : admin_(admin) {
  for (const std::string& kind : kKinds) {
    for (const json& o : objects) {
      if (o.value("kind", "") != kind) continue;
      const json created = admin_.create(o);
      if (kube::object_namespace(created).empty()) cluster_scoped_.push_back(created);
      if (kind == "Role" || kind == "ClusterRole") {
        roles_.push_back({kind, kube::object_namespace(o), kube::object_name(o),
                          o.value("rules", json::array())});
      }
    }
  }
}

ChartRbac::~ChartRbac() {
  for (auto it = cluster_scoped_.rbegin(); it != cluster_scoped_.rend(); ++it) {
    try {
      admin_.remove(*it);
    } catch (const std::exception&) {
      // Best effort: a test server goes with the test; on a real cluster the names are the
      // test's own (its release name) and say where they came from.
    }
  }
}

void ChartRbac::set_rules(const RenderedRole& role, const json& rules) {
  const kube::ResourceInfo info = admin_.resource_for("rbac.authorization.k8s.io/v1", role.kind);
  json live = admin_.get(info, role.namespace_name, role.name);
  live["rules"] = rules;
  admin_.update(info, live);
}

json without_rule(const RenderedRole& role, std::size_t index) {
  json rules = json::array();
  for (std::size_t i = 0; i < role.rules.size(); ++i) {
    if (i != index) rules.push_back(role.rules[i]);
  }
  return rules;
}

std::string create_token(const std::string& kubeconfig, const std::string& ns,
                         const std::string& service_account) {
  std::string cache = (std::filesystem::temp_directory_path() / "tessel-helm-rbac-XXXXXX").string();
  if (mkdtemp(cache.data()) == nullptr) throw std::runtime_error("mkdtemp " + cache + " failed");
  const ProcessResult result =
      Kubectl(kubeconfig, ns, cache).run({"create", "token", service_account});
  std::error_code ignored;
  std::filesystem::remove_all(cache, ignored);
  if (result.exit_code != 0 || result.out.empty()) {
    throw std::runtime_error("kubectl create token " + service_account + " -n " + ns + ": " +
                             describe(result));
  }
  std::string token = result.out;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  return token;
}

kube::ClusterConfig with_token(kube::ClusterConfig config, const std::string& token) {
  config.client_cert_pem.clear();
  config.client_key_pem.clear();
  config.token_file.clear();
  config.token = token;
  return config;
}

}  // namespace tessel::testing::helm
