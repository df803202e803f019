#include "tests/operator_e2e/federation.h"

#include <stdexcept>

#include "placement/atomic_file.h"
#include "tests/operator_e2e/gpu_fleet.h"

namespace tessel::testing {

using nlohmann::json;

Federation::Federation(const std::vector<MemberSpec>& members, const std::string& work_dir)
    : specs_(members), hub_(std::make_unique<TestCluster>()), work_dir_(work_dir) {
  // The hub's namespace is "tessel-test-<suffix>": the run is "e2e-<suffix>".
  run_id_ = "e2e-" + hub_->namespace_name().substr(hub_->namespace_name().rfind('-') + 1);
  kubectl_ = std::make_unique<Kubectl>(hub_->kubeconfig_path(), namespace_name(),
                                       work_dir_ + "/kubectl-cache");
  for (size_t i = 0; i < specs_.size(); ++i)
    members_.push_back(TestCluster::member(static_cast<int>(i), namespace_name()));
}

Federation::~Federation() {
  const auto quietly = [](const auto& action) {
    try {
      action();
    } catch (const std::exception&) {
      // Clean-up is best effort: what is gone already is fine.
    }
  };
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
  std::string out = run_command({"apply", "-f", std::string(TESSEL_SOURCE_DIR) + "/crds/"});
  for (const char* crd : {"memberclusters.tessel.dev", "trainingjobs.tessel.dev"})
    out += run_command(
        {"wait", "--for=condition=established", "--timeout=60s", "crd/" + std::string(crd)});
  return out;
}

std::vector<json> Federation::member_manifests(int index) const {
  const std::string name = member_name(index);
  const std::string secret = name + "-kubeconfig";
  return {{{"apiVersion", "v1"},
           {"kind", "Secret"},
           {"metadata", {{"name", secret}, {"namespace", namespace_name()}}},
           {"type", "Opaque"},
           {"stringData", {{"kubeconfig", members_.at(index)->self_contained_kubeconfig()}}}},
          {{"apiVersion", "tessel.dev/v1alpha1"},
           {"kind", "MemberCluster"},
           {"metadata", {{"name", name}, {"labels", {{kRunLabel, run_id_}}}}},
           {"spec",
            {{"kubeconfigSecretRef", {{"name", secret}}}, {"region", specs_.at(index).region}}}}};
}

std::string Federation::register_members() {
  std::vector<std::string> args = {"apply"};
  for (int i = 0; i < member_count(); ++i) {
    const std::vector<json> manifests = member_manifests(i);
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
