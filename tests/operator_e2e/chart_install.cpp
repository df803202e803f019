#include "tests/operator_e2e/chart_install.h"

#include <sstream>
#include <stdexcept>

#include "api/yaml_json.h"
#include "kube/base64.h"
#include "placement/atomic_file.h"
#include "tests/helm/helm_chart.h"

namespace tessel::testing {

using nlohmann::json;

std::vector<RenderedObject> render_chart(const ChartRender& render) {
  std::vector<std::string> extra;
  if (render.include_crds) extra.push_back("--include-crds");
  for (const std::string& value : render.set_values) extra.insert(extra.end(), {"--set", value});
  for (const std::string& value : render.set_json_values)
    extra.insert(extra.end(), {"--set-json", value});
  const ProcessResult rendered =
      helm::render(render.chart, "", extra, render.release, render.namespace_);
  if (rendered.exit_code != 0)
    throw std::runtime_error("helm template of helm/" + render.chart + ": " + describe(rendered));
  // helm separates documents with a line "---"; each is parsed on its own (yaml_to_json reads
  // one document).
  std::vector<RenderedObject> objects;
  std::istringstream lines(rendered.out);
  std::string line, document;
  const auto take = [&] {
    // A document of comments alone (helm prints one for a template that rendered nothing).
    bool empty = true;
    std::istringstream document_lines(document);
    for (std::string text; empty && std::getline(document_lines, text);)
      empty = text.find_first_not_of(" \t") == std::string::npos ||
              text[text.find_first_not_of(" \t")] == '#';
    if (empty) {
      document.clear();
      return;
    }
    const json object =
        api::yaml_to_json(document, "helm template " + render.chart + " (document " +
                                        std::to_string(objects.size() + 1) + ")");
    if (object.is_object()) objects.push_back({document, object});
    document.clear();
  };
  while (std::getline(lines, line)) {
    if (line == "---") {
      take();
    } else {
      document += line + "\n";
    }
  }
  take();
  return objects;
}

std::string apply_server_side(const std::string& kubeconfig, const std::string& cache_dir,
                              const std::vector<RenderedObject>& objects, const std::string& path) {
  std::string stream;
  for (const RenderedObject& rendered : objects) stream += "---\n" + rendered.text;
  placement::write_file_atomically(path, stream);
  const ProcessResult applied =
      run_process({"kubectl", "--kubeconfig", kubeconfig, "--cache-dir", cache_dir, "apply",
                   "--server-side", "--field-manager=helm", "-f", path},
                  kKubectlTimeout);
  if (applied.exit_code != 0)
    throw std::runtime_error("kubectl apply --server-side -f " + path + ": " + describe(applied));
  return applied.out;
}

std::vector<json> objects_of_kind(const std::vector<RenderedObject>& objects,
                                  const std::string& kind) {
  std::vector<json> found;
  for (const RenderedObject& rendered : objects)
    if (rendered.object.value("kind", "") == kind) found.push_back(rendered.object);
  return found;
}

json the_object(const std::vector<RenderedObject>& objects, const std::string& kind,
                const std::string& name) {
  std::vector<json> found;
  for (const json& object : objects_of_kind(objects, kind))
    if (name.empty() || object.value("/metadata/name"_json_pointer, "") == name)
      found.push_back(object);
  if (found.size() != 1)
    throw std::runtime_error("the chart rendered " + std::to_string(found.size()) + " " + kind +
                             (name.empty() ? "" : " named " + name) + ", expected one");
  return found.front();
}

std::string delete_cluster_scoped(const Kubectl& kubectl,
                                  const std::vector<RenderedObject>& objects) {
  std::vector<std::string> args = {"delete", "--ignore-not-found", "--wait=false"};
  for (const RenderedObject& rendered : objects) {
    const json& object = rendered.object;
    const std::string kind = object.value("kind", "");
    if (object.contains("/metadata/namespace"_json_pointer) || kind == "CustomResourceDefinition")
      continue;
    const std::string api_version = object.value("apiVersion", "");
    const size_t slash = api_version.find('/');
    // kind.version.group names the resource without discovery's short names.
    const std::string resource =
        kind + (slash == std::string::npos
                    ? ""
                    : "." + api_version.substr(slash + 1) + "." + api_version.substr(0, slash));
    args.push_back(resource + "/" + object.value("/metadata/name"_json_pointer, ""));
  }
  if (args.size() == 3) return "";
  const ProcessResult deleted = kubectl.run(args);
  return deleted.out + deleted.err;
}

std::string token_kubeconfig(const kube::ClusterConfig& cluster, const std::string& token,
                             const std::string& namespace_) {
  json server = {{"server", cluster.server}};
  if (!cluster.ca_pem.empty())
    server["certificate-authority-data"] = kube::base64_encode(cluster.ca_pem);
  if (!cluster.tls_server_name.empty()) server["tls-server-name"] = cluster.tls_server_name;
  if (!cluster.proxy_url.empty()) server["proxy-url"] = cluster.proxy_url;
  // JSON is YAML: kubeconfig readers take it as it is.
  return json{
      {"apiVersion", "v1"},
      {"kind", "Config"},
      {"current-context", "tessel"},
      {"clusters", {{{"name", "tessel"}, {"cluster", server}}}},
      {"users", {{{"name", "tessel"}, {"user", {{"token", token}}}}}},
      {"contexts",
       {{{"name", "tessel"},
         {"context", {{"cluster", "tessel"}, {"user", "tessel"}, {"namespace", namespace_}}}}}}}
      .dump(2);
}

std::string create_token(const Kubectl& kubectl, const std::string& service_account) {
  const ProcessResult created = kubectl.run({"create", "token", service_account});
  if (created.exit_code != 0)
    throw std::runtime_error("kubectl create token " + service_account + ": " + describe(created));
  std::string token = created.out;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty())
    throw std::runtime_error("kubectl create token " + service_account + " printed no token");
  return token;
}

}  // namespace tessel::testing
