// The process kubelet: plays the kubelet of one or more Nodes against one Kubernetes API server,
// running each Pod's containers as local processes. It talks to the server only through the
// API (tessel's client in kube/), so it works the same against the API test server and a real
// cluster.
//
//   ProcessKubeletOptions options;
//   options.nodes.push_back(node);  // a ProcessNodeOptions: name "gpu-node-a", gpus 8, labels
//   ProcessKubelet kubelet(client, options);
//   kubelet.start();          // registers the nodes, then runs the pods bound to them
//   ...
//   kubelet.fail_node("gpu-node-a");
//   kubelet.stop();           // kills every process it started
//
// Nodes (process_kubelet_node.h): registered with capacity and allocatable (cpu, memory, pods,
// nvidia.com/gpu), the kubelet's labels plus the given ones, the given annotations, conditions
// (Ready=True, KubeletReady) and addresses (InternalIP = the node's address, else
// options.address); the heartbeat is the
// node's Lease in kube-node-lease, renewed every lease_renew_interval. Playing the node
// lifecycle controller as well, the kubelet removes the not-ready / unreachable taints at
// registration.
//
// Network: a node given a network namespace runs its pods' containers inside it (they enter it
// before exec), so they reach what its routes reach (e.g. the WAN emulator's other namespaces)
// and listen on its address, which is their podIP and hostIP.
//
// Pods: an informer per node watches the pods with fieldSelector spec.nodeName=<node>; each pod
// gets a PodWorker (process_kubelet_pod_worker.h: containers, restarts, status, graceful
// deletion). A pod that asks for more nvidia.com/gpu than the node has free is rejected as the
// kubelet's admission does (phase Failed, reason OutOfnvidia.com/gpu); an admitted one is given
// device IDs, which its containers see as CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES, and
// which are free again once the pod is Succeeded, Failed or gone from the API. Pods that are
// already Succeeded or Failed when first seen are left alone; pods found running (a restarted
// kubelet) get fresh processes, as nothing of the old ones is known.
//
// Containers (process_kubelet_container_setup.h): command (or the image's entrypoint from
// image_entrypoints; the image itself is only recorded in the status) + args, found on the PATH
// of the container's environment, with $(VAR) expanded as Kubernetes does (so a shell's $$ is
// written $$$$); each process runs in a process group of its own with the
// working directory <work dir>/<namespace>_<pod> (or its workingDir under the container root),
// stdout and stderr appended to <work dir>/<namespace>_<pod>/<container>.log. Volumes and
// mounts follow the convention documented in process_kubelet_container_setup.h
// (TESSEL_MOUNT_ROOT, mount paths rewritten in command, args and env); the service account
// token of a projected volume comes from a TokenRequest, as the kubelet gets it (so pods that
// do not set automountServiceAccountToken: false need a server that serves
// serviceaccounts/token and the kube-root-ca.crt ConfigMap). Readiness, liveness and startup
// probes are not run: a running container is ready.
//
// fail_node(name) simulates the node dying: its processes get SIGKILL, its pods are no longer
// updated (graceful deletions of its pods stay pending, as on a real cluster, until someone
// deletes them with gracePeriodSeconds=0), its Lease is no longer renewed, and the kubelet
// writes what the node lifecycle controller would: every node condition Unknown with reason
// NodeStatusUnknown, the unreachable taints, and Ready=False on the node's running pods.
//
// stop() ends everything: every process the kubelet started is killed (SIGKILL) and reaped;
// nothing is written to the API (the nodes stay as they were, like a kubelet that was killed).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "kube/client.h"
#include "kube/informer.h"
#include "kube/log.h"
#include "tests/support/process_kubelet_node.h"
#include "tests/support/process_kubelet_pod_worker.h"

namespace tessel::testing {

struct ProcessKubeletOptions {
  std::vector<ProcessNodeOptions> nodes;
  // Pod directories and logs go here; empty: a new directory under $TMPDIR (or /tmp), which is
  // kept so that logs can be read after the pods are gone.
  std::string work_dir;
  // Each node's own file system, for hostPath volumes: node N's root is <node_roots_dir>/<N>,
  // created on demand. Empty: <work dir>/nodes.
  std::string node_roots_dir;
  // The InternalIP of every node without an address of its own, and the IP of its pods (the
  // processes share the host's network, as pods with hostNetwork do). A node in a network
  // namespace of its own has its own address (ProcessNodeOptions::network_namespace).
  std::string address = "127.0.0.1";
  // Entrypoints of images, for containers without a command: "tessel/stage" (any tag) or
  // "tessel/stage:0.1.0" (that tag only) to an executable path.
  std::map<std::string, std::string> image_entrypoints;
  // Variables copied from the kubelet's environment into every container (when set there); the
  // pod's env overrides them. A container otherwise starts from an empty environment.
  std::vector<std::string> inherited_environment = {"PATH",   "HOME",   "LANG",
                                                    "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH"};
  std::chrono::milliseconds lease_renew_interval{10'000};
  std::chrono::seconds lease_duration{40};
  // The kubelet's crash-loop back-off: 10 s doubling to 5 min (tests set less).
  std::chrono::milliseconds restart_backoff_initial{10'000};
  std::chrono::milliseconds restart_backoff_cap{300'000};
  // Before a failed API request, a missing ConfigMap or Secret, or a volume is tried again.
  std::chrono::milliseconds retry_interval{1'000};
  std::shared_ptr<const kube::Logger> logger;  // nullptr: component "process-kubelet" on stderr
};

class ProcessKubelet {
 public:
  // Throws std::invalid_argument for no node, a node without a name, two nodes of one name,
  // a negative GPU count, gpu_devices of another length than gpus, a network namespace that
  // does not exist or has no address, an address that is not IPv4, or intervals that are not
  // positive.
  ProcessKubelet(std::shared_ptr<kube::Client> client, ProcessKubeletOptions options);
  // stop().
  ~ProcessKubelet();
  ProcessKubelet(const ProcessKubelet&) = delete;
  ProcessKubelet& operator=(const ProcessKubelet&) = delete;

  // Creates or updates every Node, writes its status and renews its Lease (the kubelet's
  // registration; `register` itself is a C++ keyword). start() calls it. Throws kube::ApiError
  // or kube::TransportError when the server refuses or cannot be reached.
  void register_nodes();

  // register_nodes(), then starts the pod informers and the lease heartbeat, and returns once
  // every node's informer has listed its pods. Throws std::logic_error when called twice or
  // after stop().
  void start();

  // Simulates the failure of one node (see the header comment). Throws std::invalid_argument
  // for a node this kubelet does not run; failing a node twice does nothing.
  void fail_node(const std::string& name);

  // Kills every process started and stops every thread; idempotent.
  void stop();

  const std::string& work_dir() const { return work_dir_; }
  // <work dir>/<namespace>_<name>: the pod's working directory, volumes and container logs.
  std::string pod_directory(const std::string& namespace_, const std::string& name) const;
  // The root of node `name`'s own file system (see ProcessKubeletOptions::node_roots_dir): its
  // hostPath volumes lie under it, so a test reads or damages what a pod left on that node there.
  std::string node_root(const std::string& name) const;

 private:
  struct Node;

  Node& node_named(const std::string& name);
  // An informer event: dispatch() for an added or updated pod, forget() for a deleted one.
  void handle(Node& node, const nlohmann::json& pod, bool deleted);
  // Hands the pod to its worker, or admits it and starts one.
  void dispatch(Node& node, const nlohmann::json& pod);
  // The pod is gone from the API: its worker kills its processes, its GPUs are free.
  void forget(Node& node, const nlohmann::json& pod);
  PodAdmission admit(Node& node, const nlohmann::json& pod);
  void release_gpus(Node& node, const std::string& uid);
  // Stops the node's informer and pod workers (killing their processes); false when the
  // node had been stopped already.
  bool halt(Node& node, bool failed);
  void renew_leases(std::stop_token stop);
  PodWorkerSettings worker_settings(const Node& node) const;
  // The node's InternalIP and its pods' IP.
  const std::string& address_of(const Node& node) const;

  const std::shared_ptr<kube::Client> client_;
  const ProcessKubeletOptions options_;
  const std::shared_ptr<const kube::Logger> logger_;
  std::string work_dir_;
  std::vector<std::pair<std::string, std::string>> base_environment_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::mutex lifecycle_mutex_;  // start(), fail_node() and stop() one at a time
  bool started_ = false;
  std::stop_source stop_;
  std::jthread heartbeat_;
};

}  // namespace tessel::testing
