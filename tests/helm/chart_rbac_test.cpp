// The charts' RBAC is least privilege, proven: both charts are rendered with helm, their
// ServiceAccounts, Roles, ClusterRoles and bindings are applied to a hub and a member API server
// that authorize as kube-apiserver's RBAC does, each ServiceAccount gets a token from
// `kubectl create token`, and the catalogue of rbac_operations.h (every API call the operator and
// the prober make, through kube/'s client) must all succeed. Then each rule of each Role and
// ClusterRole is removed in turn, and at least one named call must be refused 403 without it.
//
// Against real clusters too: TESSEL_TEST_KUBECONFIG (the hub) and the first of
// TESSEL_TEST_MEMBER_KUBECONFIGS (the member), in namespaces of the test's own, with
// cluster-scoped objects named after its release, all deleted at the end.
#include "tests/helm/chart_rbac.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "kube/api_error.h"
#include "kube/event_recorder.h"
#include "kube/object.h"
#include "kube/resource.h"
#include "tests/helm/helm_fixture.h"
#include "tests/helm/rbac_operations.h"
#include "tests/kubectl/child_process.h"
#include "tests/support/api_yaml.h"
#include "tests/support/test_cluster.h"

namespace tessel::testing::helm {
namespace {

using nlohmann::json;

// How long a real API server's authorizer may take to see a changed Role (its informers);
// the test server sees it at once, and a rule that breaks nothing waits this long for nothing.
constexpr std::chrono::seconds kRealPropagation{15};
constexpr std::chrono::milliseconds kRetryInterval{500};
// The CRDs becoming served on a real cluster.
constexpr std::chrono::seconds kCrdServed{60};

const std::string kCrdDirectory = std::string(TESSEL_SOURCE_DIR) + "/helm/tessel/crds";

const kube::ResourceInfo& namespaces() {
  static const kube::ResourceRegistry registry;
  return *registry.find_resource("", "namespaces");
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<json> chart_crds() {
  std::vector<json> crds;
  for (const auto& entry : std::filesystem::directory_iterator(kCrdDirectory)) {
    for (json& d : parse_yaml_documents(read_text(entry.path()))) crds.push_back(std::move(d));
  }
  return crds;
}

// The v1alpha1 resource a CRD serves (the version the operator uses).
kube::ResourceInfo served(const std::vector<json>& crds, const std::string& kind) {
  for (const json& crd : crds) {
    for (const kube::ResourceInfo& info : kube::parse_custom_resource_definition(crd)) {
      if (info.kind == kind && info.gvr.version == "v1alpha1") return info;
    }
  }
  throw std::runtime_error("no CRD in " + kCrdDirectory + " serves " + kind + " v1alpha1");
}

// The CRDs in a real hub: made when missing (left installed: other tests and users share them),
// then waited for until discovery serves them.
void install_crds(kube::Client& admin, const std::vector<json>& crds) {
  const kube::ResourceInfo crd_resource =
      *kube::ResourceRegistry().find_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition");
  for (const json& crd : crds) {
    try {
      admin.create(crd_resource, "", crd);
    } catch (const kube::ApiError& e) {
      if (!e.is_already_exists()) throw;
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + kCrdServed;
  for (const std::string kind : {"TrainingJob", "MemberCluster"}) {
    for (;;) {
      try {
        admin.resource_for("tessel.dev/v1alpha1", kind);
        break;
      } catch (const std::exception& e) {
        if (std::chrono::steady_clock::now() > deadline)
          throw std::runtime_error("CRD of " + kind + " not served after " +
                                   std::to_string(kCrdServed.count()) + " s: " + e.what());
        std::this_thread::sleep_for(kRetryInterval);
      }
    }
  }
}

// Runs `undo` steps in reverse at the end, each best effort (a failure is reported, not thrown).
class Cleanup {
 public:
  ~Cleanup() {
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
      try {
        it->second();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "clean-up: " << it->first << ": " << e.what();
      }
    }
  }
  void add(std::string what, std::function<void()> step) {
    steps_.emplace_back(std::move(what), std::move(step));
  }

 private:
  std::vector<std::pair<std::string, std::function<void()>>> steps_;
};

void create_namespace(kube::Client& admin, const std::string& name, Cleanup& cleanup) {
  try {
    admin.create(namespaces(), "",
                 {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  } catch (const kube::ApiError& e) {
    if (!e.is_already_exists()) throw;
    return;  // the member is the hub's own cluster: the hub's step deletes it
  }
  cleanup.add("delete namespace " + name, [&admin, name] { admin.remove(namespaces(), "", name); });
}

// The name of the one rendered ServiceAccount of a component (app.kubernetes.io/component);
// "" for any.
std::string service_account(const std::vector<json>& objects, const std::string& component) {
  std::vector<std::string> names;
  for (const json& o : objects) {
    if (o.value("kind", "") != "ServiceAccount") continue;
    if (!component.empty() &&
        kube::get_label(o, "app.kubernetes.io/component").value_or("") != component)
      continue;
    names.push_back(kube::object_name(o));
  }
  if (names.size() != 1)
    throw std::runtime_error("the chart rendered " + std::to_string(names.size()) +
                             " ServiceAccounts of component '" + component + "', expected one");
  return names.front();
}

enum class Result { kAllowed, kForbidden, kError };

struct Outcome {
  Result result = Result::kAllowed;
  std::string detail;  // the error, when not allowed
};

// One clients set per cluster: an admin (prepares) and one per identity.
struct Identities {
  kube::Client* hub_admin = nullptr;
  kube::Client* member_admin = nullptr;
  std::map<Identity, std::shared_ptr<kube::Client>> clients;
};

Outcome run(const Operation& op, const Identities& who) {
  kube::Client& admin = calls_hub(op.identity) ? *who.hub_admin : *who.member_admin;
  json prepared;
  try {
    prepared = op.prepare(admin);
  } catch (const std::exception& e) {
    return {Result::kError, std::string("preparing it (as admin): ") + e.what()};
  }
  try {
    op.call(*who.clients.at(op.identity), prepared);
    return {};
  } catch (const kube::ApiError& e) {
    return {e.is_forbidden() ? Result::kForbidden : Result::kError, e.what()};
  } catch (const std::exception& e) {
    return {Result::kError, e.what()};
  }
}

struct Round {
  std::vector<std::string> forbidden;  // names of the refused calls
  std::vector<std::string> errors;     // "name: error" of calls that failed otherwise
};

Round run_all(const std::vector<Operation>& ops, const Identities& who, bool hub) {
  Round round;
  for (const Operation& op : ops) {
    if (calls_hub(op.identity) != hub) continue;
    const Outcome outcome = run(op, who);
    if (outcome.result == Result::kForbidden) round.forbidden.push_back(op.name);
    if (outcome.result == Result::kError) round.errors.push_back(op.name + ": " + outcome.detail);
  }
  return round;
}

// Runs the calls of one cluster until `done` holds or, on a real cluster, kRealPropagation
// has passed (its authorizer follows Roles through informers).
Round run_until(const std::vector<Operation>& ops, const Identities& who, bool hub, bool real,
                const std::function<bool(const Round&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + kRealPropagation;
  for (;;) {
    Round round = run_all(ops, who, hub);
    if (done(round) || !real || std::chrono::steady_clock::now() > deadline) return round;
    std::this_thread::sleep_for(kRetryInterval);
  }
}

std::string lines(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += "\n  " + item;
  return out;
}

// Both charts rendered with these extra helm arguments (given the job namespace), applied, the
// catalogue run, then every rule removed in turn.
void check_every_rule_is_needed(
    const std::function<std::vector<std::string>(const std::string& job_ns)>& hub_values,
    const std::function<std::vector<std::string>(const std::string& job_ns)>& member_values) {
  ApiTestServerOptions options;
  options.authorization = Authorization::kRbac;
  options.crd_directory = kCrdDirectory;
  TestCluster hub(options);
  const std::unique_ptr<TestCluster> member = TestCluster::member(0, hub.namespace_name(), options);
  const bool real = hub.is_real() || member->is_real();
  const std::vector<json> crds = chart_crds();
  if (hub.is_real()) install_crds(hub.admin(), crds);

  // The job's namespace is the test's; each chart goes to "<it>-system", named after it.
  const std::string job_ns = hub.namespace_name();
  const std::string release_ns = job_ns + "-system";
  const std::string release = "rbac-" + job_ns.substr(job_ns.rfind('-') + 1);
  Cleanup cleanup;
  create_namespace(hub.admin(), release_ns, cleanup);
  create_namespace(member->admin(), release_ns, cleanup);

  // The probers run in the member chart's namespace: the hub chart's prober.namespace. A hub id
  // of the test's own keeps the calls' objects apart from a real hub's operator.
  std::vector<std::string> hub_args = {"--set", "prober.namespace=" + release_ns, "--set",
                                       "hubId=" + release};
  for (std::string& arg : hub_values(job_ns)) hub_args.push_back(std::move(arg));
  const ProcessResult hub_render = render("tessel", "", hub_args, release, release_ns);
  ASSERT_EQ(hub_render.exit_code, 0) << hub_render.out << hub_render.err;
  const ProcessResult member_render =
      render("tessel-member", "", member_values(job_ns), release, release_ns);
  ASSERT_EQ(member_render.exit_code, 0) << member_render.out << member_render.err;
  const std::vector<json> hub_objects = rendered_objects(hub_render.out);
  const std::vector<json> member_objects = rendered_objects(member_render.out);

  OperationScope scope;
  const std::vector<std::string> operator_args = container_args(hub_objects, "Deployment");
  const std::vector<std::string> prober_args = container_args(member_objects, "DaemonSet");
  scope.operator_namespace = flag_value(operator_args, "--namespace");
  scope.watch_namespace = flag_value(operator_args, "--watch-namespace");
  scope.member_selector = flag_value(operator_args, "--member-selector");
  scope.hub_id = flag_value(operator_args, "--hub-id");
  scope.lease_name = flag_value(operator_args, "--lease-name");
  scope.prober_namespace = flag_value(operator_args, "--prober-namespace");
  scope.peer_selector = flag_value(prober_args, "--peer-selector");
  scope.peers_configmap = flag_value(prober_args, "--peers-configmap");
  for (const auto& [flag, value] : {std::pair{"--namespace", scope.operator_namespace},
                                    {"--hub-id", scope.hub_id},
                                    {"--lease-name", scope.lease_name},
                                    {"--prober-namespace", scope.prober_namespace},
                                    {"--peer-selector", scope.peer_selector},
                                    {"--peers-configmap", scope.peers_configmap}}) {
    ASSERT_FALSE(value.empty()) << "the rendered charts set no " << flag;
  }
  ASSERT_EQ(scope.prober_namespace, release_ns) << "the member chart's namespace";
  scope.job_namespace = job_ns;
  scope.job_name = "rbac-job";
  scope.member_name = release + "-member";
  scope.pod_image = "tessel/stage:rbac-check";
  scope.jobs = served(crds, "TrainingJob");
  scope.members = served(crds, "MemberCluster");
  scope.create_node = !member->is_real();
  if (scope.create_node) {
    scope.node_name = release + "-node";
  } else {
    const kube::ListResult nodes =
        member->admin().list_all(*kube::ResourceRegistry().find_resource("", "nodes"), "");
    if (nodes.items.empty()) GTEST_SKIP() << "the real member cluster has no Node";
    scope.node_name = kube::object_name(nodes.items.front());
  }

  // Clean-up of what the calls leave outside the namespaces (and, on a real hub, the finalizer
  // that would hold the job's namespace).
  // (Copies: the clean-up runs after this function's other locals are gone.)
  cleanup.add("the TrainingJob's finalizer",
              [&hub, jobs = scope.jobs, ns = scope.job_namespace, name = scope.job_name] {
                try {
                  json job = hub.admin().get(jobs, ns, name);
                  if (kube::remove_finalizer(job, "tessel.dev/cleanup"))
                    hub.admin().update(jobs, job);
                } catch (const kube::ApiError& e) {
                  if (!e.is_not_found()) throw;
                }
              });
  cleanup.add("the MemberCluster and its Events", [&hub, members = scope.members,
                                                   name = scope.member_name] {
    try {
      const json m = hub.admin().get(members, "", name);
      const auto& events = *kube::ResourceRegistry().find_kind("v1", "Event");
      for (const json& event : kube::events_for_object(hub.admin(), m)) {
        hub.admin().remove(events, kube::object_namespace(event), kube::object_name(event));
      }
      hub.admin().remove(members, "", name);
    } catch (const kube::ApiError& e) {
      if (!e.is_not_found()) throw;
    }
  });
  cleanup.add(
      "the Node's annotation", [&member, create = scope.create_node, name = scope.node_name] {
        const auto& nodes = *kube::ResourceRegistry().find_resource("", "nodes");
        try {
          if (create) {
            member->admin().remove(nodes, "", name);
          } else {
            member->admin().patch(nodes, "", name, kube::PatchType::kMerge,
                                  kube::annotation_merge_patch("net.tessel.dev/rbac-check", {}));
          }
        } catch (const kube::ApiError& e) {
          if (!e.is_not_found()) throw;
        }
      });

  // The charts' identities and rights, and a token for each identity.
  ChartRbac hub_rbac(hub.admin(), hub_objects);
  ChartRbac member_rbac(member->admin(), member_objects);
  Identities who{&hub.admin(), &member->admin(), {}};
  const auto client_of = [](const TestCluster& cluster, const std::string& ns,
                            const std::string& account) {
    return kube::Client::from_config(
        with_token(cluster.config(), create_token(cluster.kubeconfig_path(), ns, account)),
        TestCluster::unlimited());
  };
  who.clients[Identity::kHubOperator] =
      client_of(hub, release_ns, service_account(hub_objects, ""));
  who.clients[Identity::kHubOperator]->register_resource(scope.jobs);
  who.clients[Identity::kHubOperator]->register_resource(scope.members);
  who.clients[Identity::kMemberOperator] =
      client_of(*member, release_ns, service_account(member_objects, "operator-access"));
  who.clients[Identity::kProber] =
      client_of(*member, release_ns, service_account(member_objects, "prober"));

  const std::vector<Operation> ops = operation_catalogue(scope);
  std::cout << "The catalogue (" << ops.size() << " calls):\n";
  for (const Operation& op : ops)
    std::cout << "  " << op.name << " -> " << describe(op) << " [" << to_string(op.identity)
              << "]\n";

  // With every rule in place, every call succeeds. (What fails here is reported, and set
  // aside below: a rule's removal is judged by the calls it adds to these.)
  std::map<bool, std::set<std::string>> baseline;
  for (const bool on_hub : {true, false}) {
    const Round round = run_until(ops, who, on_hub, real, [](const Round& r) {
      return r.forbidden.empty() && r.errors.empty();
    });
    EXPECT_TRUE(round.forbidden.empty())
        << (on_hub ? "hub" : "member") << ": the charts do not allow" << lines(round.forbidden);
    ASSERT_TRUE(round.errors.empty())
        << (on_hub ? "hub" : "member") << ": calls that failed" << lines(round.errors);
    baseline[on_hub] = {round.forbidden.begin(), round.forbidden.end()};
  }

  // Without any one rule, some call is refused.
  for (const auto& [rbac, on_hub] : {std::pair{&hub_rbac, true}, {&member_rbac, false}}) {
    const std::set<std::string>& before = baseline[on_hub];
    const auto newly_forbidden = [&before](const Round& r) {
      std::vector<std::string> added;
      for (const std::string& name : r.forbidden) {
        if (!before.contains(name)) added.push_back(name);
      }
      return added;
    };
    for (const RenderedRole& role : rbac->roles()) {
      for (std::size_t i = 0; i < role.rules.size(); ++i) {
        const std::string rule = describe_rule(role, i);
        rbac->set_rules(role, without_rule(role, i));
        const Round without = run_until(
            ops, who, on_hub, real, [&](const Round& r) { return !newly_forbidden(r).empty(); });
        rbac->set_rules(role, role.rules);
        const std::vector<std::string> broken = newly_forbidden(without);
        std::cout << "removing " << rule
                  << " breaks:" << (broken.empty() ? " nothing" : lines(broken)) << "\n";
        EXPECT_FALSE(broken.empty())
            << "removing " << rule << " breaks no named operation: it is not least privilege";
        EXPECT_TRUE(without.errors.empty())
            << "without " << rule << ", calls failed other than 403:" << lines(without.errors);
        const Round restored = run_until(ops, who, on_hub, real, [&](const Round& r) {
          return newly_forbidden(r).empty() && r.errors.empty();
        });
        ASSERT_TRUE(newly_forbidden(restored).empty() && restored.errors.empty())
            << "with " << rule << " restored, calls still fail:" << lines(newly_forbidden(restored))
            << lines(restored.errors);
      }
    }
  }
}

bool skip_without_kubectl() { return !find_on_path("kubectl").has_value(); }

TEST(ChartRbac, EveryRuleOfBothChartsIsNeededByANamedOperation) {
  TESSEL_SKIP_WITHOUT_HELM();
  if (skip_without_kubectl()) GTEST_SKIP() << "kubectl is not on PATH";
  TESSEL_REQUIRE_MEMBER_CLUSTERS(1);
  check_every_rule_is_needed([](const std::string&) { return std::vector<std::string>{}; },
                             [](const std::string&) { return std::vector<std::string>{}; });
}

// The charts' namespaced variant: the operator watches one namespace (hub: watchNamespace) and
// may touch jobs' objects only there (member: operatorAccess.jobNamespaces).
TEST(ChartRbac, EveryRuleIsNeededWhenTheOperatorWatchesOneNamespace) {
  TESSEL_SKIP_WITHOUT_HELM();
  if (skip_without_kubectl()) GTEST_SKIP() << "kubectl is not on PATH";
  TESSEL_REQUIRE_MEMBER_CLUSTERS(1);
  check_every_rule_is_needed(
      [](const std::string& job_ns) {
        return std::vector<std::string>{"--set", "watchNamespace=" + job_ns};
      },
      [](const std::string& job_ns) {
        return std::vector<std::string>{"--set", "operatorAccess.jobNamespaces={" + job_ns + "}"};
      });
}

}  // namespace
}  // namespace tessel::testing::helm
