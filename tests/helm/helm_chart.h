// Runs the real helm on the charts of helm/ and reads what they render, for tests that check the
// charts: `helm lint --strict`, `helm template`, the rendered objects and the RBAC they grant.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/kubectl/child_process.h"

namespace tessel::testing::helm {

// The helm binary on $PATH; nullopt when there is none (the tests skip, saying so).
std::optional<std::string> helm_binary();

// helm/<chart> of the source tree.
std::string chart_dir(const std::string& chart);

// Every helm/<chart>/examples/*.yaml, sorted.
std::vector<std::string> example_values(const std::string& chart);

// `helm lint --strict <chart> [-f values]`.
ProcessResult lint(const std::string& chart, const std::string& values_file = "");

// `helm package <chart> -d <destination>`.
ProcessResult package(const std::string& chart, const std::string& destination);

// `helm template <release> <chart> -n <namespace> [-f values] [extra args]`.
ProcessResult render(const std::string& chart, const std::string& values_file = "",
                     const std::vector<std::string>& extra = {}, const std::string& release = "t",
                     const std::string& ns = "tessel-system");

// The objects of a multi-document YAML stream (empty documents dropped).
std::vector<YAML::Node> parse_objects(const std::string& yaml);

// The objects of one kind; the one of a kind, name and namespace ("" for any) (throws when
// absent or ambiguous).
std::vector<YAML::Node> of_kind(const std::vector<YAML::Node>& objects, const std::string& kind);
YAML::Node find(const std::vector<YAML::Node>& objects, const std::string& kind,
                const std::string& name = "", const std::string& ns = "");

// One permission: where it holds ("*" cluster-wide, else a namespace), the API group, the
// resource (with its subresource), the resourceName ("" for any) and the verb.
using Grant = std::tuple<std::string, std::string, std::string, std::string, std::string>;
using Grants = std::set<Grant>;

// Every grant the rendered (Cluster)RoleBindings give ServiceAccount ns/name through the
// (Cluster)Roles rendered beside them (a binding to a role not rendered fails the test).
Grants grants_of_service_account(const std::vector<YAML::Node>& objects, const std::string& ns,
                                 const std::string& name);

// Expands rules written as {scope, group, resources, resourceNames, verbs} into grants.
struct Rule {
  std::string scope;
  std::string group;
  std::vector<std::string> resources;
  std::vector<std::string> resource_names;
  std::vector<std::string> verbs;
};
Grants expand(const std::vector<Rule>& rules);

// Readable list of grants, one a line, for failure messages.
std::string to_string(const Grants& grants);

std::string base64_decode(const std::string& text);

}  // namespace tessel::testing::helm
