// What the hub chart (helm/tessel) renders: the operator's Deployment, its RBAC (exactly
// docs/operator.md's hub table), the webhooks and their certificate, the Services, the CRDs.
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/helm/helm_fixture.h"

namespace tessel::testing::helm {
namespace {

const std::string kExamples = std::string(TESSEL_SOURCE_DIR) + "/helm/tessel/examples/";

std::vector<std::string> args_of(const YAML::Node& deployment) {
  std::vector<std::string> args;
  for (const auto& a : deployment["spec"]["template"]["spec"]["containers"][0]["args"]) {
    args.push_back(a.as<std::string>());
  }
  return args;
}

// The value of --flag=VALUE in args; "(absent)" when not given.
std::string flag(const std::vector<std::string>& args, const std::string& name) {
  for (const auto& a : args) {
    if (a.rfind(name + "=", 0) == 0) return a.substr(name.size() + 1);
  }
  return "(absent)";
}

std::set<std::string> flag_names(const std::vector<std::string>& args) {
  std::set<std::string> names;
  for (const auto& a : args) names.insert(a.substr(0, a.find('=')));
  return names;
}

TEST(HubChart, OperatorDeploymentRunsTwoLeaderElectedReplicasLockedDown) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto objects = render_objects("tessel");
  const auto deployment = find(objects, "Deployment");
  EXPECT_EQ(deployment["spec"]["replicas"].as<int>(), 2);
  const auto pod = deployment["spec"]["template"]["spec"];
  const auto container = pod["containers"][0];
  const auto args = args_of(deployment);
  EXPECT_EQ(flag(args, "--leader-elect"), "true");
  EXPECT_EQ(flag(args, "--namespace"), "tessel-system");
  EXPECT_EQ(flag(args, "--identity"), "$(POD_NAME)");
  // The leader labels its own Pod for the stage Service.
  EXPECT_EQ(flag(args, "--pod-name"), "$(POD_NAME)");
  ASSERT_EQ(container["env"][0]["name"].as<std::string>(), "POD_NAME");
  EXPECT_EQ(container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(),
            "metadata.name");

  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"].as<std::string>(), "RuntimeDefault");
  const auto sc = container["securityContext"];
  EXPECT_TRUE(sc["runAsNonRoot"].as<bool>());
  EXPECT_TRUE(sc["readOnlyRootFilesystem"].as<bool>());
  EXPECT_FALSE(sc["allowPrivilegeEscalation"].as<bool>());
  ASSERT_EQ(sc["capabilities"]["drop"].size(), 1u);
  EXPECT_EQ(sc["capabilities"]["drop"][0].as<std::string>(), "ALL");
  EXPECT_EQ(sc["seccompProfile"]["type"].as<std::string>(), "RuntimeDefault");
  EXPECT_TRUE(container["resources"]["requests"]["cpu"]);
  EXPECT_TRUE(container["resources"]["requests"]["memory"]);
  EXPECT_TRUE(container["resources"]["limits"]["memory"]);

  EXPECT_EQ(container["livenessProbe"]["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(container["livenessProbe"]["httpGet"]["scheme"].as<std::string>(), "HTTPS");
  EXPECT_EQ(container["readinessProbe"]["httpGet"]["path"].as<std::string>(), "/readyz");
  EXPECT_EQ(container["readinessProbe"]["httpGet"]["scheme"].as<std::string>(), "HTTPS");
  EXPECT_EQ(container["livenessProbe"]["httpGet"]["port"].as<std::string>(), "https");

  // The TLS Secret is what --tls-* read.
  EXPECT_EQ(pod["volumes"][0]["secret"]["secretName"].as<std::string>(), "t-tessel-tls");
  EXPECT_EQ(container["volumeMounts"][0]["mountPath"].as<std::string>(),
            "/etc/tessel-operator/tls");
  EXPECT_EQ(flag(args, "--tls-cert-file"), "/etc/tessel-operator/tls/tls.crt");
  EXPECT_EQ(flag(args, "--tls-key-file"), "/etc/tessel-operator/tls/tls.key");
  EXPECT_EQ(flag(args, "--tls-ca-file"), "/etc/tessel-operator/tls/ca.crt");
  EXPECT_EQ(pod["serviceAccountName"].as<std::string>(), "t-tessel");
}

// Every flag of `tessel-operator --help` but --help and --kubeconfig (in-cluster) comes from a
// value; --watch-namespace and --member-selector only when set.
TEST(HubChart, EveryOperatorFlagIsAValue) {
  TESSEL_SKIP_WITHOUT_HELM();
  const std::set<std::string> always{"--namespace",
                                     "--hub-id",
                                     "--prober-namespace",
                                     "--prober-selector",
                                     "--leader-elect",
                                     "--lease-name",
                                     "--lease-duration",
                                     "--renew-deadline",
                                     "--retry-period",
                                     "--identity",
                                     "--pod-name",
                                     "--https-address",
                                     "--tls-cert-file",
                                     "--tls-key-file",
                                     "--tls-ca-file",
                                     "--stage-service-address",
                                     "--stage-service-advertise",
                                     "--stage-image",
                                     "--data-root",
                                     "--workers",
                                     "--status-interval",
                                     "--member-resync",
                                     "--log-level"};
  EXPECT_EQ(flag_names(args_of(find(render_objects("tessel"), "Deployment"))), always);

  const auto args =
      args_of(find(render_objects("tessel", kExamples + "single-namespace.yaml"), "Deployment"));
  EXPECT_EQ(flag(args, "--watch-namespace"), "team-a");
  EXPECT_EQ(flag(args, "--member-selector"), "tessel.dev/team=team-a");
  EXPECT_EQ(flag(args, "--hub-id"), "hub-team-a");
  EXPECT_EQ(flag(args, "--lease-name"), "tessel-operator-team-a");
  EXPECT_EQ(flag(args, "--lease-duration"), "30");
  EXPECT_EQ(flag(args, "--renew-deadline"), "20");
  EXPECT_EQ(flag(args, "--retry-period"), "4");
  EXPECT_EQ(flag(args, "--stage-image"), "registry.example.org/tessel/stage:0.1.0");
  EXPECT_EQ(flag(args, "--data-root"), "/data/corpora");
  EXPECT_EQ(flag(args, "--log-level"), "debug");
  EXPECT_EQ(flag(args, "--stage-service-advertise"), "tessel-stage-team-a.hub.example.org:7443");
}

TEST(HubChart, StageServiceAdvertiseDefaultsToTheInClusterServiceName) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto objects = render_objects("tessel");
  EXPECT_EQ(flag(args_of(find(objects, "Deployment")), "--stage-service-advertise"),
            "t-tessel-stage.tessel-system.svc:7443");
  const auto stage = find(objects, "Service", "t-tessel-stage");
  EXPECT_EQ(stage["spec"]["type"].as<std::string>(), "ClusterIP");
  EXPECT_EQ(stage["spec"]["ports"][0]["port"].as<int>(), 7443);
  EXPECT_EQ(stage["spec"]["ports"][0]["targetPort"].as<std::string>(), "stage");
  const auto webhook = find(objects, "Service", "t-tessel");
  EXPECT_EQ(webhook["spec"]["ports"][0]["port"].as<int>(), 443);
  EXPECT_EQ(webhook["spec"]["ports"][0]["targetPort"].as<std::string>(), "https");

  const auto exposed = render_objects("tessel", kExamples + "external-stage-address.yaml");
  const auto lb = find(exposed, "Service", "t-tessel-stage");
  EXPECT_EQ(lb["spec"]["type"].as<std::string>(), "LoadBalancer");
  EXPECT_EQ(lb["spec"]["loadBalancerSourceRanges"].size(), 2u);
  EXPECT_EQ(flag(args_of(find(exposed, "Deployment")), "--stage-service-advertise"),
            "203.0.113.10:7443");
}

// Only the Lease holder serves the stage service: the stage Service selects the Pod it labels
// (--pod-name), the webhook Service every replica.
TEST(HubChart, TheStageServiceSelectsTheLabelledLeaderAndTheWebhooksEveryReplica) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto objects = render_objects("tessel");
  const auto pod_labels = find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"];
  const auto stage = find(objects, "Service", "t-tessel-stage")["spec"]["selector"];
  EXPECT_EQ(stage["tessel.dev/stage-service"].as<std::string>(""), "serving") << YAML::Dump(stage);
  EXPECT_FALSE(pod_labels["tessel.dev/stage-service"])
      << "the operator sets the label, the template must not: " << YAML::Dump(pod_labels);
  const auto webhook = find(objects, "Service", "t-tessel")["spec"]["selector"];
  EXPECT_FALSE(webhook["tessel.dev/stage-service"]) << YAML::Dump(webhook);
  // Apart from the label, both select the Deployment's Pods.
  for (const auto& selector : {stage, webhook}) {
    for (const auto& term : selector) {
      const std::string key = term.first.as<std::string>();
      if (key == "tessel.dev/stage-service") continue;
      EXPECT_EQ(pod_labels[key].as<std::string>(""), term.second.as<std::string>()) << key;
    }
  }
}

// docs/operator.md, "RBAC", "In the hub": the ServiceAccount holds exactly these grants.
TEST(HubChart, RbacIsExactlyTheHubTableOfTheDocs) {
  TESSEL_SKIP_WITHOUT_HELM();
  const Grants expected = expand({
      {"*", "tessel.dev", {"trainingjobs"}, {}, {"list", "watch", "update"}},
      {"*", "tessel.dev", {"trainingjobs/status"}, {}, {"update"}},
      {"*", "tessel.dev", {"memberclusters"}, {}, {"get", "list", "watch"}},
      {"*", "tessel.dev", {"memberclusters/status"}, {}, {"update"}},
      {"tessel-system", "", {"secrets"}, {}, {"list", "watch"}},
      {"*", "", {"secrets"}, {}, {"get", "create"}},
      {"*", "", {"events"}, {}, {"create", "patch"}},
      {"tessel-system", "coordination.k8s.io", {"leases"}, {}, {"get", "create", "update"}},
      {"tessel-system", "", {"pods"}, {}, {"list", "patch"}},
  });
  const auto held =
      grants_of_service_account(render_objects("tessel"), "tessel-system", "t-tessel");
  EXPECT_EQ(held, expected) << "held:\n" << to_string(held) << "expected:\n" << to_string(expected);
}

// With one watched namespace, the jobs' Secrets and Events are granted there only, and the
// MemberClusters' Events in default (where Kubernetes files Events of cluster-scoped objects).
TEST(HubChart, OneWatchedNamespaceNarrowsTheJobGrantsToIt) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto held = grants_of_service_account(
      render_objects("tessel", kExamples + "single-namespace.yaml"), "tessel-system", "t-tessel");
  EXPECT_TRUE(held.count({"team-a", "", "secrets", "", "create"})) << to_string(held);
  EXPECT_TRUE(held.count({"team-a", "", "events", "", "patch"})) << to_string(held);
  EXPECT_TRUE(held.count({"default", "", "events", "", "create"})) << to_string(held);
  EXPECT_TRUE(held.count({"default", "", "events", "", "patch"})) << to_string(held);
  EXPECT_FALSE(held.count({"default", "", "secrets", "", "create"})) << to_string(held);
  EXPECT_FALSE(held.count({"*", "", "secrets", "", "create"})) << to_string(held);
  EXPECT_FALSE(held.count({"*", "", "events", "", "create"})) << to_string(held);
}

TEST(HubChart, WebhooksCallTheServiceWithTheGeneratedCa) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto objects = render_objects("tessel");
  const auto secret = find(objects, "Secret", "t-tessel-tls");
  EXPECT_EQ(secret["type"].as<std::string>(), "kubernetes.io/tls");
  const std::string ca = secret["data"]["ca.crt"].as<std::string>();
  EXPECT_NE(base64_decode(ca).find("-----BEGIN CERTIFICATE-----"), std::string::npos);
  EXPECT_NE(base64_decode(secret["data"]["tls.crt"].as<std::string>()).find("BEGIN CERTIFICATE"),
            std::string::npos);
  EXPECT_NE(base64_decode(secret["data"]["tls.key"].as<std::string>()).find("PRIVATE KEY"),
            std::string::npos);

  for (const auto& [kind, path] :
       {std::pair<std::string, std::string>{"ValidatingWebhookConfiguration", "/validate"},
        {"MutatingWebhookConfiguration", "/mutate"}}) {
    const auto webhook = find(objects, kind)["webhooks"][0];
    const auto client = webhook["clientConfig"];
    EXPECT_EQ(client["caBundle"].as<std::string>(""), ca) << kind;
    EXPECT_EQ(client["service"]["name"].as<std::string>(), "t-tessel") << kind;
    EXPECT_EQ(client["service"]["namespace"].as<std::string>(), "tessel-system") << kind;
    EXPECT_EQ(client["service"]["path"].as<std::string>(), path) << kind;
    EXPECT_EQ(client["service"]["port"].as<int>(), 443) << kind;
    EXPECT_EQ(webhook["failurePolicy"].as<std::string>(), "Fail") << kind;
    EXPECT_EQ(webhook["sideEffects"].as<std::string>(), "None") << kind;
    const auto rule = webhook["rules"][0];
    EXPECT_EQ(rule["apiGroups"][0].as<std::string>(), "tessel.dev") << kind;
    EXPECT_EQ(rule["resources"].size(), 2u) << kind;
    EXPECT_EQ(rule["resources"][0].as<std::string>(), "trainingjobs") << kind;
    EXPECT_EQ(rule["resources"][1].as<std::string>(), "memberclusters") << kind;
    EXPECT_EQ(YAML::Dump(rule["operations"]), YAML::Dump(YAML::Load("[CREATE, UPDATE]"))) << kind;
  }
}

TEST(HubChart, CertManagerMakesTheCertificateAndInjectsTheCa) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto objects = render_objects("tessel", kExamples + "cert-manager.yaml");
  EXPECT_TRUE(of_kind(objects, "Secret").empty()) << "cert-manager writes the TLS Secret";
  const auto certificate = find(objects, "Certificate");
  EXPECT_EQ(certificate["spec"]["secretName"].as<std::string>(), "t-tessel-tls");
  EXPECT_EQ(certificate["spec"]["issuerRef"]["name"].as<std::string>(), "internal-ca");
  EXPECT_EQ(certificate["spec"]["issuerRef"]["kind"].as<std::string>(), "ClusterIssuer");
  bool names_stage_host = false;
  for (const auto& n : certificate["spec"]["dnsNames"]) {
    names_stage_host = names_stage_host || n.as<std::string>() == "tessel-stage.hub.example.org";
  }
  EXPECT_TRUE(names_stage_host) << YAML::Dump(certificate["spec"]["dnsNames"]);
  EXPECT_TRUE(of_kind(objects, "Issuer").empty()) << "an issuerRef was given";
  for (const std::string kind :
       {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}) {
    const auto webhook = find(objects, kind);
    EXPECT_EQ(
        webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].as<std::string>(""),
        "tessel-system/t-tessel")
        << kind;
    EXPECT_FALSE(webhook["webhooks"][0]["clientConfig"]["caBundle"]) << kind;
  }
  // Without an issuerRef the chart makes its own CA with cert-manager.
  const auto own = render_objects("tessel", "", {"--set", "certificate.certManager.enabled=true"});
  EXPECT_EQ(of_kind(own, "Issuer").size(), 2u);
  EXPECT_EQ(of_kind(own, "Certificate").size(), 2u);
}

TEST(HubChart, PodDisruptionBudgetAndServiceMonitor) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto defaults = render_objects("tessel");
  EXPECT_EQ(find(defaults, "PodDisruptionBudget")["spec"]["minAvailable"].as<int>(), 1);
  EXPECT_TRUE(of_kind(defaults, "ServiceMonitor").empty()) << "off by default";

  const auto ha = render_objects("tessel", kExamples + "ha-with-servicemonitor.yaml");
  EXPECT_EQ(find(ha, "Deployment")["spec"]["replicas"].as<int>(), 3);
  EXPECT_EQ(find(ha, "PodDisruptionBudget")["spec"]["minAvailable"].as<int>(), 2);
  const auto monitor = find(ha, "ServiceMonitor");
  EXPECT_EQ(monitor["metadata"]["labels"]["release"].as<std::string>(), "prometheus");
  const auto endpoint = monitor["spec"]["endpoints"][0];
  EXPECT_EQ(endpoint["path"].as<std::string>(), "/metrics");
  EXPECT_EQ(endpoint["scheme"].as<std::string>(), "https");
  EXPECT_EQ(endpoint["tlsConfig"]["ca"]["secret"]["name"].as<std::string>(), "t-tessel-tls");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The chart's crds/ carries the repo's crds/*.yaml, unchanged.
TEST(HubChart, CarriesTheRepositoryCrds) {
  TESSEL_SKIP_WITHOUT_HELM();
  const auto objects = render_objects("tessel", "", {"--include-crds"});
  const auto crds = of_kind(objects, "CustomResourceDefinition");
  ASSERT_EQ(crds.size(), 2u);
  for (const std::string name :
       {"tessel.dev_trainingjobs.yaml", "tessel.dev_memberclusters.yaml"}) {
    const auto repo = YAML::Load(read_file(std::string(TESSEL_SOURCE_DIR) + "/crds/" + name));
    const auto rendered =
        find(objects, "CustomResourceDefinition", repo["metadata"]["name"].as<std::string>());
    EXPECT_EQ(YAML::Dump(rendered), YAML::Dump(repo)) << name;
  }
}

}  // namespace
}  // namespace tessel::testing::helm
