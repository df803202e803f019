// Hostile input against the running operator: MemberClusters whose kubeconfigs are missing,
// malformed, unsafe or pointing nowhere, and TrainingJobs its webhook must refuse. Each is
// flagged (Reachable False with its reason) or refused (kubectl names the field), and none
// crashes or wedges the operator: a good job applied afterwards still trains to the end.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kube/base64.h"
#include "tests/operator_e2e/e2e_fixture.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

struct BadMember {
  std::string why;
  std::string kubeconfig;  // the Secret's data.kubeconfig; "" with no_secret / no_key
  bool no_secret = false;
  bool no_key = false;
};

std::string kubeconfig_with(const std::string& cluster_fields, const std::string& user_fields) {
  return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n" + cluster_fields +
         "users:\n- name: u\n  user:\n" + user_fields +
         "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";
}

class HostileInputsE2e : public OperatorE2e {
 protected:
  // This run's prefix for cluster-scoped names ("e2e-<run>"), from its members' names.
  std::string run_prefix() {
    const std::string a = federation_->member_name(0);
    return a.substr(0, a.rfind('-'));
  }

  // The MemberCluster and, unless the case has none, its Secret, applied with kubectl.
  void apply_member(const std::string& name, const BadMember& bad) {
    if (!bad.no_secret) {
      json data = json::object();
      if (!bad.no_key) data["kubeconfig"] = kube::base64_encode(bad.kubeconfig);
      apply({{"apiVersion", "v1"},
             {"kind", "Secret"},
             {"metadata",
              {{"name", name + "-kubeconfig"}, {"namespace", federation_->namespace_name()}}},
             {"type", "Opaque"},
             {"data", data}},
            name + "-secret");
    }
    apply({{"apiVersion", "tessel.dev/v1alpha1"},
           {"kind", "MemberCluster"},
           // The run's label: its operator watches only the run's MemberClusters.
           {"metadata", {{"name", name}, {"labels", {{kRunLabel, federation_->run_id()}}}}},
           {"spec", {{"kubeconfigSecretRef", {{"name", name + "-kubeconfig"}}}}}},
          name);
  }

  void apply(const json& object, const std::string& file) {
    const std::string path = work_dir_ + "/" + file + ".json";
    std::ofstream(path) << object.dump();
    kubectl_ok({"apply", "-f", path});
  }
};

TEST_F(HostileInputsE2e, BadMemberClustersAreFlaggedAndBadJobsRefusedAndTheOperatorGoesOn) {
  // A server that answers nothing: a port nobody listens on (1 is privileged and unused).
  const std::string ca = kube::base64_encode(ca_pem_);
  const std::vector<BadMember> cases = {
      {"its Secret does not exist", "", true, false},
      {"its Secret has no kubeconfig key", "", false, true},
      {"the kubeconfig is not YAML", "clusters: [unclosed", false, false},
      {"an exec plugin",
       kubeconfig_with(
           "    server: https://127.0.0.1:1\n    certificate-authority-data: " + ca + "\n",
           "    exec: {apiVersion: client.authentication.k8s.io/v1, command: "
           "/bin/sh, args: [-c, 'rm -rf /tmp/x']}\n"),
       false, false},
      {"a token file on the operator's disk",
       kubeconfig_with(
           "    server: https://127.0.0.1:1\n    certificate-authority-data: " + ca + "\n",
           "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n"),
       false, false},
      {"TLS verification off without allowInsecureTLS",
       kubeconfig_with("    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\n",
                       "    token: abc\n"),
       false, false},
      {"plain HTTP", kubeconfig_with("    server: http://127.0.0.1:1\n", "    token: abc\n"), false,
       false},
      {"a server nobody answers at",
       kubeconfig_with(
           "    server: https://127.0.0.1:1\n    certificate-authority-data: " + ca + "\n",
           "    token: abc\n"),
       false, false},
  };
  std::map<std::string, std::string> why_of;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string name = run_prefix() + "-bad-" + std::to_string(i);
    apply_member(name, cases[i]);
    why_of[name] = cases[i].why;
  }

  // Each is flagged: Reachable False with a reason and a message, never left Unknown.
  for (const auto& [name, why] : why_of) {
    json member;
    EXPECT_TRUE(wait_for(
        [&] {
          const ProcessResult got = kubectl({"get", "membercluster", name, "-o", "json"});
          if (got.exit_code != 0) return false;
          member = json::parse(got.out);
          return condition_of(member, "Reachable").value("status", "") == "False";
        },
        seconds(90)))
        << why << ": " << member.value("status", json::object()).dump();
    if (!member.is_object()) continue;
    const json reachable = condition_of(member, "Reachable");
    EXPECT_FALSE(reachable.value("reason", "").empty()) << why;
    EXPECT_FALSE(reachable.value("message", "").empty()) << why;
  }

  // TrainingJobs the webhook refuses, each naming its field (where a webhook is registered).
  if (webhook_registered()) {
    const std::vector<std::pair<std::string, std::function<void(json&)>>> bad_jobs = {
        {"spec.batch.globalBatch", [](json& j) { j["spec"]["batch"]["globalBatch"] = 15; }},
        {"spec.parallelism.stages", [](json& j) { j["spec"]["parallelism"]["stages"] = 9; }},
        {"spec.template.resources.limits[nvidia.com/gpu]",
         [](json& j) { j["spec"]["template"]["resources"]["limits"]["nvidia.com/gpu"] = 2; }},
        {"spec.template.env[0].name",
         [](json& j) {
           j["spec"]["template"]["env"] = {{{"name", "POD_IP"}, {"value", "x"}}};
         }},
    };
    for (size_t i = 0; i < bad_jobs.size(); ++i) {
      const ProcessResult refused = kubectl(
          {"apply", "-f", example_job("refused-" + std::to_string(i), 10, bad_jobs[i].second)});
      EXPECT_NE(refused.exit_code, 0) << bad_jobs[i].first;
      EXPECT_NE(refused.err.find(bad_jobs[i].first), std::string::npos)
          << "kubectl did not name " << bad_jobs[i].first << ": " << refused.err;
    }
  }

  // The operator goes on: a good job trains to the end on the good members.
  ASSERT_TRUE(operators_.front()->running()) << operators_.front()->log();
  kubectl_ok({"apply", "-f", example_job("after-hostile", 40)});
  const json done = wait_for_phase("after-hostile", "Succeeded", seconds(240));
  EXPECT_EQ(condition_of(done, "Succeeded").value("status", ""), "True") << done["status"].dump();
  EXPECT_TRUE(operators_.front()->running()) << operators_.front()->log();

  for (const auto& [name, why] : why_of) kubectl({"delete", "membercluster", name, "--wait=false"});
}

}  // namespace
}  // namespace tessel::testing
