// The container set-up of the process kubelet: $(VAR) expansion, the downward API, the mount
// convention, volumes, the environment, and the command line, with ConfigMaps and Secrets
// served by an in-memory reader.
#include "tests/support/process_kubelet_container_setup.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace tessel::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const PodAddresses kAddresses{"10.0.0.11", "10.0.0.11"};

json test_pod() {
  return json::parse(R"js({
    "metadata": {"name": "gpt-a-s0-r0", "namespace": "team", "uid": "c9cf-uid",
                 "labels": {"tessel.dev/job": "gpt-a", "app": "stage"},
                 "annotations": {"note": "say \"hi\""}},
    "spec": {"nodeName": "gpu-node-a", "serviceAccountName": "default", "containers": []}
  })js");
}

// ConfigMaps and Secrets by "Kind/namespace/name".
struct FakeObjects {
  std::map<std::string, json> objects;
  // Tokens "token-for-<service account>-<audience>-<seconds>"; none for service account "none".
  TokenIssuer issuer() const {
    return [](const json& pod, const std::string& audience, std::int64_t seconds) {
      const std::string account = pod["spec"].value("serviceAccountName", "default");
      if (account == "none") throw std::runtime_error("serviceaccounts \"none\" not found");
      return "token-for-" + account + "-" + audience + "-" + std::to_string(seconds);
    };
  }
  ObjectReader reader() const {
    return [this](const std::string& kind, const std::string& ns,
                  const std::string& name) -> std::optional<json> {
      const auto it = objects.find(kind + "/" + ns + "/" + name);
      if (it == objects.end()) return std::nullopt;
      return it->second;
    };
  }
};

FakeObjects fake_objects() {
  FakeObjects fake;
  fake.objects["ConfigMap/team/settings"] = {
      {"metadata", {{"name", "settings"}}},
      {"data", {{"greeting", "hello"}, {"peers.json", "{\"peers\":[]}"}}},
      {"binaryData", {{"blob", "AAE="}}}};
  fake.objects["Secret/team/creds"] = {{"metadata", {{"name", "creds"}}},
                                       {"data", {{"token", "czNjcmV0"}}}};  // "s3cret"
  return fake;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tessel-kubelet-setup-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(ExpandVariablesTest, FollowsKubernetesExpansion) {
  const std::map<std::string, std::string> vars = {{"POD", "gpt-a"}, {"EMPTY", ""}};
  EXPECT_EQ(expand_variables("--name=$(POD)", vars), "--name=gpt-a");
  EXPECT_EQ(expand_variables("$(POD)-$(POD)", vars), "gpt-a-gpt-a");
  EXPECT_EQ(expand_variables("[$(EMPTY)]", vars), "[]");
  EXPECT_EQ(expand_variables("$(MISSING)", vars), "$(MISSING)");
  EXPECT_EQ(expand_variables("$$(POD)", vars), "$(POD)");
  EXPECT_EQ(expand_variables("cost $5 $", vars), "cost $5 $");
  EXPECT_EQ(expand_variables("$(POD", vars), "$(POD");
}

TEST(ContainerGpuRequestTest, ReadsWholeNumbersFromLimitsElseRequests) {
  EXPECT_EQ(container_gpu_request({{"name", "a"}}), 0);
  EXPECT_EQ(container_gpu_request({{"resources", {{"limits", {{"nvidia.com/gpu", "2"}}}}}}), 2);
  EXPECT_EQ(container_gpu_request({{"resources", {{"requests", {{"nvidia.com/gpu", 3}}}}}}), 3);
  try {
    container_gpu_request(
        {{"name", "a"}, {"resources", {{"limits", {{"nvidia.com/gpu", "500m"}}}}}});
    FAIL() << "no error";
  } catch (const std::invalid_argument& error) {
    EXPECT_STREQ(error.what(), "container a: limits nvidia.com/gpu \"500m\" is not a whole number");
  }
}

TEST(PodFieldTest, ReadsTheDownwardApiFields) {
  const json pod = test_pod();
  EXPECT_EQ(pod_field(pod, "metadata.name", kAddresses), "gpt-a-s0-r0");
  EXPECT_EQ(pod_field(pod, "metadata.namespace", kAddresses), "team");
  EXPECT_EQ(pod_field(pod, "metadata.uid", kAddresses), "c9cf-uid");
  EXPECT_EQ(pod_field(pod, "spec.nodeName", kAddresses), "gpu-node-a");
  EXPECT_EQ(pod_field(pod, "spec.serviceAccountName", kAddresses), "default");
  EXPECT_EQ(pod_field(pod, "status.podIP", kAddresses), "10.0.0.11");
  EXPECT_EQ(pod_field(pod, "status.hostIP", kAddresses), "10.0.0.11");
  EXPECT_EQ(pod_field(pod, "metadata.labels['tessel.dev/job']", kAddresses), "gpt-a");
  EXPECT_EQ(pod_field(pod, "metadata.annotations['note']", kAddresses), "say \"hi\"");
  EXPECT_EQ(pod_field(pod, "metadata.labels['absent']", kAddresses), "");
}

TEST(PodFieldTest, LabelMapsOnlyInVolumesAndUnknownPathsNamed) {
  const json pod = test_pod();
  EXPECT_EQ(pod_field(pod, "metadata.labels", kAddresses, true),
            "app=\"stage\"\ntessel.dev/job=\"gpt-a\"");
  EXPECT_EQ(pod_field(pod, "metadata.annotations", kAddresses, true), "note=\"say \\\"hi\\\"\"");
  EXPECT_THROW(pod_field(pod, "metadata.labels", kAddresses), ContainerConfigError);
  try {
    pod_field(pod, "spec.hostname", kAddresses);
    FAIL() << "no error";
  } catch (const ContainerConfigError& error) {
    EXPECT_STREQ(error.what(), "unsupported fieldPath: spec.hostname");
  }
}

TEST(RewriteMountPathsTest, PrefixesPathsUnderAMountOnly) {
  const std::vector<std::string> mounts = {"/etc/tessel", "/data"};
  EXPECT_EQ(rewrite_mount_paths("--peers=/etc/tessel/peers.json", mounts, "/r"),
            "--peers=/r/etc/tessel/peers.json");
  EXPECT_EQ(rewrite_mount_paths("/etc/tessel", mounts, "/r"), "/r/etc/tessel");
  EXPECT_EQ(rewrite_mount_paths("cat /data/x /etc/tessel/y > out", mounts, "/r"),
            "cat /r/data/x /r/etc/tessel/y > out");
  EXPECT_EQ(rewrite_mount_paths("/etc/tessel-other /database", mounts, "/r"),
            "/etc/tessel-other /database");
  EXPECT_EQ(rewrite_mount_paths("a/etc/tessel", mounts, "/r"), "a/etc/tessel");
  EXPECT_EQ(rewrite_mount_paths("PATHS=/data:/etc/tessel", mounts, "/r"),
            "PATHS=/r/data:/r/etc/tessel");
}

TEST_F(ScratchDir, ConfigMapSecretAndDownwardApiVolumesBecomeFiles) {
  json pod = test_pod();
  pod["spec"]["volumes"] = json::parse(R"js([
    {"name": "all", "configMap": {"name": "settings"}},
    {"name": "some", "configMap": {"name": "settings", "defaultMode": 384,
                                   "items": [{"key": "greeting", "path": "sub/hi.txt"}]}},
    {"name": "secret", "secret": {"secretName": "creds"}},
    {"name": "info", "downwardAPI": {"items": [
      {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
      {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
    {"name": "scratch", "emptyDir": {}},
    {"name": "maybe", "configMap": {"name": "absent", "optional": true}}
  ])js");
  const FakeObjects fake = fake_objects();
  prepare_volumes(pod, (dir_ / "volumes").string(), (dir_ / "node").string(), fake.reader(),
                  fake.issuer(), kAddresses);
  EXPECT_EQ(read(dir_ / "volumes/all/greeting"), "hello");
  EXPECT_EQ(read(dir_ / "volumes/all/peers.json"), "{\"peers\":[]}");
  EXPECT_EQ(read(dir_ / "volumes/all/blob"), std::string("\0\1", 2));
  EXPECT_EQ(read(dir_ / "volumes/some/sub/hi.txt"), "hello");
  EXPECT_FALSE(fs::exists(dir_ / "volumes/some/greeting"));
  struct stat info {};
  ASSERT_EQ(::stat((dir_ / "volumes/some/sub/hi.txt").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_EQ(read(dir_ / "volumes/secret/token"), "s3cret");
  EXPECT_EQ(read(dir_ / "volumes/info/labels"), "app=\"stage\"\ntessel.dev/job=\"gpt-a\"");
  EXPECT_EQ(read(dir_ / "volumes/info/name"), "gpt-a-s0-r0");
  EXPECT_TRUE(fs::is_directory(dir_ / "volumes/scratch"));
  EXPECT_TRUE(fs::is_directory(dir_ / "volumes/maybe"));
}

TEST_F(ScratchDir, ProjectedServiceAccountVolumeGetsTokenCaAndNamespace) {
  json pod = test_pod();
  // What the ServiceAccount admission plugin adds to a pod that does not opt out.
  pod["spec"]["volumes"] = json::parse(R"js([{"name": "kube-api-access-x2b4c", "projected": {
    "defaultMode": 420, "sources": [
      {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
      {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
      {"downwardAPI": {"items": [{"path": "namespace",
                                  "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}])js");
  FakeObjects fake = fake_objects();
  fake.objects["ConfigMap/team/kube-root-ca.crt"] = {{"metadata", {{"name", "kube-root-ca.crt"}}},
                                                     {"data", {{"ca.crt", "PEM"}}}};
  prepare_volumes(pod, (dir_ / "volumes").string(), (dir_ / "node").string(), fake.reader(),
                  fake.issuer(), kAddresses);
  const fs::path volume = dir_ / "volumes/kube-api-access-x2b4c";
  EXPECT_EQ(read(volume / "token"), "token-for-default--3607");
  EXPECT_EQ(read(volume / "ca.crt"), "PEM");
  EXPECT_EQ(read(volume / "namespace"), "team");

  pod["spec"]["serviceAccountName"] = "none";
  try {
    prepare_volumes(pod, (dir_ / "volumes").string(), (dir_ / "node").string(), fake.reader(),
                    fake.issuer(), kAddresses);
    FAIL() << "no error";
  } catch (const VolumeSetupError& error) {
    EXPECT_STREQ(error.what(),
                 "MountVolume.SetUp failed for volume \"kube-api-access-x2b4c\" : failed to fetch "
                 "token: serviceaccounts \"none\" not found");
  }
}

TEST_F(ScratchDir, HostPathIsADirectoryOfTheNodesRoot) {
  json pod = test_pod();
  pod["spec"]["volumes"] = {
      {{"name", "ckpt"}, {"hostPath", {{"path", "/var/ckpt"}, {"type", "DirectoryOrCreate"}}}},
      {{"name", "plain"}, {"hostPath", {{"path", "/srv/plain"}}}}};
  const FakeObjects fake = fake_objects();
  const fs::path node = dir_ / "node";
  prepare_volumes(pod, (dir_ / "volumes").string(), node.string(), fake.reader(), fake.issuer(),
                  kAddresses);
  EXPECT_EQ(fs::read_symlink(dir_ / "volumes/ckpt"), node / "var/ckpt");
  EXPECT_TRUE(fs::is_directory(node / "var/ckpt"));
  EXPECT_EQ(fs::read_symlink(dir_ / "volumes/plain"), node / "srv/plain");
  EXPECT_TRUE(fs::is_directory(node / "srv/plain"));

  const auto failure = [&](const json& host_path) -> std::string {
    json bad = test_pod();
    bad["spec"]["volumes"] = {{{"name", "v"}, {"hostPath", host_path}}};
    try {
      prepare_volumes(bad, (dir_ / "volumes").string(), node.string(), fake.reader(), fake.issuer(),
                      kAddresses);
    } catch (const VolumeSetupError& error) {
      return error.what();
    }
    return "no error";
  };
  EXPECT_EQ(failure({{"path", "/absent"}, {"type", "Directory"}}),
            "MountVolume.SetUp failed for volume \"v\" : hostPath type check failed: /absent is "
            "not a directory");
  EXPECT_EQ(failure({{"path", "/var/ckpt"}, {"type", "Directory"}}), "no error");
  EXPECT_EQ(failure({{"path", "relative/x"}}),
            "MountVolume.SetUp failed for volume \"v\" : hostPath path \"relative/x\" is not "
            "an absolute path without '..'");
  EXPECT_EQ(failure({{"path", "/var/../etc"}}),
            "MountVolume.SetUp failed for volume \"v\" : hostPath path \"/var/../etc\" is not "
            "an absolute path without '..'");
  EXPECT_EQ(failure({{"path", "/dev/sock"}, {"type", "Socket"}}),
            "MountVolume.SetUp failed for volume \"v\" : hostPath type \"Socket\" is not "
            "supported by the process kubelet (only Directory, DirectoryOrCreate and none)");
}

TEST_F(ScratchDir, MissingConfigMapIsAMountFailureNamingTheVolume) {
  json pod = test_pod();
  pod["spec"]["volumes"] = {{{"name", "peers"}, {"configMap", {{"name", "gpt-a-peers"}}}}};
  const FakeObjects fake = fake_objects();
  try {
    prepare_volumes(pod, (dir_ / "volumes").string(), (dir_ / "node").string(), fake.reader(),
                    fake.issuer(), kAddresses);
    FAIL() << "no error";
  } catch (const VolumeSetupError& error) {
    EXPECT_STREQ(
        error.what(),
        "MountVolume.SetUp failed for volume \"peers\" : configmap \"gpt-a-peers\" not found");
  }
  pod["spec"]["volumes"] = {{{"name", "claim"}, {"persistentVolumeClaim", {{"claimName", "x"}}}}};
  try {
    prepare_volumes(pod, (dir_ / "volumes").string(), (dir_ / "node").string(), fake.reader(),
                    fake.issuer(), kAddresses);
    FAIL() << "no error";
  } catch (const VolumeSetupError& error) {
    EXPECT_NE(std::string(error.what()).find("persistentVolumeClaim is not supported"),
              std::string::npos);
  }
}

TEST(ContainerEnvironmentTest, EnvFromThenEnvWithExpansionAndReferences) {
  const json pod = test_pod();
  const json container = json::parse(R"js({
    "name": "main",
    "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
    "env": [
      {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
      {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}},
      {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
      {"name": "ID", "value": "$(POD_NAME)/$(CFG_greeting)/$(LATER)"},
      {"name": "CFG_greeting", "value": "overridden"},
      {"name": "OPTIONAL", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "nope", "optional": true}}},
      {"name": "LATER", "value": "late"}
    ]})js");
  const FakeObjects fake = fake_objects();
  ContainerContext context;
  context.pod = &pod;
  context.addresses = kAddresses;
  context.reader = fake.reader();
  const auto environment = container_environment(container, context);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"CFG_blob", std::string("\0\1", 2)},
      {"CFG_greeting", "overridden"},
      {"CFG_peers.json", "{\"peers\":[]}"},
      {"POD_NAME", "gpt-a-s0-r0"},
      {"GREETING", "hello"},
      {"TOKEN", "s3cret"},
      {"ID", "gpt-a-s0-r0/hello/$(LATER)"},
      {"LATER", "late"}};
  EXPECT_EQ(environment, expected);
}

TEST(ContainerEnvironmentTest, MissingReferencesGiveTheKubeletsMessages) {
  const json pod = test_pod();
  const FakeObjects fake = fake_objects();
  ContainerContext context;
  context.pod = &pod;
  context.addresses = kAddresses;
  context.reader = fake.reader();
  const auto message_of = [&](const char* env) {
    try {
      container_environment({{"name", "main"}, {"env", json::parse(env)}}, context);
    } catch (const ContainerConfigError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(
      message_of(
          R"js([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "nope"}}}])js"),
      "couldn't find key nope in ConfigMap team/settings");
  EXPECT_EQ(
      message_of(
          R"js([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}}])js"),
      "configmap \"absent\" not found");
  EXPECT_EQ(
      message_of(
          R"js([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope"}}}])js"),
      "couldn't find key nope in Secret team/creds");
  EXPECT_EQ(message_of(
                R"js([{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}])js"),
            "unsupported fieldPath: status.phase");
}

TEST_F(ScratchDir, PrepareContainerBuildsTheCommandLineMountsAndEnvironment) {
  json pod = test_pod();
  pod["spec"]["volumes"] = {{{"name", "peers"}, {"configMap", {{"name", "settings"}}}}};
  const FakeObjects fake = fake_objects();
  prepare_volumes(pod, (dir_ / "volumes").string(), (dir_ / "node").string(), fake.reader(),
                  fake.issuer(), kAddresses);
  const json container = json::parse(R"js({
    "name": "stage", "image": "tessel/stage:0.1.0",
    "args": ["--peers=/etc/tessel/peers.json", "--name=$(POD_NAME)"],
    "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "CONFIG", "value": "/etc/tessel"}],
    "volumeMounts": [{"name": "peers", "mountPath": "/etc/tessel"}],
    "workingDir": "/work"
  })js");
  ContainerContext context;
  context.pod = &pod;
  context.pod_dir = dir_.string();
  context.addresses = kAddresses;
  context.reader = fake.reader();
  context.image_entrypoints = {{"tessel/stage", "/bin/true"}};
  context.base_environment = {{"PATH", "/usr/bin:/bin"}, {"HOSTNAME", "kubelet-host"}};
  context.gpu_devices = {"2", "3"};
  const ProcessSpec spec = prepare_container(container, context);
  const fs::path root = dir_ / "root/stage";
  EXPECT_EQ(spec.executable, "/bin/true");
  EXPECT_EQ(spec.arguments, (std::vector<std::string>{
                                "/bin/true", "--peers=" + root.string() + "/etc/tessel/peers.json",
                                "--name=gpt-a-s0-r0"}));
  EXPECT_EQ(read(root / "etc/tessel/peers.json"), "{\"peers\":[]}");
  EXPECT_EQ(spec.working_directory, (root / "work").string());
  EXPECT_TRUE(fs::is_directory(spec.working_directory));
  EXPECT_EQ(spec.log_path, (dir_ / "stage.log").string());
  const auto has = [&](const std::string& entry) {
    return std::find(spec.environment.begin(), spec.environment.end(), entry) !=
           spec.environment.end();
  };
  EXPECT_TRUE(has("PATH=/usr/bin:/bin"));
  EXPECT_TRUE(has("HOSTNAME=gpt-a-s0-r0"));
  EXPECT_TRUE(has("POD_NAME=gpt-a-s0-r0"));
  EXPECT_TRUE(has("CONFIG=" + root.string() + "/etc/tessel"));
  EXPECT_TRUE(has("TESSEL_MOUNT_ROOT=" + root.string()));
  EXPECT_TRUE(has("CUDA_VISIBLE_DEVICES=2,3"));
  EXPECT_TRUE(has("NVIDIA_VISIBLE_DEVICES=2,3"));
}

TEST_F(ScratchDir, CommandsThatCannotRunAreNamed) {
  const json pod = test_pod();
  ContainerContext context;
  context.pod = &pod;
  context.pod_dir = dir_.string();
  context.base_environment = {{"PATH", "/usr/bin:/bin"}};
  const auto message_of = [&](const json& container) {
    try {
      prepare_container(container, context);
    } catch (const ProcessStartError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message_of({{"name", "a"}, {"command", {"no-such-tool-xyz"}}}),
            "exec: \"no-such-tool-xyz\": executable file not found in $PATH");
  EXPECT_EQ(message_of({{"name", "a"}, {"image", "busybox:1.36"}}),
            "exec: no command specified: image \"busybox:1.36\" has no entrypoint known to the "
            "process kubelet");
  EXPECT_EQ(message_of({{"name", "a"}, {"command", {"sh"}}}), "no error");
}

TEST_F(ScratchDir, NestedMountPathsAreRefused) {
  json pod = test_pod();
  pod["spec"]["volumes"] = {{{"name", "a"}, {"emptyDir", json::object()}},
                            {{"name", "b"}, {"emptyDir", json::object()}}};
  const FakeObjects fake = fake_objects();
  prepare_volumes(pod, (dir_ / "volumes").string(), (dir_ / "node").string(), fake.reader(),
                  fake.issuer(), kAddresses);
  ContainerContext context;
  context.pod = &pod;
  context.pod_dir = dir_.string();
  const json container = {
      {"name", "c"},
      {"command", {"/bin/true"}},
      {"volumeMounts",
       {{{"name", "a"}, {"mountPath", "/data"}}, {{"name", "b"}, {"mountPath", "/data/inner"}}}}};
  EXPECT_THROW(prepare_container(container, context), ContainerConfigError);
}

}  // namespace
}  // namespace tessel::testing
