#include "tests/operator_e2e/federation.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "kube/api_error.h"
#include "kube/base64.h"
#include "placement/atomic_file.h"
#include "tests/operator_e2e/gpu_fleet.h"

namespace tessel::testing {

using nlohmann::json;

namespace {

// How long a member's token controller may take to fill the chart's token Secret in.
constexpr std::chrono::seconds kTokenSecretTimeout{60};

// The member chart's ServiceAccount of the hub operator (operatorAccess.serviceAccount.name's
// default) and its token Secret (templates/operator-rbac.yaml).
const std::string kMemberServiceAccount = "tessel-operator";

const kube::ResourceInfo& secrets() {
  static const kube::ResourceInfo info = *kube::ResourceRegistry().find_resource("", "secrets");
  return info;
}

}  // namespace

std::vector<std::string> hub_chart_values(const std::string& namespace_, const std::string& run_id,
                                          bool real_hub) {
  std::vector<std::string> values = {
      "hubId=" + run_id,
      "watchNamespace=" + namespace_,
      "memberSelector=" + std::string(kRunLabel) + "=" + run_id,
      "prober.namespace=" + namespace_,
      "leaderElection.leaseDurationSeconds=" + std::to_string(kLeaseDurationSeconds),
      "leaderElection.renewDeadlineSeconds=" + std::to_string(kRenewDeadlineSeconds),
      "leaderElection.retryPeriodSeconds=" + std::to_string(kRetryPeriodSeconds),
      "statusIntervalSeconds=1",
      "stage.dataRoot=" + std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs",
      "stageService.port=" + std::to_string(kStageServicePort),
      "stageService.advertise=127.0.0.1:" + std::to_string(kStageServicePort)};
  if (real_hub)
    values.push_back("nodeSelector.e2e\\.tessel\\.dev/no-node=replicas-run-by-the-test");
  return values;
}

namespace {

// Test servers authorize as kube-apiserver with RBAC: the operator gets what the charts grant.
ApiTestServerOptions rbac_server() {
  ApiTestServerOptions options;
  options.authorization = Authorization::kRbac;
  return options;
}

// `values` less those whose key one of `overrides` sets: helm applies --set over --set-json
// whatever their order on the command line, so a --set-json override of a --set key would be lost.
std::vector<std::string> without_overridden(std::vector<std::string> values,
                                            const std::vector<std::string>& overrides) {
  const auto key = [](const std::string& value) { return value.substr(0, value.find('=')); };
  std::erase_if(values, [&](const std::string& value) {
    return std::any_of(overrides.begin(), overrides.end(),
                       [&](const std::string& o) { return key(o) == key(value); });
  });
  return values;
}

}  // namespace

Federation::Federation(const std::vector<MemberSpec>& members, const std::string& work_dir,
                       const std::vector<std::string>& more_hub_values)
    : specs_(members), hub_(std::make_unique<TestCluster>(rbac_server())), work_dir_(work_dir) {
  // The hub's namespace is "tessel-test-<suffix>": the run is "e2e-<suffix>".
  run_id_ = "e2e-" + hub_->namespace_name().substr(hub_->namespace_name().rfind('-') + 1);
  kubectl_ = std::make_unique<Kubectl>(hub_->kubeconfig_path(), namespace_name(),
                                       work_dir_ + "/kubectl-cache");
  hub_chart_ = render_chart(
      {.chart = "tessel",
       .release = release(),
       .namespace_ = namespace_name(),
       .set_values = without_overridden(
           hub_chart_values(namespace_name(), run_id_, hub_->is_real()), more_hub_values),
       .include_crds = true,
       .set_json_values = more_hub_values});
  for (size_t i = 0; i < specs_.size(); ++i) {
    members_.push_back(TestCluster::member(static_cast<int>(i), namespace_name(), rbac_server()));
    member_kubectls_.push_back(
        std::make_unique<Kubectl>(members_.back()->kubeconfig_path(), namespace_name(),
                                  work_dir_ + "/kubectl-cache-" + specs_[i].letter));
  }
  member_charts_.resize(specs_.size());
}

Federation::~Federation() {
  const auto quietly = [](const auto& action) {
    try {
      action();
    } catch (const std::exception&) {
      // Clean-up is best effort: what is gone already is fine.
    }
  };
  remove_webhooks();
  if (registered_) {
    const kube::ResourceInfo memberclusters =
        hub_->admin().resource_for("tessel.dev/v1alpha1", "MemberCluster");
    for (int i = 0; i < member_count(); ++i) {
      // The operator is gone by now: a finalizer it left would keep the object forever.
      quietly([&] {
        hub_->admin().patch(memberclusters, "", member_name(i), kube::PatchType::kMerge,
                            {{"metadata", {{"finalizers", nullptr}}}});
      });
      quietly([&] { hub_->admin().remove(memberclusters, "", member_name(i)); });
    }
  }
  // A test server goes with everything in it; a real cluster keeps what is not namespaced.
  if (hub_->is_real()) quietly([&] { delete_cluster_scoped(*kubectl_, hub_chart_); });
  for (int i = 0; i < member_count(); ++i)
    if (members_[i]->is_real())
      quietly([&] { delete_cluster_scoped(*member_kubectls_[i], member_charts_[i]); });
}

std::string Federation::member_name(int index) const {
  return run_id_ + "-" + specs_.at(index).letter;
}

std::string Federation::run_command(const std::vector<std::string>& args) {
  const ProcessResult result = kubectl_->run(args);
  if (result.exit_code != 0) throw std::runtime_error(describe(result));
  return result.out;
}

std::string Federation::install_crds() {
  std::vector<RenderedObject> crds;
  for (const RenderedObject& rendered : hub_chart_)
    if (rendered.object.value("kind", "") == "CustomResourceDefinition") crds.push_back(rendered);
  std::string out = apply_server_side(hub_->kubeconfig_path(), work_dir_ + "/kubectl-cache", crds,
                                      work_dir_ + "/hub-chart-crds.yaml");
  for (const char* crd : {"memberclusters.tessel.dev", "trainingjobs.tessel.dev"})
    out += run_command(
        {"wait", "--for=condition=established", "--timeout=60s", "crd/" + std::string(crd)});
  return out;
}

std::string Federation::install_hub() {
  std::vector<RenderedObject> rest;
  for (const RenderedObject& rendered : hub_chart_) {
    const std::string kind = rendered.object.value("kind", "");
    if (kind == "CustomResourceDefinition") continue;  // install_crds()
    const bool webhook =
        kind == "ValidatingWebhookConfiguration" || kind == "MutatingWebhookConfiguration";
    if (webhook && hub_->is_real()) continue;
    webhooks_installed_ = webhooks_installed_ || webhook;
    rest.push_back(rendered);
  }
  return apply_server_side(hub_->kubeconfig_path(), work_dir_ + "/kubectl-cache", rest,
                           work_dir_ + "/hub-chart.yaml");
}

void Federation::remove_webhooks() {
  if (!webhooks_installed_) return;
  kube::Client& hub = hub_->admin();
  for (const char* kind : {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"})
    for (const json& configuration : objects_of_kind(hub_chart_, kind)) {
      try {
        hub.remove(hub.resource_for("admissionregistration.k8s.io/v1", kind), "",
                   configuration["metadata"]["name"]);
      } catch (const std::exception&) {
        // Gone already.
      }
    }
  webhooks_installed_ = false;
}

std::string Federation::install_member(int index) {
  member_charts_.at(index) = render_chart({.chart = "tessel-member",
                                           .release = release(),
                                           .namespace_ = namespace_name(),
                                           .set_values = {},
                                           .include_crds = false,
                                           .set_json_values = {}});
  apply_server_side(members_.at(index)->kubeconfig_path(),
                    work_dir_ + "/kubectl-cache-" + specs_.at(index).letter, member_charts_[index],
                    work_dir_ + "/member-chart-" + specs_.at(index).letter + ".yaml");
  // The token controller fills the Secret in: token, ca.crt, namespace.
  const std::string secret = kMemberServiceAccount + "-token";
  kube::Client& member = members_.at(index)->admin();
  const auto deadline = std::chrono::steady_clock::now() + kTokenSecretTimeout;
  json last;
  while (true) {
    try {
      last = member.get(secrets(), namespace_name(), secret);
      const std::optional<std::string> token =
          kube::base64_decode(last.value("/data/token"_json_pointer, std::string()));
      if (token && !token->empty()) return *token;
    } catch (const kube::ApiError& error) {
      if (error.code() != 404) throw;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      throw std::runtime_error(
          "member " + member_name(index) + ": Secret " + namespace_name() + "/" + secret +
          " of helm/tessel-member held no data.token " +
          std::to_string(kTokenSecretTimeout.count()) +
          " s after it was applied; last seen: " + (last.is_null() ? "absent" : last.dump()));
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

std::vector<json> Federation::member_manifests(int index, const std::string& token) const {
  const std::string name = member_name(index);
  const std::string secret = name + "-kubeconfig";
  return {
      {{"apiVersion", "v1"},
       {"kind", "Secret"},
       {"metadata", {{"name", secret}, {"namespace", namespace_name()}}},
       {"type", "Opaque"},
       {"stringData",
        {{"kubeconfig", token_kubeconfig(members_.at(index)->config(), token, namespace_name())}}}},
      {{"apiVersion", "tessel.dev/v1alpha1"},
       {"kind", "MemberCluster"},
       {"metadata", {{"name", name}, {"labels", {{kRunLabel, run_id_}}}}},
       {"spec",
        {{"kubeconfigSecretRef", {{"name", secret}}}, {"region", specs_.at(index).region}}}}};
}

std::string Federation::register_members() {
  std::vector<std::string> args = {"apply"};
  for (int i = 0; i < member_count(); ++i) {
    const std::vector<json> manifests = member_manifests(i, install_member(i));
    for (size_t k = 0; k < manifests.size(); ++k) {
      const std::string path = work_dir_ + "/" + member_name(i) + "-" + std::to_string(k) + ".json";
      placement::write_file_atomically(path, manifests[k].dump(2));
      args.insert(args.end(), {"-f", path});
    }
  }
  registered_ = true;
  return run_command(args);
}

}  // namespace tessel::testing
