// crds/ as a user meets it with the real kubectl: `kubectl apply -f crds/`, the example
// TrainingJob applied and listed with its printer columns and defaults, a status the operator
// writes shown by `kubectl get`, and invalid jobs and MemberClusters refused by the schema with
// the field named. On a real cluster (TESSEL_TEST_KUBECONFIG) the two CRDs stay installed, as
// an installation leaves them.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "kube/client.h"
#include "tests/kubectl/kubectl_fixture.h"

namespace tessel::testing {
namespace {

using nlohmann::json;

const std::string kSource = TESSEL_SOURCE_DIR;

class TrainingJobCrd : public KubectlFixture {
 protected:
  void install_crds() {
    const std::string applied = kubectl_ok({"apply", "-f", kSource + "/crds/"});
    for (const char* crd : {"memberclusters.tessel.dev", "trainingjobs.tessel.dev"}) {
      EXPECT_TRUE(std::regex_search(
          applied, std::regex("customresourcedefinition.apiextensions.k8s.io/" + std::string(crd) +
                              " (created|configured|unchanged)\n")))
          << applied;
      kubectl_ok(
          {"wait", "--for", "condition=established", "--timeout=30s", "crd/" + std::string(crd)});
    }
  }

  // The example manifest with `edit` applied to its parsed YAML, written to a file.
  std::string example_job(const std::string& name,
                          const std::function<void(YAML::Node&)>& edit = {}) {
    YAML::Node job = YAML::LoadFile(kSource + "/examples/trainingjobs/fables.yaml");
    job["metadata"]["name"] = name;
    if (edit) edit(job);
    return write_file(name + ".yaml", YAML::Dump(job));
  }

  std::string member_cluster(const std::string& name,
                             const std::function<void(YAML::Node&)>& edit = {}) {
    YAML::Node member = YAML::Load(
        "apiVersion: tessel.dev/v1alpha1\n"
        "kind: MemberCluster\n"
        "metadata: {name: " +
        name +
        "}\n"
        "spec: {kubeconfigSecretRef: {name: member-kubeconfig}, region: eu-north-1}\n");
    if (edit) edit(member);
    return write_file(name + ".yaml", YAML::Dump(member));
  }

  kube::ResourceInfo trainingjobs() {
    return cluster_->admin().resource_for("tessel.dev/v1alpha1", "TrainingJob");
  }
};

TEST_F(TrainingJobCrd, TheExampleJobIsAcceptedWithItsDefaults) {
  install_crds();
  EXPECT_EQ(kubectl_ok({"apply", "-f", example_job("fables")}),
            "trainingjob.tessel.dev/fables created\n");
  const json job = json::parse(kubectl_ok({"get", "trainingjob", "fables", "-o", "json"}));
  const json& spec = job["spec"];
  EXPECT_EQ(spec["parallelism"]["virtualStages"], 1);
  EXPECT_EQ(spec["parallelism"]["overlap"], true);
  EXPECT_EQ(spec["parallelism"]["microbatchGroup"], 0);
  EXPECT_EQ(spec["training"]["beta1"], 0.9);
  EXPECT_EQ(spec["training"]["beta2"], 0.95);
  EXPECT_EQ(spec["placement"]["costModel"], "full");
  EXPECT_EQ(spec["placement"]["seed"], 1);
  EXPECT_EQ(spec["suspend"], false);
  EXPECT_EQ(spec["failurePolicy"]["startTimeoutSeconds"], 600);
  EXPECT_EQ(spec["checkpoint"]["keep"], 2);  // as given, not the default 3
  // No network section in the example: the schema does not invent one (defaults apply only
  // inside objects that are present).
  EXPECT_FALSE(spec.contains("network")) << spec.dump(2);
}

// The low-communication example is stored as written; its settings get no defaults from the
// schema (tessel applies the runtime's), so a synchronous job holds none of them.
TEST_F(TrainingJobCrd, TheLowCommunicationExampleIsStoredAsWritten) {
  install_crds();
  EXPECT_EQ(
      kubectl_ok({"apply", "-f", kSource + "/examples/trainingjobs/fables-low-communication.yaml"}),
      "trainingjob.tessel.dev/fables-low-communication created\n");
  const json job =
      json::parse(kubectl_ok({"get", "trainingjob", "fables-low-communication", "-o", "json"}));
  EXPECT_EQ(job["spec"]["dataParallel"], (json{{"mode", "low-communication"},
                                               {"syncEvery", 10},
                                               {"deltaBits", 8},
                                               {"outerLearningRate", 1.0},
                                               {"outerMomentum", 0.0},
                                               {"nesterov", true},
                                               {"delayed", true}}));
  kubectl_ok({"apply", "-f", example_job("fables-synchronous", [](YAML::Node& j) {
                j["spec"]["dataParallel"] = YAML::Load("{}");
              })});
  const json synchronous =
      json::parse(kubectl_ok({"get", "trainingjob", "fables-synchronous", "-o", "json"}));
  EXPECT_EQ(synchronous["spec"]["dataParallel"], (json{{"mode", "synchronous"}}));
}

TEST_F(TrainingJobCrd, GetShowsPhaseProgressAndClustersFromTheStatus) {
  install_crds();
  kubectl_ok({"apply", "-f", example_job("fables-status")});
  const std::string before = kubectl_ok({"get", "trainingjobs", "fables-status"});
  const std::vector<std::string> lines = lines_of(before);
  ASSERT_EQ(lines.size(), 2u) << before;
  EXPECT_EQ(words_of(lines[0]),
            (std::vector<std::string>{"NAME", "PHASE", "STAGES", "REPLICAS", "CLUSTERS", "STEP",
                                      "LOSS", "TOKENS/S", "ETA", "AGE"}));
  // Before any status: name, stages, replicas and age only.
  ASSERT_EQ(words_of(lines[1]).size(), 4u) << before;
  EXPECT_EQ(words_of(lines[1])[1], "2");

  kube::Client& admin = cluster_->admin();
  json job = admin.get(trainingjobs(), namespace_name(), "fables-status");
  job["status"] = {
      {"phase", "Running"},
      {"observedGeneration", job["metadata"]["generation"]},
      {"placement", {{"clusters", "member-a,member-b"}, {"predictedIterationSeconds", 0.61}}},
      {"progress",
       {{"step", 120},
        {"totalSteps", 300},
        {"loss", 2.41},
        {"tokensPerSecond", 5230},
        {"eta", "1m2s"}}}};
  admin.update_status(trainingjobs(), job);
  const std::vector<std::vector<std::string>> rows =
      rows_named(kubectl_ok({"get", "trainingjobs"}), "fables-status");
  ASSERT_EQ(rows.size(), 1u);
  const std::vector<std::string> row = rows[0];
  ASSERT_EQ(row.size(), 10u);
  EXPECT_EQ(std::vector<std::string>(row.begin(), row.end() - 1),
            (std::vector<std::string>{"fables-status", "Running", "2", "2", "member-a,member-b",
                                      "120", "2.41", "5230", "1m2s"}));
}

TEST_F(TrainingJobCrd, TheStatusSchemaRefusesANegativeStep) {
  install_crds();
  kubectl_ok({"apply", "-f", example_job("fables-bad-status")});
  kube::Client& admin = cluster_->admin();
  json job = admin.get(trainingjobs(), namespace_name(), "fables-bad-status");
  job["status"] = {{"phase", "Running"}, {"progress", {{"step", -1}}}};
  try {
    admin.update_status(trainingjobs(), job);
    FAIL() << "a negative step was stored";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("status.progress.step"), std::string::npos) << e.what();
  }
}

struct InvalidJob {
  const char* name;
  std::function<void(YAML::Node&)> edit;
  const char* field;  // the field kubectl's error must name
};

TEST_F(TrainingJobCrd, InvalidJobsAreRefusedNamingTheField) {
  install_crds();
  const std::vector<InvalidJob> cases = {
      {"zero-stages", [](YAML::Node& j) { j["spec"]["parallelism"]["stages"] = 0; },
       "spec.parallelism.stages"},
      {"too-many-replicas", [](YAML::Node& j) { j["spec"]["parallelism"]["replicas"] = 5000; },
       "spec.parallelism.replicas"},
      {"unknown-schedule", [](YAML::Node& j) { j["spec"]["parallelism"]["schedule"] = "zigzag"; },
       "spec.parallelism.schedule"},
      {"stages-as-text", [](YAML::Node& j) { j["spec"]["parallelism"]["stages"] = "two"; },
       "spec.parallelism.stages"},
      {"no-parallelism", [](YAML::Node& j) { j["spec"].remove("parallelism"); },
       "spec.parallelism"},
      {"no-global-batch", [](YAML::Node& j) { j["spec"]["batch"].remove("globalBatch"); },
       "spec.batch.globalBatch"},
      {"zero-learning-rate", [](YAML::Node& j) { j["spec"]["training"]["learningRate"] = 0; },
       "spec.training.learningRate"},
      {"beta-above-one", [](YAML::Node& j) { j["spec"]["training"]["beta2"] = 1.5; },
       "spec.training.beta2"},
      {"negative-seed", [](YAML::Node& j) { j["spec"]["training"]["seed"] = -1; },
       "spec.training.seed"},
      {"zero-steps", [](YAML::Node& j) { j["spec"]["training"]["steps"] = 0; },
       "spec.training.steps"},
      {"unknown-preset", [](YAML::Node& j) { j["spec"]["model"]["preset"] = "gpt5"; },
       "spec.model.preset"},
      {"unknown-precision", [](YAML::Node& j) { j["spec"]["model"]["precision"] = "fp8"; },
       "spec.model.precision"},
      {"vocab-below-bytes", [](YAML::Node& j) { j["spec"]["model"]["vocab"] = 100; },
       "spec.model.vocab"},
      {"huge-hidden", [](YAML::Node& j) { j["spec"]["model"]["hidden"] = 1048576; },
       "spec.model.hidden"},
      {"empty-data-path", [](YAML::Node& j) { j["spec"]["data"]["text"]["path"] = ""; },
       "spec.data.text.path"},
      {"bad-memory-quantity",
       [](YAML::Node& j) { j["spec"]["template"]["resources"]["limits"]["memory"] = "10 GB"; },
       "spec.template.resources.limits.memory"},
      {"unknown-pull-policy",
       [](YAML::Node& j) { j["spec"]["template"]["imagePullPolicy"] = "Sometimes"; },
       "spec.template.imagePullPolicy"},
      {"mount-without-path",
       [](YAML::Node& j) {
         j["spec"]["template"]["volumeMounts"].push_back(YAML::Load("{name: data}"));
       },
       "spec.template.volumeMounts[0].mountPath"},
      {"bad-toleration-effect",
       [](YAML::Node& j) {
         j["spec"]["template"]["tolerations"].push_back(
             YAML::Load("{key: gpu, operator: Exists, effect: Evict}"));
       },
       "spec.template.tolerations[0].effect"},
      {"unknown-strategy", [](YAML::Node& j) { j["spec"]["placement"]["strategy"] = "greedy"; },
       "spec.placement.strategy"},
      {"absurd-budget", [](YAML::Node& j) { j["spec"]["placement"]["evaluations"] = 2000000000; },
       "spec.placement.evaluations"},
      {"bad-selector-operator",
       [](YAML::Node& j) {
         j["spec"]["placement"]["clusterSelector"]["matchExpressions"].push_back(
             YAML::Load("{key: region, operator: Near}"));
       },
       "spec.placement.clusterSelector.matchExpressions[0].operator"},
      {"keep-zero-checkpoints", [](YAML::Node& j) { j["spec"]["checkpoint"]["keep"] = 0; },
       "spec.checkpoint.keep"},
      {"negative-restarts", [](YAML::Node& j) { j["spec"]["failurePolicy"]["maxRestarts"] = -1; },
       "spec.failurePolicy.maxRestarts"},
      {"elastic-zero-min-replicas", [](YAML::Node& j) { j["spec"]["elastic"]["minReplicas"] = 0; },
       "spec.elastic.minReplicas"},
      {"elastic-without-min-replicas",
       [](YAML::Node& j) { j["spec"]["elastic"] = YAML::Load("{}"); }, "spec.elastic.minReplicas"},
      {"elastic-min-replicas-as-text",
       [](YAML::Node& j) { j["spec"]["elastic"]["minReplicas"] = "half"; },
       "spec.elastic.minReplicas"},
      {"unknown-network-mode", [](YAML::Node& j) { j["spec"]["network"]["mode"] = "Overlay"; },
       "spec.network.mode"},
      {"zero-io-timeout", [](YAML::Node& j) { j["spec"]["network"]["ioTimeoutSeconds"] = 0; },
       "spec.network.ioTimeoutSeconds"},
      {"suspend-as-text", [](YAML::Node& j) { j["spec"]["suspend"] = "maybe"; }, "spec.suspend"},
      {"unknown-data-parallel-mode",
       [](YAML::Node& j) { j["spec"]["dataParallel"]["mode"] = "sometimes"; },
       "spec.dataParallel.mode"},
      {"zero-sync-period",
       [](YAML::Node& j) {
         j["spec"]["dataParallel"] = YAML::Load("{mode: low-communication, syncEvery: 0}");
       },
       "spec.dataParallel.syncEvery"},
      {"sixteen-bit-deltas",
       [](YAML::Node& j) {
         j["spec"]["dataParallel"] = YAML::Load("{mode: low-communication, deltaBits: 16}");
       },
       "spec.dataParallel.deltaBits"},
      {"outer-momentum-of-one",
       [](YAML::Node& j) {
         j["spec"]["dataParallel"] = YAML::Load("{mode: low-communication, outerMomentum: 1}");
       },
       "spec.dataParallel.outerMomentum"},
      {"managed-by-without-domain", [](YAML::Node& j) { j["spec"]["managedBy"] = "kueue"; },
       "spec.managedBy"},
  };
  for (const InvalidJob& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string name = std::string("bad-") + c.name;
    const std::string err = kubectl_fails({"apply", "-f", example_job(name, c.edit)});
    EXPECT_NE(err.find("The TrainingJob \"" + name + "\" is invalid"), std::string::npos) << err;
    EXPECT_NE(err.find(c.field), std::string::npos) << err;
    // Nothing was stored.
    EXPECT_NE(kubectl_->run({"get", "trainingjob", name}).exit_code, 0);
  }
}

TEST_F(TrainingJobCrd, MemberClustersShowTheirColumnsAndRefuseBadSpecs) {
  install_crds();
  const std::string good = random_name("member");
  EXPECT_EQ(kubectl_ok({"apply", "-f", member_cluster(good)}),
            "membercluster.tessel.dev/" + good + " created\n");
  const std::string table = kubectl_ok({"get", "memberclusters", good});
  EXPECT_EQ(words_of(lines_of(table)[0]),
            (std::vector<std::string>{"NAME", "REGION", "REACHABLE", "NODES", "GPUS", "FREE",
                                      "PROBED", "AGE"}));
  const json stored = json::parse(kubectl_ok({"get", "membercluster", good, "-o", "json"}));
  EXPECT_EQ(stored["spec"]["kubeconfigSecretRef"]["key"], "kubeconfig");
  EXPECT_EQ(stored["spec"]["allowInsecureTLS"], false);

  const std::vector<InvalidJob> cases = {
      {"no-secret-ref", [](YAML::Node& m) { m["spec"].remove("kubeconfigSecretRef"); },
       "spec.kubeconfigSecretRef"},
      {"secret-name-uppercase",
       [](YAML::Node& m) { m["spec"]["kubeconfigSecretRef"]["name"] = "Member_A"; },
       "spec.kubeconfigSecretRef.name"},
      {"secret-key-slash",
       [](YAML::Node& m) { m["spec"]["kubeconfigSecretRef"]["key"] = "../config"; },
       "spec.kubeconfigSecretRef.key"},
      {"region-with-space", [](YAML::Node& m) { m["spec"]["region"] = "us west"; }, "spec.region"},
      {"insecure-as-text", [](YAML::Node& m) { m["spec"]["allowInsecureTLS"] = "yes please"; },
       "spec.allowInsecureTLS"},
  };
  for (const InvalidJob& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string name = random_name(c.name);
    const std::string err = kubectl_fails({"apply", "-f", member_cluster(name, c.edit)});
    EXPECT_NE(err.find("The MemberCluster \"" + name + "\" is invalid"), std::string::npos) << err;
    EXPECT_NE(err.find(c.field), std::string::npos) << err;
  }
  kubectl_ok({"delete", "membercluster", good});
}

}  // namespace
}  // namespace tessel::testing
