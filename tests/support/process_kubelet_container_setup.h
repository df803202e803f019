// What the process kubelet does before a container's process starts: the pod's volumes as
// files, the container's view of its mounts, its environment (env, envFrom, the downward API,
// ConfigMap and Secret keys) and its command line.
//
// Mounts. A process sees the host's file system, so a volume cannot appear at its mountPath.
// Instead:
//   - every volume is a directory <pod dir>/volumes/<volume name> (configMap, secret and
//     downwardAPI volumes hold their files; emptyDir is empty; hostPath is a symlink to
//     <node root>/<path>, a directory of the node's own (each node has its own disk, as on a
//     real cluster: a pod rescheduled on another node does not find what it left on the first),
//     created for type DirectoryOrCreate or none, checked for Directory (other types are
//     refused); projected volumes combine configMap, secret, downwardAPI and
//     serviceAccountToken sources, the token from a TokenRequest as the kubelet gets it);
//   - every container has a root <pod dir>/root/<container name>, where each volumeMount is a
//     symlink at root + mountPath to the volume directory (or its subPath);
//   - the container gets TESSEL_MOUNT_ROOT=<that root>: a program that knows the convention
//     opens $TESSEL_MOUNT_ROOT/etc/tessel/peers.json for /etc/tessel/peers.json;
//   - and, for programs that do not, every absolute path under a mountPath that appears in the
//     command, the args, an env value or workingDir is rewritten to root + path: the argument
//     --peers=/etc/tessel/peers.json becomes --peers=<root>/etc/tessel/peers.json. A path is
//     recognised where it starts the text or follows a separator (space, = : , ; quote,
//     parenthesis, < > | &) and ends the text, a '/' or a separator; /etc/tessel-other is not
//     under /etc/tessel.
// Nested mountPaths (one under another) are refused; readOnly is not enforced; subPath is
// supported. Volume contents are written when the pod starts and not refreshed afterwards.
//
// Termination message: the container's terminationMessagePath is an empty file at root + path,
// made anew for each run of the container, and references to the path are rewritten as for a
// mount. When the process exits, the kubelet reads the file into the container's terminated
// state (policy File; FallbackToLogsOnError's use of the log is not modelled).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/process_kubelet_process.h"

namespace tessel::testing {

// The container cannot be configured yet (a missing ConfigMap key, an unsupported fieldPath):
// the kubelet's CreateContainerConfigError. what() is the kubelet's message.
class ContainerConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A volume cannot be set up (the pod stays ContainerCreating): the kubelet's FailedMount.
class VolumeSetupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads a ConfigMap or Secret ("ConfigMap" or "Secret") through the API: the object, or
// nullopt when it does not exist. Other failures throw.
using ObjectReader = std::function<std::optional<nlohmann::json>(
    const std::string& kind, const std::string& namespace_, const std::string& name)>;

// A service account token for the pod, as the kubelet gets one for a projected
// serviceAccountToken source (a TokenRequest bound to the pod): the token for `audience` ("":
// the API server's) valid for expiration_seconds. Failures throw.
using TokenIssuer = std::function<std::string(
    const nlohmann::json& pod, const std::string& audience, std::int64_t expiration_seconds)>;

// The addresses the kubelet gives the pod: status.hostIP and status.podIP.
struct PodAddresses {
  std::string host_ip;
  std::string pod_ip;
};

// The value of a downward-API fieldPath: metadata.name, metadata.namespace, metadata.uid,
// metadata.labels['k'], metadata.annotations['k'], spec.nodeName, spec.serviceAccountName,
// status.hostIP, status.podIP, status.podIPs; with allow_maps (volumes only) also
// metadata.labels and metadata.annotations as `key="value"` lines. Throws ContainerConfigError
// for any other path.
std::string pod_field(const nlohmann::json& pod, const std::string& field_path,
                      const PodAddresses& addresses, bool allow_maps = false);

// Kubernetes' $(VAR) expansion: $(NAME) becomes the value when `variables` has NAME and stays
// as written otherwise; $$ is a literal $.
std::string expand_variables(const std::string& text,
                             const std::map<std::string, std::string>& variables);

// Prefixes with `root` every absolute path in `text` that lies under one of `mount_paths`
// (see the header comment for what counts as a path).
std::string rewrite_mount_paths(const std::string& text,
                                const std::vector<std::string>& mount_paths,
                                const std::string& root);

// Writes every volume of the pod under volumes_dir (emptied first); hostPath paths lie under
// node_root, the node's file system. Throws VolumeSetupError naming the volume, in the kubelet's
// words: `MountVolume.SetUp failed for volume "peers" : configmap "gpt-a-peers" not found`.
void prepare_volumes(const nlohmann::json& pod, const std::string& volumes_dir,
                     const std::string& node_root, const ObjectReader& reader,
                     const TokenIssuer& issue_token, const PodAddresses& addresses);

// The nvidia.com/gpu a container asks for (limits, else requests; extended resources come in
// whole numbers). Throws std::invalid_argument naming the container and the quantity when it is
// not a whole number.
std::int64_t container_gpu_request(const nlohmann::json& container);

// Everything a container's process start needs besides the container itself.
struct ContainerContext {
  const nlohmann::json* pod = nullptr;
  std::string pod_dir;  // holds volumes/, root/ and the container logs
  PodAddresses addresses;
  ObjectReader reader;
  // Entrypoints of images, for containers without a command: the image as written, or its
  // repository without tag or digest, to an executable.
  std::map<std::string, std::string> image_entrypoints;
  // Variables every container starts from (PATH, HOME, ...); the pod's env overrides them.
  std::vector<std::pair<std::string, std::string>> base_environment;
  // GPU device IDs given to this container: CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES
  // when not empty.
  std::vector<std::string> gpu_devices;
};

// The container's environment as the kubelet builds it: envFrom (in order, with prefixes),
// then env (values $(VAR)-expanded against what came before). Throws ContainerConfigError.
std::vector<std::pair<std::string, std::string>> container_environment(
    const nlohmann::json& container, const ContainerContext& context);

// The kubelet keeps at most this many bytes of a termination message.
inline constexpr std::size_t kMaxTerminationMessageBytes = 4096;

// The file standing for the container's terminationMessagePath (<pod dir>/root/<container> +
// the path), or "" when it has none.
std::string termination_message_file(const nlohmann::json& container, const std::string& pod_dir);

// What the kubelet puts in the terminated state's message: the file's first
// kMaxTerminationMessageBytes bytes ("" when it is missing or empty).
std::string read_termination_message(const std::string& file);

// Creates the container's root with its mount symlinks and termination message file, and
// returns how to start its process:
// command (or the image's entrypoint) + args, $(VAR)-expanded and mount-rewritten; the
// environment with HOSTNAME, TESSEL_MOUNT_ROOT and the GPU variables added; workingDir under
// the root (default: the pod dir); the log <pod dir>/<container>.log. Throws
// ContainerConfigError, or ProcessStartError when no executable can be found.
ProcessSpec prepare_container(const nlohmann::json& container, const ContainerContext& context);

}  // namespace tessel::testing
