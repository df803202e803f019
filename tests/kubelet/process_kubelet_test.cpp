// The process kubelet against the API test server: node registration, pods run as processes
// with the status a kubelet writes, restarts, the environment and volumes, graceful deletion,
// node failure and a clean stop. Skipped on the real cluster TESSEL_TEST_KUBECONFIG names: there
// its Nodes would draw the cluster's DaemonSet pods, whose commands it would run on this machine.
#include "tests/support/process_kubelet.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kube/api_error.h"
#include "kube/base64.h"
#include "kube/log.h"
#include "kube/object.h"
#include "tests/kubelet/pod_watcher.h"
#include "tests/kubelet/process_waits.h"
#include "tests/support/test_cluster.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json container_status(const json& pod, std::size_t index = 0) {
  const json statuses =
      pod.value("status", json::object()).value("containerStatuses", json::array());
  return index < statuses.size() ? statuses[index] : json::object();
}

json condition(const json& object, const std::string& type) {
  const json status = object.value("status", json::object());
  for (const json& entry : status.value("conditions", json::array())) {
    if (entry.value("type", "") == type) return entry;
  }
  return nullptr;
}

class ProcessKubeletTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSEL_REQUIRE_TEST_SERVER(cluster_, "the process kubelet");
    client_ = cluster_.client();
    ns_ = cluster_.namespace_name();
    node_ = ns_ + "-node";  // nodes are cluster-scoped: unique on a shared cluster too
    std::string pattern =
        (fs::temp_directory_path() / "tessel-process-kubelet-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    work_dir_ = pattern;
    fifo_ = (work_dir_ / "fifo").string();
    ASSERT_EQ(::mkfifo(fifo_.c_str(), 0600), 0);
    watcher_ = std::make_unique<PodWatcher>(*client_, ns_);
  }

  void TearDown() override {
    kubelet_.reset();  // kills whatever still runs
    watcher_.reset();
    for (const std::string& node : nodes_) {
      try {
        client_->remove(client_->resource_for("v1", "Node"), "", node);
      } catch (const kube::ApiError&) {
      }
    }
    if (!work_dir_.empty()) fs::remove_all(work_dir_);
  }

  ProcessKubeletOptions options(int gpus = 0) {
    ProcessKubeletOptions options;
    ProcessNodeOptions node;
    node.name = node_;
    node.gpus = gpus;
    options.nodes.push_back(node);
    options.work_dir = (work_dir_ / "kubelet").string();
    options.restart_backoff_initial = std::chrono::milliseconds(300);
    options.restart_backoff_cap = std::chrono::milliseconds(600);
    options.retry_interval = std::chrono::milliseconds(100);
    options.lease_renew_interval = std::chrono::milliseconds(200);
    options.logger =
        std::make_shared<const kube::Logger>("process-kubelet", kube::LogLevel::kWarning);
    return options;
  }

  ProcessKubelet& start(ProcessKubeletOptions kubelet_options) {
    for (const ProcessNodeOptions& node : kubelet_options.nodes) nodes_.push_back(node.name);
    kubelet_ = std::make_unique<ProcessKubelet>(client_, std::move(kubelet_options));
    kubelet_->start();
    return *kubelet_;
  }

  // A pod bound to the node whose one container "main" runs `script` with sh; $FIFO names the
  // test's named pipe. The kubelet expands $(VAR) in commands, so the shell's $$ is $$$$.
  json shell_pod(const std::string& name, const std::string& script,
                 const std::string& restart_policy = "Never") const {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", ns_}}},
            {"spec",
             {{"nodeName", node_},
              {"restartPolicy", restart_policy},
              {"automountServiceAccountToken", false},
              {"containers",
               {{{"name", "main"},
                 {"image", "busybox:1.36"},
                 {"command", {"/bin/sh", "-c", script}},
                 {"env", {{{"name", "FIFO"}, {"value", fifo_}}}}}}}}}};
  }

  json create(const json& object) const { return client_->create(object); }

  void delete_pod(const std::string& name, std::optional<std::int64_t> grace = std::nullopt) {
    kube::DeleteOptions options;
    options.grace_period_seconds = grace;
    client_->remove(client_->resource_for("v1", "Pod"), ns_, name, options);
  }

  std::string pod_file(const std::string& pod, const std::string& file) const {
    return read_file(fs::path(kubelet_->pod_directory(ns_, pod)) / file);
  }

  TestCluster cluster_;
  std::shared_ptr<kube::Client> client_;
  std::string ns_;
  std::string node_;
  fs::path work_dir_;
  std::string fifo_;
  std::vector<std::string> nodes_;
  std::unique_ptr<PodWatcher> watcher_;
  std::unique_ptr<ProcessKubelet> kubelet_;
};

TEST_F(ProcessKubeletTest, RegistersNodesWithCapacityLabelsConditionsAndLease) {
  ProcessKubeletOptions kubelet_options = options(4);
  kubelet_options.nodes[0].labels = {{"nvidia.com/gpu.product", "NVIDIA-H200"}};
  kubelet_options.nodes[0].annotations = {{"net.tessel.dev/probe", "pending"}};
  kubelet_options.nodes[0].cpu = "64";
  kubelet_options.nodes[0].memory = "512Gi";
  ProcessNodeOptions cpu_only;
  cpu_only.name = node_ + "-cpu";
  kubelet_options.nodes.push_back(cpu_only);
  start(std::move(kubelet_options));

  const kube::ResourceInfo nodes = client_->resource_for("v1", "Node");
  json node = client_->get(nodes, "", node_);
  EXPECT_EQ(kube::get_label(node, "kubernetes.io/hostname"), node_);
  EXPECT_EQ(kube::get_label(node, "kubernetes.io/os"), "linux");
  EXPECT_EQ(kube::get_label(node, "nvidia.com/gpu.product"), "NVIDIA-H200");
  EXPECT_EQ(kube::get_annotation(node, "net.tessel.dev/probe"), "pending");
  const json& status = node["status"];
  EXPECT_EQ(status["capacity"],
            json({{"cpu", "64"}, {"memory", "512Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "4"}}));
  EXPECT_EQ(status["allocatable"], status["capacity"]);
  json ready = condition(node, "Ready");
  EXPECT_EQ(ready["status"], "True");
  EXPECT_EQ(ready["reason"], "KubeletReady");
  EXPECT_EQ(condition(node, "MemoryPressure")["status"], "False");
  EXPECT_EQ(status["addresses"][0], json({{"type", "InternalIP"}, {"address", "127.0.0.1"}}));
  EXPECT_EQ(status["addresses"][1], json({{"type", "Hostname"}, {"address", node_}}));
  EXPECT_EQ(status["nodeInfo"]["operatingSystem"], "linux");

  json other = client_->get(nodes, "", node_ + "-cpu");
  EXPECT_FALSE(other["status"]["capacity"].contains("nvidia.com/gpu"));
  EXPECT_FALSE(other["status"]["capacity"]["cpu"].get<std::string>().empty());

  json lease = client_->get(client_->resource_for("coordination.k8s.io/v1", "Lease"),
                            "kube-node-lease", node_);
  EXPECT_EQ(lease["spec"]["holderIdentity"], node_);
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 40);
  EXPECT_EQ(lease["metadata"]["ownerReferences"][0]["uid"], node["metadata"]["uid"]);
  EXPECT_EQ(lease["spec"]["renewTime"].get<std::string>().size(),
            std::string("2026-11-21T23:02:08.819817Z").size());

  // The heartbeat: the lease is renewed every lease_renew_interval (200 ms here).
  kube::ListOptions watch_options;
  watch_options.field_selector = "metadata.name=" + node_;
  watch_options.resource_version = kube::object_resource_version(lease);
  watch_options.timeout_seconds = 10;
  std::string renewed;
  client_->watch(client_->resource_for("coordination.k8s.io/v1", "Lease"), "kube-node-lease",
                 watch_options, [&](const kube::WatchEvent& event) {
                   if (event.type != kube::WatchEvent::Modified) return true;
                   renewed = event.object["spec"].value("renewTime", "");
                   return false;
                 });
  EXPECT_GT(renewed, lease["spec"]["renewTime"].get<std::string>());
}

TEST_F(ProcessKubeletTest, ShellCommandSucceedsWithTheStatusAKubeletWrites) {
  start(options());
  json created = create(shell_pod("hello", "echo hello from $HOSTNAME"));
  json pod = watcher_->wait_for_phase("hello", "Succeeded");
  const json& status = pod["status"];
  EXPECT_EQ(status["hostIP"], "127.0.0.1");
  EXPECT_EQ(status["podIP"], "127.0.0.1");
  EXPECT_EQ(status["podIPs"], json::parse(R"([{"ip": "127.0.0.1"}])"));
  EXPECT_TRUE(status["startTime"].is_string());
  EXPECT_EQ(status["qosClass"], "BestEffort");  // the server's, left alone
  json main = container_status(pod);
  EXPECT_EQ(main["name"], "main");
  EXPECT_EQ(main["image"], "busybox:1.36");
  EXPECT_EQ(main["imageID"].get<std::string>().rfind("docker.io/library/busybox@sha256:", 0), 0u);
  EXPECT_EQ(main["containerID"].get<std::string>().rfind("containerd://", 0), 0u);
  EXPECT_EQ(main["ready"], false);
  EXPECT_EQ(main["started"], false);
  EXPECT_EQ(main["restartCount"], 0);
  const json& terminated = main["state"]["terminated"];
  EXPECT_EQ(terminated["exitCode"], 0);
  EXPECT_EQ(terminated["reason"], "Completed");
  EXPECT_TRUE(terminated["startedAt"].is_string());
  EXPECT_TRUE(terminated["finishedAt"].is_string());
  EXPECT_EQ(terminated["containerID"], main["containerID"]);
  EXPECT_EQ(condition(pod, "Initialized")["reason"], "PodCompleted");
  EXPECT_EQ(condition(pod, "Ready")["status"], "False");
  EXPECT_EQ(condition(pod, "Ready")["reason"], "PodCompleted");
  EXPECT_EQ(condition(pod, "ContainersReady")["reason"], "PodCompleted");
  EXPECT_EQ(condition(pod, "PodScheduled")["status"], "True");
  EXPECT_EQ(pod_file("hello", "main.log"), "hello from hello\n");

  // Pending (containers creating), Running (ready), then Succeeded, as a kubelet reports.
  std::vector<std::string> phases;
  bool seen_ready = false;
  for (const json& state : watcher_->history("hello")) {
    const std::string phase = state.value("status", json::object()).value("phase", "");
    if (phases.empty() || phases.back() != phase) phases.push_back(phase);
    seen_ready = seen_ready || kube::is_condition_true(state, "Ready");
  }
  EXPECT_EQ(phases, (std::vector<std::string>{"Pending", "Running", "Succeeded"}));
  EXPECT_TRUE(seen_ready);
  EXPECT_EQ(kube::object_uid(pod), kube::object_uid(created));
}

TEST_F(ProcessKubeletTest, FailingCommandEndsFailedWithItsExitCode) {
  start(options());
  create(shell_pod("fails", "echo broken >&2; exit 3"));
  json pod = watcher_->wait_for_phase("fails", "Failed");
  json terminated = container_status(pod)["state"]["terminated"];
  EXPECT_EQ(terminated["exitCode"], 3);
  EXPECT_EQ(terminated["reason"], "Error");
  EXPECT_EQ(condition(pod, "Ready")["reason"], "ContainersNotReady");
  EXPECT_EQ(condition(pod, "Ready")["message"], "containers with unready status: [main]");
  EXPECT_EQ(pod_file("fails", "main.log"), "broken\n");
}

TEST_F(ProcessKubeletTest, MissingExecutableIsAStartError) {
  start(options());
  json pod = shell_pod("missing", "");
  pod["spec"]["containers"][0]["command"] = {"no-such-tool-xyz", "--flag"};
  create(pod);
  json failed = watcher_->wait_for_phase("missing", "Failed");
  json terminated = container_status(failed)["state"]["terminated"];
  EXPECT_EQ(terminated["reason"], "StartError");
  EXPECT_EQ(terminated["exitCode"], 128);
  EXPECT_EQ(terminated["message"],
            "exec: \"no-such-tool-xyz\": executable file not found in $PATH");
}

TEST_F(ProcessKubeletTest, OnFailureRestartsUntilTheContainerSucceeds) {
  start(options());
  // Fails twice (exit 7), then succeeds; the count lives in the pod's working directory.
  create(shell_pod("retry",
                   "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; "
                   "[ $n -ge 3 ] || exit 7",
                   "OnFailure"));
  json pod = watcher_->wait_for_phase("retry", "Succeeded");
  json main = container_status(pod);
  EXPECT_EQ(main["restartCount"], 2);
  EXPECT_EQ(main["state"]["terminated"]["exitCode"], 0);
  EXPECT_EQ(main["lastState"]["terminated"]["exitCode"], 7);
  EXPECT_EQ(main["lastState"]["terminated"]["reason"], "Error");
  EXPECT_EQ(pod_file("retry", "count"), "3\n");
}

// What a container writes to its terminationMessagePath (the API server's default,
// /dev/termination-log) is its terminated state's message, each run from a file of its own, cut
// to the kubelet's 4096 bytes.
TEST_F(ProcessKubeletTest, TheTerminationMessageFileBecomesTheTerminatedMessage) {
  start(options());
  create(shell_pod("said",
                   "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; "
                   "if [ $n -eq 1 ]; then printf 'run 1 failed' > /dev/termination-log; exit 7; "
                   "fi; cat /dev/termination-log; printf 'run %s done' $n >> /dev/termination-log",
                   "OnFailure"));
  json pod = watcher_->wait_for_phase("said", "Succeeded");
  json main = container_status(pod);
  EXPECT_EQ(main["lastState"]["terminated"]["message"], "run 1 failed");
  EXPECT_EQ(main["state"]["terminated"]["message"], "run 2 done");
  EXPECT_EQ(pod_file("said", "main.log"), "") << "the second run's file starts empty";

  create(shell_pod("long", "head -c 5000 /dev/zero | tr '\\0' x > /dev/termination-log"));
  json long_pod = watcher_->wait_for_phase("long", "Succeeded");
  EXPECT_EQ(container_status(long_pod)["state"]["terminated"]["message"], std::string(4096, 'x'));

  create(shell_pod("quiet", "true"));
  json quiet = watcher_->wait_for_phase("quiet", "Succeeded");
  EXPECT_FALSE(container_status(quiet)["state"]["terminated"].contains("message"));
}

TEST_F(ProcessKubeletTest, AlwaysRestartsThroughCrashLoopBackOff) {
  start(options());
  json created = create(shell_pod("loop", "exit 2", "Always"));
  json pod = watcher_->wait_for("loop", [](const json* pod) {
    return pod && container_status(*pod).value("restartCount", 0) >= 2;
  });
  EXPECT_EQ(pod["status"]["phase"], "Running");
  json back_off;
  json backing_off_pod;
  for (const json& state : watcher_->history("loop")) {
    const json waiting =
        container_status(state).value("state", json::object()).value("waiting", json::object());
    if (waiting.value("reason", "") == "CrashLoopBackOff") {
      back_off = container_status(state);  // the first back-off: after the second exit
      backing_off_pod = state;
      break;
    }
  }
  ASSERT_FALSE(back_off.is_null()) << "no CrashLoopBackOff seen";
  EXPECT_EQ(back_off["state"]["waiting"]["message"],
            "back-off 300ms restarting failed container=main pod=loop_" + ns_ + "(" +
                kube::object_uid(created) + ")");
  EXPECT_EQ(back_off["lastState"]["terminated"]["exitCode"], 2);
  EXPECT_EQ(backing_off_pod["status"]["phase"], "Running");
  EXPECT_EQ(condition(backing_off_pod, "Ready")["status"], "False");
}

TEST_F(ProcessKubeletTest, EnvironmentDownwardApiSecretAndConfigMapReachTheProcess) {
  start(options());
  create({{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", "settings"}, {"namespace", ns_}}},
          {"data", {{"greeting", "hello"}, {"peers.json", "{\"peers\": 2}"}}}});
  create({{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", "creds"}, {"namespace", ns_}}},
          {"data", {{"token", kube::base64_encode("s3cret")}}}});
  json pod = shell_pod("env",
                       "echo \"$POD/$NS/$UID_/$NODE/$IP/$HOST/$JOB/$NOTE/$GREETING/$TOKEN/"
                       "$CFG_greeting/$DERIVED\" > env.txt; cat \"$1\" > peers.txt; "
                       "cat \"$TESSEL_MOUNT_ROOT/etc/podinfo/labels\" > labels.txt");
  pod["metadata"]["labels"] = {{"tessel.dev/job", "gpt-a"}};
  pod["metadata"]["annotations"] = {{"note", "n1"}};
  json& container = pod["spec"]["containers"][0];
  container["command"].push_back("sh");
  container["command"].push_back("/etc/tessel/peers.json");
  const auto field = [](const char* name, const char* path) {
    return json{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
  };
  container["env"] = {
      field("POD", "metadata.name"),
      field("NS", "metadata.namespace"),
      field("UID_", "metadata.uid"),
      field("NODE", "spec.nodeName"),
      field("IP", "status.podIP"),
      field("HOST", "status.hostIP"),
      field("JOB", "metadata.labels['tessel.dev/job']"),
      field("NOTE", "metadata.annotations['note']"),
      {{"name", "GREETING"},
       {"valueFrom", {{"configMapKeyRef", {{"name", "settings"}, {"key", "greeting"}}}}}},
      {{"name", "TOKEN"}, {"valueFrom", {{"secretKeyRef", {{"name", "creds"}, {"key", "token"}}}}}},
      {{"name", "DERIVED"}, {"value", "$(POD)-$(GREETING)"}}};
  container["envFrom"] = {{{"configMapRef", {{"name", "settings"}}}, {"prefix", "CFG_"}}};
  container["volumeMounts"] = {{{"name", "config"}, {"mountPath", "/etc/tessel"}},
                               {{"name", "podinfo"}, {"mountPath", "/etc/podinfo"}}};
  pod["spec"]["volumes"] = {
      {{"name", "config"}, {"configMap", {{"name", "settings"}}}},
      {{"name", "podinfo"},
       {"downwardAPI",
        {{"items", {{{"path", "labels"}, {"fieldRef", {{"fieldPath", "metadata.labels"}}}}}}}}}};
  json created = create(pod);
  json done = watcher_->wait_for_phase("env", "Succeeded");
  EXPECT_EQ(pod_file("env", "env.txt"),
            "env/" + ns_ + "/" + kube::object_uid(created) + "/" + node_ +
                "/127.0.0.1/127.0.0.1/gpt-a/n1/hello/s3cret/hello/env-hello\n");
  EXPECT_EQ(pod_file("env", "peers.txt"), "{\"peers\": 2}");
  EXPECT_EQ(pod_file("env", "labels.txt"), "tessel.dev/job=\"gpt-a\"");
  EXPECT_EQ(container_status(done)["state"]["terminated"]["exitCode"], 0);
}

TEST_F(ProcessKubeletTest, HostPathVolumesAreEachNodesOwnDisk) {
  // Two nodes, one hostPath: each pod writes into its own node's directory, as on a real
  // cluster where a pod moved to another node does not find what it left on the first.
  ProcessKubeletOptions kubelet_options = options();
  ProcessNodeOptions second;
  second.name = node_ + "-b";
  kubelet_options.nodes.push_back(second);
  start(std::move(kubelet_options));
  for (const std::string& node : {node_, node_ + "-b"}) {
    const std::string name = node == node_ ? "writer-a" : "writer-b";
    json pod = shell_pod(name, "echo " + name + " >> /var/lib/tessel-data/who");
    pod["spec"]["nodeName"] = node;
    pod["spec"]["containers"][0]["volumeMounts"] = {
        {{"name", "data"}, {"mountPath", "/var/lib/tessel-data"}}};
    pod["spec"]["volumes"] = {
        {{"name", "data"},
         {"hostPath", {{"path", "/var/lib/tessel-data"}, {"type", "DirectoryOrCreate"}}}}};
    create(pod);
    watcher_->wait_for_phase(name, "Succeeded");
  }
  const fs::path root_a = kubelet_->node_root(node_);
  const fs::path root_b = kubelet_->node_root(node_ + "-b");
  EXPECT_NE(root_a, root_b);
  EXPECT_EQ(read_file(root_a / "var/lib/tessel-data/who"), "writer-a\n");
  EXPECT_EQ(read_file(root_b / "var/lib/tessel-data/who"), "writer-b\n");
  EXPECT_FALSE(fs::exists("/var/lib/tessel-data/who"));  // never the machine's own path
}

// A network namespace made for one test (`ip netns add`), with `address` on its loopback
// device, deleted again at the end; skips the test where namespaces cannot be made.
class ScratchNetworkNamespace {
 public:
  explicit ScratchNetworkNamespace(const std::string& address) {
    static int made = 0;
    name_ = "tkubelet" + std::to_string(::getpid()) + "-" + std::to_string(made++);
    available_ = std::system(("ip netns add " + name_ + " 2>/dev/null").c_str()) == 0;
    if (!available_) return;
    const std::string in = "ip -n " + name_ + " ";
    available_ = std::system((in + "link set lo up").c_str()) == 0 &&
                 std::system((in + "addr add " + address + "/32 dev lo").c_str()) == 0;
  }
  ~ScratchNetworkNamespace() {
    (void)!std::system(("ip netns del " + name_ + " 2>/dev/null").c_str());
  }
  ScratchNetworkNamespace(const ScratchNetworkNamespace&) = delete;
  ScratchNetworkNamespace& operator=(const ScratchNetworkNamespace&) = delete;

  bool available() const { return available_; }
  const std::string& name() const { return name_; }
  // "net:[<inode>]": what /proc/<pid>/ns/net reads for a process inside it.
  std::string link_text() const {
    struct stat info {};
    ::stat(("/var/run/netns/" + name_).c_str(), &info);
    return "net:[" + std::to_string(info.st_ino) + "]";
  }

 private:
  std::string name_;
  bool available_ = false;
};

TEST_F(ProcessKubeletTest, ANodeInANetworkNamespaceRunsItsPodsThereWithItsAddress) {
  const std::string address = "10.251.0.7";
  ScratchNetworkNamespace netns(address);
  if (!netns.available())
    GTEST_SKIP() << "cannot make a network namespace here (root and iproute2's ip are needed)";
  // node_ lives in the namespace; node_-host shares the host's network, as before.
  ProcessKubeletOptions kubelet_options = options();
  kubelet_options.nodes[0].network_namespace = netns.name();
  try {
    ProcessKubelet without_address(client_, kubelet_options);
    ADD_FAILURE() << "a node in a namespace without its address was taken";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()), "process kubelet: node " + node_ + ": network_namespace " +
                                             netns.name() +
                                             " needs the node's address in it (address)");
  }
  kubelet_options.nodes[0].address = address;
  ProcessNodeOptions host_node;
  host_node.name = node_ + "-host";
  kubelet_options.nodes.push_back(host_node);
  start(std::move(kubelet_options));

  // Each pod reports its network namespace, its downward-API IP, and whether it can listen on
  // the node's address (only inside the namespace does that address exist).
  const std::string script =
      "readlink /proc/self/ns/net > netns.txt; echo \"$POD_IP $HOST_IP\" > ip.txt; "
      "if python3 -c 'import socket,sys; socket.socket().bind((sys.argv[1], 0))' " +
      address + " 2>/dev/null; then echo bound > bind.txt; else echo refused > bind.txt; fi";
  for (const std::string& node : {node_, node_ + "-host"}) {
    const std::string name = node == node_ ? "inside" : "outside";
    json pod = shell_pod(name, script);
    pod["spec"]["nodeName"] = node;
    pod["spec"]["containers"][0]["env"] = {
        {{"name", "POD_IP"},
         {"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", "status.podIP"}}}}}},
        {{"name", "HOST_IP"},
         {"valueFrom", {{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", "status.hostIP"}}}}}}};
    create(pod);
  }
  const json inside = watcher_->wait_for_phase("inside", "Succeeded");
  const json outside = watcher_->wait_for_phase("outside", "Succeeded");

  EXPECT_EQ(pod_file("inside", "netns.txt"), netns.link_text() + "\n");
  EXPECT_EQ(pod_file("inside", "ip.txt"), address + " " + address + "\n");
  EXPECT_EQ(pod_file("inside", "bind.txt"), "bound\n");
  EXPECT_EQ(inside["status"]["podIP"], address);
  EXPECT_EQ(inside["status"]["hostIP"], address);
  EXPECT_EQ(inside["status"]["podIPs"], json::array({{{"ip", address}}}));

  char host_netns[64] = {};
  ASSERT_GT(::readlink("/proc/self/ns/net", host_netns, sizeof host_netns - 1), 0);
  EXPECT_EQ(pod_file("outside", "netns.txt"), std::string(host_netns) + "\n");
  EXPECT_EQ(pod_file("outside", "ip.txt"), "127.0.0.1 127.0.0.1\n");
  EXPECT_EQ(pod_file("outside", "bind.txt"), "refused\n");
  EXPECT_EQ(outside["status"]["podIP"], "127.0.0.1");

  // The Nodes' InternalIPs.
  const auto internal_ip = [&](const std::string& node) {
    const json object = client_->get(client_->resource_for("v1", "Node"), "", node);
    for (const json& entry : object["status"]["addresses"])
      if (entry.value("type", "") == "InternalIP") return entry.value("address", "");
    return std::string();
  };
  EXPECT_EQ(internal_ip(node_), address);
  EXPECT_EQ(internal_ip(node_ + "-host"), "127.0.0.1");
}

TEST_F(ProcessKubeletTest, MissingConfigMapHoldsTheContainerUntilItAppears) {
  start(options());
  json pod = shell_pod("waits", "echo \"$VALUE\" > value.txt");
  pod["spec"]["containers"][0]["env"].push_back(
      {{"name", "VALUE"}, {"valueFrom", {{"configMapKeyRef", {{"name", "late"}, {"key", "k"}}}}}});
  create(pod);
  json waiting = watcher_->wait_for("waits", [](const json* pod) {
    const json waiting =
        pod ? container_status(*pod).value("state", json::object()).value("waiting", json::object())
            : json::object();
    return waiting.value("reason", "") == "CreateContainerConfigError";
  });
  EXPECT_EQ(container_status(waiting)["state"]["waiting"]["message"],
            "configmap \"late\" not found");
  EXPECT_EQ(waiting["status"]["phase"], "Pending");
  create({{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", "late"}, {"namespace", ns_}}},
          {"data", {{"k", "arrived"}}}});
  watcher_->wait_for_phase("waits", "Succeeded");
  EXPECT_EQ(pod_file("waits", "value.txt"), "arrived\n");
}

TEST_F(ProcessKubeletTest, InitContainersRunFirstAndInOrder) {
  start(options());
  json pod = shell_pod("init", "cat order.txt > seen.txt");
  json first = pod["spec"]["containers"][0];
  first["name"] = "first";
  first["command"] = {"/bin/sh", "-c", "echo first >> order.txt"};
  json second = first;
  second["name"] = "second";
  second["command"] = {"/bin/sh", "-c", "echo second >> order.txt"};
  pod["spec"]["initContainers"] = {first, second};
  create(pod);
  json done = watcher_->wait_for_phase("init", "Succeeded");
  EXPECT_EQ(pod_file("init", "seen.txt"), "first\nsecond\n");
  ASSERT_EQ(done["status"]["initContainerStatuses"].size(), 2u);
  EXPECT_EQ(done["status"]["initContainerStatuses"][1]["state"]["terminated"]["reason"],
            "Completed");
  EXPECT_EQ(done["status"]["initContainerStatuses"][1]["ready"], true);
  bool seen_initializing = false;
  for (const json& state : watcher_->history("init")) {
    const json initialized = condition(state, "Initialized");
    seen_initializing = seen_initializing || (initialized.is_object() &&
                                              initialized["reason"] == "ContainersNotInitialized");
  }
  EXPECT_TRUE(seen_initializing);
}

TEST_F(ProcessKubeletTest, DeletingARunningPodSendsSigtermAndRemovesIt) {
  start(options());
  create(shell_pod("graceful",
                   "trap 'echo got-term > term.txt; exit 0' TERM; sleep 1000 & "
                   "echo ready > \"$FIFO\"; wait"));
  ASSERT_EQ(read_fifo(fifo_), "ready\n");
  delete_pod("graceful");  // terminationGracePeriodSeconds 30, from the server's defaults
  watcher_->wait_until_gone("graceful");
  // Ended by its own TERM trap (exit code 0 below), not killed when the grace period ran out.
  EXPECT_EQ(pod_file("graceful", "term.txt"), "got-term\n");
  json last = watcher_->history("graceful").back();
  EXPECT_EQ(last["metadata"]["deletionGracePeriodSeconds"], 0);  // the kubelet's final delete
  EXPECT_EQ(container_status(last)["state"]["terminated"]["exitCode"], 0);
}

TEST_F(ProcessKubeletTest, ProcessIgnoringSigtermIsKilledAfterTheGracePeriod) {
  start(options());
  json pod = shell_pod("stubborn", "trap '' TERM; echo $$$$ > \"$FIFO\"; exec sleep 1000");
  pod["spec"]["terminationGracePeriodSeconds"] = 1;
  create(pod);
  const pid_t pid = std::stoi(read_fifo(fifo_));
  const auto deleted_at = std::chrono::steady_clock::now();
  delete_pod("stubborn");
  watcher_->wait_until_gone("stubborn");
  EXPECT_GE(std::chrono::steady_clock::now() - deleted_at, std::chrono::seconds(1));
  EXPECT_TRUE(is_dead(pid));
  json last = watcher_->history("stubborn").back();
  EXPECT_EQ(container_status(last)["state"]["terminated"]["exitCode"], 137);  // SIGKILL
  EXPECT_EQ(last["status"]["phase"], "Failed");
}

TEST_F(ProcessKubeletTest, DeletionWithoutGracePeriodKillsAtOnce) {
  start(options());
  create(shell_pod("forced", "trap '' TERM; echo $$$$ > \"$FIFO\"; exec sleep 1000"));
  const pid_t pid = std::stoi(read_fifo(fifo_));
  delete_pod("forced", 0);
  watcher_->wait_until_gone("forced");
  EXPECT_TRUE(wait_until_dead(pid, std::chrono::seconds(5)));
}

TEST_F(ProcessKubeletTest, FailNodeKillsItsProcessesAndMarksTheNode) {
  start(options());
  create(shell_pod("victim", "echo $$$$ > \"$FIFO\"; exec sleep 1000"));
  const pid_t pid = std::stoi(read_fifo(fifo_));
  watcher_->wait_for("victim",
                     [](const json* pod) { return pod && kube::is_condition_true(*pod, "Ready"); });
  kubelet_->fail_node(node_);
  EXPECT_TRUE(is_dead(pid));  // killed and reaped before fail_node returned

  json node = client_->get(client_->resource_for("v1", "Node"), "", node_);
  json ready = condition(node, "Ready");
  EXPECT_EQ(ready["status"], "Unknown");
  EXPECT_EQ(ready["reason"], "NodeStatusUnknown");
  EXPECT_EQ(ready["message"], "Kubelet stopped posting node status.");
  bool no_execute = false;
  for (const json& taint : node["spec"]["taints"]) {
    no_execute = no_execute || (taint["key"] == "node.kubernetes.io/unreachable" &&
                                taint["effect"] == "NoExecute");
  }
  EXPECT_TRUE(no_execute);
  // The pod stays, no longer ready, and a graceful deletion of it now hangs as on a real
  // cluster: nobody finishes it.
  json pod = watcher_->wait_for(
      "victim", [](const json* pod) { return pod && !kube::is_condition_true(*pod, "Ready"); });
  EXPECT_EQ(pod["status"]["phase"], "Running");
  EXPECT_THROW(kubelet_->fail_node("no-such-node"), std::invalid_argument);
}

TEST_F(ProcessKubeletTest, StopLeavesNoProcessBehind) {
  start(options());
  create(shell_pod("tree", "sleep 1000 & echo $$$$ $! > \"$FIFO\"; wait", "Always"));
  std::istringstream pids(read_fifo(fifo_));
  pid_t shell = 0;
  pid_t child = 0;
  pids >> shell >> child;
  ASSERT_GT(child, 0);
  kubelet_->stop();
  EXPECT_TRUE(is_dead(shell));
  EXPECT_TRUE(wait_until_dead(child, std::chrono::seconds(5)));
  kubelet_->stop();  // idempotent
  EXPECT_THROW(kubelet_->start(), std::logic_error);
}

TEST_F(ProcessKubeletTest, GpusAreHandedOutAndOversubscriptionRejected) {
  start(options(2));
  json pod = shell_pod("trainer",
                       "echo \"$CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES\" > \"$FIFO\"; "
                       "exec sleep 1000");
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "2"}}}};
  create(pod);
  EXPECT_EQ(read_fifo(fifo_), "0,1 0,1\n");

  json extra = shell_pod("extra", "true");
  extra["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  create(extra);
  json rejected = watcher_->wait_for_phase("extra", "Failed");
  EXPECT_EQ(rejected["status"]["reason"], "OutOfnvidia.com/gpu");
  EXPECT_EQ(rejected["status"]["message"],
            "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, "
            "used: 2, capacity: 2");

  delete_pod("trainer", 0);
  watcher_->wait_until_gone("trainer");
  json after = shell_pod("after", "echo \"$CUDA_VISIBLE_DEVICES\"");
  after["spec"]["containers"][0]["resources"] = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  create(after);
  watcher_->wait_for_phase("after", "Succeeded");
  EXPECT_EQ(pod_file("after", "main.log"), "0\n");
}

ProcessNodeOptions node_named(const std::string& name, int gpus = 0,
                              std::vector<std::string> devices = {}) {
  ProcessNodeOptions node;
  node.name = name;
  node.gpus = gpus;
  node.gpu_devices = std::move(devices);
  return node;
}

TEST(ProcessKubeletOptionsTest, BadOptionsAreNamed) {
  const auto message_of = [](ProcessKubeletOptions options) {
    try {
      ProcessKubelet kubelet(nullptr, std::move(options));
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message_of({}), "process kubelet: no node to run");
  ProcessKubeletOptions twice;
  twice.nodes = {node_named("a"), node_named("a")};
  EXPECT_EQ(message_of(twice), "process kubelet: node a is given twice");
  ProcessKubeletOptions no_netns;
  no_netns.nodes = {node_named("a")};
  no_netns.nodes[0].network_namespace = "tessel-no-such-netns";
  no_netns.nodes[0].address = "10.251.0.9";
  EXPECT_EQ(message_of(no_netns),
            "process kubelet: node a: network_namespace \"tessel-no-such-netns\" is not a network "
            "namespace (no /var/run/netns/tessel-no-such-netns)");
  ProcessKubeletOptions dot_name;
  dot_name.nodes = {node_named("a")};
  dot_name.nodes[0].network_namespace = ".";
  EXPECT_EQ(message_of(dot_name),
            "process kubelet: node a: network_namespace \".\" is not a network namespace (no "
            "/var/run/netns/.)");
  ProcessKubeletOptions bad_address;
  bad_address.nodes = {node_named("a")};
  bad_address.nodes[0].address = "10.251.0";
  EXPECT_EQ(message_of(bad_address),
            "process kubelet: node a: address \"10.251.0\" is not an IPv4 address");
  ProcessKubeletOptions devices;
  devices.nodes = {node_named("a", 2, {"0"})};
  EXPECT_EQ(message_of(devices), "process kubelet: node a: 1 gpu_devices for gpus 2");
  ProcessKubeletOptions negative;
  negative.nodes = {node_named("a", -1)};
  EXPECT_EQ(message_of(negative), "process kubelet: node a: gpus -1 is negative");
  ProcessKubeletOptions backoff;
  backoff.nodes = {node_named("a")};
  backoff.restart_backoff_initial = std::chrono::milliseconds(0);
  EXPECT_EQ(message_of(backoff), "process kubelet: restart_backoff_initial must be positive");
  ProcessKubeletOptions fine;
  fine.nodes = {node_named("a")};
  EXPECT_EQ(message_of(fine), "process kubelet: no client");
}

}  // namespace
}  // namespace tessel::testing
