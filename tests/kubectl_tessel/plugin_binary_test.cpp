// The built kubectl-tessel binary against API test servers: a hub holding a TrainingJob with
// its status (the fixture's), a member cluster whose GPU Nodes carry net.tessel.dev/links, and
// the real kubectl finding the plugin on $PATH (skipped, saying so, without kubectl).
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "api/link_annotations.h"
#include "api/yaml_json.h"
#include "cli/kubectl_tessel/placement_view.h"
#include "cli/kubectl_tessel/top_view.h"
#include "kube/api_error.h"
#include "kube/base64.h"
#include "kube/resource.h"
#include "tests/kubectl/child_process.h"
#include "tests/support/api_yaml.h"
#include "tests/support/process_kubelet_node.h"
#include "tests/support/test_cluster.h"

namespace tessel::kubectl_tessel {
namespace {

using nlohmann::json;
using testing::ProcessResult;

const std::string kDir = std::string(TESSEL_SOURCE_DIR) + "/tests/kubectl_tessel/";
constexpr auto kTimeout = std::chrono::seconds(60);

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

// The tessel CRDs applied and served in `cluster`; returns (TrainingJob, MemberCluster).
std::pair<kube::ResourceInfo, kube::ResourceInfo> install_crds(testing::TestCluster& cluster) {
  const kube::ResourceInfo crds =
      *kube::ResourceRegistry().find_resource("apiextensions.k8s.io", "customresourcedefinitions");
  std::vector<kube::ResourceInfo> served;
  for (const char* file : {"tessel.dev_trainingjobs.yaml", "tessel.dev_memberclusters.yaml"}) {
    const json crd =
        testing::parse_yaml(read_text(std::string(TESSEL_SOURCE_DIR) + "/crds/" + file));
    kube::ApplyOptions apply;
    apply.field_manager = "tessel-tests";
    cluster.admin().apply(crds, crd, apply);
    served.push_back(kube::parse_custom_resource_definition(crd).front());
  }
  const auto until = std::chrono::steady_clock::now() + kTimeout;
  for (;;) {
    try {
      cluster.admin().list(served[0], cluster.namespace_name());
      cluster.admin().list(served[1], "");
      break;
    } catch (const kube::ApiError&) {
      if (std::chrono::steady_clock::now() > until) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return {served[0], served[1]};
}

class KubectlTesselBinary : public ::testing::Test {
 protected:
  void SetUp() override {
    std::tie(jobs_, members_) = install_crds(hub_);
    // The example job, with the fixture's status written through the status subresource.
    json job = api::yaml_to_json(
        read_text(std::string(TESSEL_SOURCE_DIR) + "/examples/trainingjobs/fables.yaml"),
        "fables.yaml");
    job["metadata"] = {{"name", "fables"}, {"namespace", ns()}};
    json created = hub_.admin().create(jobs_, ns(), job);
    created["status"] = json::parse(read_text(kDir + "fixtures/job_running.json"))["status"];
    job_ = hub_.admin().update_status(jobs_, created);
  }

  const std::string& ns() const { return hub_.namespace_name(); }

  ProcessResult plugin(std::vector<std::string> args) const {
    args.insert(args.begin(),
                {KUBECTL_TESSEL_BINARY, "--kubeconfig", hub_.kubeconfig_path(), "-n", ns()});
    return testing::run_process(args, kTimeout);
  }

  testing::TestCluster hub_;
  kube::ResourceInfo jobs_, members_;
  json job_;
};

TEST_F(KubectlTesselBinary, PlacementAndTopOfAJobInTheHub) {
  ProcessResult r = plugin({"placement", "fables"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  // What the API holds, drawn as the golden tests draw it (the namespace's length moves the
  // header's line break, so not the golden file itself).
  EXPECT_EQ(r.out, render_placement(placement_view(job_)));
  EXPECT_NE(r.out.find("member-b/gpu-b2~7-slot04-h200:2"), std::string::npos) << r.out;
  r = plugin({"placement", "fables", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(json::parse(r.out), placement_view(job_));
  r = plugin({"top", "fables"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, render_top(top_view(job_)));
  EXPECT_NE(r.out.find("0      3        121         2.412 s   31.2%  0.8123 s"), std::string::npos)
      << r.out;
  r = plugin({"top", "fables", "-o", "yaml"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(api::yaml_to_json(r.out, "stdout"), top_view(job_));
}

TEST_F(KubectlTesselBinary, AMissingJobIsNamedWithItsNamespace) {
  const ProcessResult r = plugin({"top", "nope"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_EQ(r.err, "error: TrainingJob nope not found in namespace " + ns() +
                       " (-n/--namespace to look in another)\n");
  EXPECT_TRUE(r.out.empty());
}

TEST_F(KubectlTesselBinary, LinksReadTheMembersNodesThroughTheirSecrets) {
  TESSEL_REQUIRE_TEST_SERVER(hub_, "a MemberCluster and Nodes of its own");
  const std::unique_ptr<testing::TestCluster> member = testing::TestCluster::member(0, ns());
  TESSEL_REQUIRE_TEST_SERVER(*member, "Nodes of its own");
  const std::string name = "kt-" + ns();
  // The Secret in the operator's namespace (this test's), as the operator reads it.
  const json secret = {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata", {{"name", name}, {"namespace", ns()}}},
      {"data", {{"kubeconfig", kube::base64_encode(member->self_contained_kubeconfig())}}}};
  hub_.admin().create(secret);
  hub_.admin().create(members_, "",
                      {{"apiVersion", "tessel.dev/v1alpha1"},
                       {"kind", "MemberCluster"},
                       {"metadata", {{"name", name}}},
                       {"spec", {{"kubeconfigSecretRef", {{"name", name}}}}}});
  // Measured now: fresh for the operator (an older figure would be marked stale).
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char at[32];
  std::strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &utc);
  api::NodeLinks gpu1, gpu2;
  gpu1.peers["gpu-2"] = {0.2, 0.3, 1.5, 9.5, at};
  gpu2.peers["*"] = {0.4, 0.5, 1.2, 7.5, at};
  for (const auto& [node, links] : {std::pair{"gpu-1", gpu1}, std::pair{"gpu-2", gpu2}}) {
    testing::ProcessNodeOptions options;
    options.name = node;
    options.gpus = 8;
    options.cpu = "16";
    options.memory = "64Gi";
    options.annotations = {{api::kLinksAnnotation, api::format_node_links(links)}};
    testing::register_node(member->admin(), options, "127.0.0.1", std::chrono::seconds(40));
  }
  const ProcessResult r =
      plugin({"links", "--operator-namespace", ns(), "--cluster", name, "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json view = json::parse(r.out);
  ASSERT_EQ(view["nodes"].size(), 2u) << r.out;
  ASSERT_EQ(view["links"].size(), 2u) << r.out;
  EXPECT_EQ(view["links"][0]["from"], name + "/gpu-1");
  EXPECT_EQ(view["links"][0]["to"], name + "/gpu-2");
  EXPECT_EQ(view["links"][0]["source"], "measured");
  EXPECT_DOUBLE_EQ(view["links"][0]["gbps"].get<double>(), 9.5);
  EXPECT_EQ(view["links"][1]["source"], "aggregated");
  EXPECT_DOUBLE_EQ(view["links"][1]["rttMs"].get<double>(), 0.4);
  const ProcessResult text =
      plugin({"links", "--operator-namespace", ns(), "--cluster", name, "--rtt"});
  ASSERT_EQ(text.exit_code, 0) << describe(text);
  EXPECT_NE(text.out.find("  9.5\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("7.5*"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("0.4*"), std::string::npos) << text.out;
  // The wrong operator namespace: the Secret is named, and where it was looked for.
  const ProcessResult wrong =
      plugin({"links", "--operator-namespace", "elsewhere", "--cluster", name, "-o", "json"});
  ASSERT_EQ(wrong.exit_code, 0) << describe(wrong);
  const json unreadable = json::parse(wrong.out)["unreadable"];
  ASSERT_EQ(unreadable.size(), 1u) << wrong.out;
  EXPECT_EQ(unreadable[0]["cluster"], name);
  EXPECT_EQ(unreadable[0]["error"], "Secret elsewhere/" + name +
                                        " (spec.kubeconfigSecretRef) not found; is the "
                                        "operator's namespace elsewhere? (--operator-namespace)");
  hub_.admin().remove(members_, "", name);
}

TEST_F(KubectlTesselBinary, KubectlFindsThePluginOnPath) {
  if (!testing::find_on_path("kubectl")) GTEST_SKIP() << "no kubectl on PATH";
  const std::string bin = std::filesystem::path(KUBECTL_TESSEL_BINARY).parent_path();
  const char* path = std::getenv("PATH");
  const std::vector<std::string> env = {"env", "PATH=" + bin + ":" + (path ? path : ""),
                                        "KUBECONFIG=" + hub_.kubeconfig_path()};
  std::vector<std::string> missing = env;
  missing.insert(missing.end(), {"kubectl", "tessel", "placement", "x", "-n", ns()});
  ProcessResult r = testing::run_process(missing, kTimeout);
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("TrainingJob x not found in namespace " + ns()), std::string::npos)
      << describe(r);
  std::vector<std::string> found = env;
  found.insert(found.end(), {"kubectl", "tessel", "placement", "fables", "--namespace", ns()});
  r = testing::run_process(found, kTimeout);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, render_placement(placement_view(job_)));
}

}  // namespace
}  // namespace tessel::kubectl_tessel
