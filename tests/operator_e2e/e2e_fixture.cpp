#include "tests/operator_e2e/e2e_fixture.h"

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <sstream>
#include <thread>

#include "api/yaml_json.h"
#include "kube/api_error.h"
#include "kube/base64.h"
#include "noderuntime/stage/token_data.h"
#include "placement/atomic_file.h"
#include "tests/helm/helm_chart.h"
#include "tests/operator_e2e/chart_install.h"
#include "tests/operator_e2e/operator_pod.h"

namespace tessel::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kSource = TESSEL_SOURCE_DIR;

// How long the teardown waits for the operator to finish deleting the run's TrainingJobs.
constexpr std::chrono::seconds kTeardownDeleteTimeout{60};

// A core resource, copied out of the registry (a temporary).
kube::ResourceInfo builtin(const char* resource) {
  return *kube::ResourceRegistry().find_resource("", resource);
}

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), {}};
}

std::string unique_work_dir() {
  std::random_device device;
  return (fs::temp_directory_path() /
          ("tessel-e2e-" + std::to_string(::getpid()) + "-" + std::to_string(device() % 1000000)))
      .string();
}

// Prints the tail of every log under `folder` (the kubelets', the stage containers', the
// operator's), for a failed test.
void print_logs(const std::string& folder) {
  std::error_code error;
  for (const auto& entry : fs::recursive_directory_iterator(folder, error)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".log") continue;
    std::cout << "----- " << entry.path().string() << " (tail) -----\n"
              << tail_of(read_file(entry.path().string()), 40);
  }
}

}  // namespace

// --- FederationE2e ------------------------------------------------------------------------------

void FederationE2e::SetUp() {
  if (!find_on_path("kubectl")) GTEST_SKIP() << "no kubectl on PATH";
  if (!helm::helm_binary()) GTEST_SKIP() << "no helm on PATH (the e2e installs from helm/)";
  TESSEL_REQUIRE_MEMBER_CLUSTERS(2);
  work_dir_ = unique_work_dir();
  fs::create_directories(work_dir_);
  federation_ = std::make_unique<Federation>(
      std::vector<MemberSpec>{{"a", "eu-west"}, {"b", "us-east"}}, work_dir_, more_hub_values());
  federation_->install_crds();

  std::vector<FleetMember> members;
  for (int i = 0; i < federation_->member_count(); ++i)
    members.push_back({federation_->member_name(i), federation_->member_region(i),
                       federation_->member(i).client(), nodes_per_member(), kGpusPerNode});
  fleet_ = std::make_unique<GpuFleet>(std::move(members), federation_->run_id(), work_dir_,
                                      fleet_options());
  fleet_->start();
  federation_->register_members();
}

void FederationE2e::TearDown() {
  fleet_.reset();
  federation_.reset();
  if (work_dir_.empty()) return;
  if (HasFailure()) {
    print_logs(work_dir_);
    std::cout << "e2e work folder kept: " << work_dir_ << "\n";
  } else {
    fs::remove_all(work_dir_);
  }
}

ProcessResult FederationE2e::kubectl(const std::vector<std::string>& args) {
  return federation_->kubectl().run(args);
}

std::string FederationE2e::kubectl_ok(const std::vector<std::string>& args) {
  const ProcessResult result = kubectl(args);
  EXPECT_EQ(result.exit_code, 0) << describe(result);
  return result.out;
}

bool FederationE2e::wait_for(const std::function<bool()>& done, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    try {
      if (done()) return true;
    } catch (const std::exception&) {
      // Not yet: a transient API error is polled again.
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

std::vector<json> FederationE2e::pods_in(int member, const std::string& selector) {
  kube::ListOptions options;
  options.label_selector = selector;
  const json list = federation_->member(member).admin().list(
      builtin("pods"), federation_->namespace_name(), options);
  return list.value("items", json::array()).get<std::vector<json>>();
}

std::vector<std::string> FederationE2e::leftovers(const std::string& uid) {
  std::vector<std::string> left;
  kube::ListOptions options;
  options.label_selector = std::string(kJobUidLabel) + "=" + uid;
  for (int m = 0; m < federation_->member_count(); ++m)
    for (const char* resource : {"pods", "configmaps", "secrets"}) {
      const json list = federation_->member(m).admin().list(builtin(resource), "", options);
      for (const json& item : list.value("items", json::array()))
        left.push_back(federation_->member_name(m) + ": " + resource + " " +
                       item["metadata"].value("namespace", "") + "/" +
                       item["metadata"].value("name", ""));
    }
  return left;
}

json FederationE2e::trainingjob(const std::string& name) {
  kube::Client& hub = federation_->hub().admin();
  try {
    return hub.get(hub.resource_for("tessel.dev/v1alpha1", "TrainingJob"),
                   federation_->namespace_name(), name);
  } catch (const kube::ApiError& error) {
    if (error.code() == 404) return nullptr;
    throw;
  }
}

std::string FederationE2e::example_job(const std::string& name, int steps,
                                       const std::function<void(json&)>& edit) {
  const std::string source = kSource + "/examples/trainingjobs/fables.yaml";
  json job = api::yaml_to_json(read_file(source), source);
  job["metadata"]["name"] = name;
  job["spec"]["training"]["steps"] = steps;
  const json only_this_run = {{"matchLabels", {{kRunLabel, federation_->run_id()}}}};
  job["spec"]["placement"]["clusterSelector"] = only_this_run;
  job["spec"]["placement"]["gpuSelector"] = only_this_run;
  if (edit) edit(job);
  const std::string path = work_dir_ + "/" + name + ".json";
  placement::write_file_atomically(path, job.dump(2));
  return path;
}

// --- OperatorE2e --------------------------------------------------------------------------------

void OperatorE2e::SetUp() {
  const OperatorBinary binary = find_operator_binary();
  if (!binary.path) GTEST_SKIP() << binary.why_missing;
  FederationE2e::SetUp();
  if (IsSkipped() || HasFatalFailure()) return;
  federation_->install_hub();
  register_webhook(start_operator("replica-0"));
}

void OperatorE2e::TearDown() {
  bool operator_running = false;
  for (auto& replica : operators_) operator_running = operator_running || replica->running();
  if (federation_ && operator_running) {
    // Deleted while the operator runs, so that its finalizer cleans the members up.
    kubectl({"delete", "trainingjobs", "--all", "--wait=false"});
    const bool gone = wait_for(
        [&] {
          const ProcessResult listed = kubectl({"get", "trainingjobs", "-o", "name"});
          return listed.exit_code == 0 && listed.out.empty();
        },
        kTeardownDeleteTimeout);
    EXPECT_TRUE(gone) << "the run's TrainingJobs were not deleted within "
                      << kTeardownDeleteTimeout.count() << " s";
  }
  for (auto& replica : operators_) replica->stop(SIGTERM);
  if (federation_) {
    // No replica answers the webhooks any more: they would refuse the writes below.
    federation_->remove_webhooks();
    kube::Client& hub = federation_->hub().admin();
    try {
      // A finalizer left by an operator that is gone would keep the job (and its namespace).
      const kube::ResourceInfo jobs = hub.resource_for("tessel.dev/v1alpha1", "TrainingJob");
      for (const json& job :
           hub.list(jobs, federation_->namespace_name()).value("items", json::array()))
        hub.patch(jobs, federation_->namespace_name(), job["metadata"]["name"],
                  kube::PatchType::kMerge, {{"metadata", {{"finalizers", nullptr}}}});
    } catch (const std::exception& error) {
      std::cout << "e2e teardown: " << error.what() << "\n";
    }
  }
  operators_.clear();
  FederationE2e::TearDown();
}

OperatorProcess& OperatorE2e::start_operator(const std::string& replica) {
  kube::Client& hub = federation_->hub().admin();
  const std::string namespace_ = federation_->namespace_name();
  const std::string deployment_name =
      the_object(federation_->hub_chart(), "Deployment")["metadata"]["name"];
  // The Deployment as the API stores it (defaults included), as the ReplicaSet controller reads
  // it, and the Pod that controller would make of its template.
  const json deployment =
      hub.get(hub.resource_for("apps/v1", "Deployment"), namespace_, deployment_name);
  const std::string pod_name = deployment_name + "-" + replica;
  const json pod = hub.create(builtin("pods"), namespace_, pod_from_template(deployment, pod_name));
  const json containers = pod["spec"].value("containers", json::array());
  if (containers.size() != 1)
    throw std::runtime_error("Deployment " + deployment_name + " has " +
                             std::to_string(containers.size()) +
                             " containers; the e2e runs one, tessel-operator");
  const json& container = containers[0];

  // A token of the pod's ServiceAccount: what its service-account volume holds, and what the
  // kubeconfig that stands in for the in-cluster config carries.
  const std::string token =
      create_token(federation_->kubectl(), pod["spec"].value("serviceAccountName", "default"));

  // The volumes the kubelet would mount, as folders of the pod's own.
  const std::string pod_dir = work_dir_ + "/" + pod_name;
  std::map<std::string, std::string> folders;
  for (const json& mount : container.value("volumeMounts", json::array())) {
    const std::string name = mount.value("name", "");
    json volume;
    for (const json& candidate : pod["spec"].value("volumes", json::array()))
      if (candidate.value("name", "") == name) volume = candidate;
    const std::string folder = pod_dir + "/volumes/" + name;
    fs::create_directories(folder);
    const auto write = [&](const std::string& file, const std::string& bytes) {
      placement::write_file_atomically(folder + "/" + file, bytes);
      fs::permissions(folder + "/" + file, fs::perms::owner_read);
    };
    if (volume.contains("secret")) {
      const json secret =
          hub.get(builtin("secrets"), namespace_, volume["secret"].value("secretName", ""));
      const json data = secret.value("data", json::object());
      for (const auto& [key, value] : data.items()) {
        const std::optional<std::string> bytes = kube::base64_decode(value.get<std::string>());
        if (!bytes)
          throw std::runtime_error("Secret " + secret["metadata"].value("name", "") + ": data." +
                                   key + " is not base64");
        write(key, *bytes);
      }
    } else if (volume.contains("projected") &&
               volume["projected"].dump().find("serviceAccountToken") != std::string::npos) {
      // The service-account volume the ServiceAccount admission plugin adds
      // (/var/run/secrets/kubernetes.io/serviceaccount): token, the cluster's CA, namespace.
      write("token", token);
      write("ca.crt", federation_->hub().config().ca_pem);
      write("namespace", namespace_);
    } else if (!volume.contains("emptyDir")) {
      throw std::runtime_error("volume " + name + " of the Pod of Deployment " + deployment_name +
                               " is " + volume.dump() +
                               ": the e2e mounts Secrets, emptyDirs and the service-account "
                               "volume");
    }
    folders[mount.value("mountPath", "")] = folder;
  }

  OperatorSettings settings;
  settings.binary = *find_operator_binary().path;
  settings.identity = pod_name;
  const std::map<std::string, std::string> env = container_env(pod, container);
  std::vector<std::string> args;
  for (const json& arg : container.value("args", json::array()))
    args.push_back(expand_references(arg.get<std::string>(), env));
  settings.args = map_mount_paths(args, folders);
  settings.env = env;
  // In place of the in-cluster config (the operator reads the service-account files at a fixed
  // path, and $KUBERNETES_SERVICE_HOST): a kubeconfig with the same token.
  const std::string kubeconfig = pod_dir + "/kubeconfig";
  placement::write_file_atomically(
      kubeconfig, token_kubeconfig(federation_->hub().config(), token, namespace_));
  settings.env["KUBECONFIG"] = kubeconfig;
  settings.ports = container_ports(container);
  for (const std::string& arg : settings.args)
    if (arg.rfind("--tls-ca-file=", 0) == 0) settings.tls_ca_file = arg.substr(arg.find('=') + 1);
  if (settings.tls_ca_file.empty())
    throw std::runtime_error("Deployment " + deployment_name + ": no --tls-ca-file among " +
                             container.value("args", json::array()).dump());
  ca_pem_ = read_file(settings.tls_ca_file);
  settings.log_file = pod_dir + "/operator.log";
  operators_.push_back(std::make_unique<OperatorProcess>(std::move(settings)));
  return *operators_.back();
}

OperatorProcess& OperatorE2e::restart_operator(size_t index) {
  std::unique_ptr<OperatorProcess>& replica = operators_.at(index);
  replica->stop(SIGKILL);
  OperatorSettings settings = replica->settings();
  const std::map<std::string, int> ports = replica->host_ports();
  replica.reset();
  // On its ports of before, as a container restarted in its pod: the stage pods dial the stage
  // service where their job.json says, and the webhook Endpoints stay right.
  replica = std::make_unique<OperatorProcess>(std::move(settings), ports);
  return *replica;
}

void OperatorE2e::register_webhook(const OperatorProcess& replica) {
  // A real kube-apiserver runs elsewhere and cannot call a webhook this test process's machine
  // serves: on a real hub the webhook configurations are not installed (Federation::install_hub),
  // and the cases skip their admission parts (the operator's reconcile still flags a bad job,
  // which they check).
  if (federation_->hub().is_real()) return;
  const json configuration = the_object(federation_->hub_chart(), "ValidatingWebhookConfiguration");
  const std::string service_name =
      configuration.value("/webhooks/0/clientConfig/service/name"_json_pointer, std::string());
  const json service = the_object(federation_->hub_chart(), "Service", service_name);
  const json endpoints = endpoints_for(service, replica.settings().identity, replica.host_ports());
  const std::string path = work_dir_ + "/endpoints-" + service_name + ".json";
  placement::write_file_atomically(path, endpoints.dump(2));
  const ProcessResult applied =
      kubectl({"apply", "--server-side", "--field-manager=endpoint-controller", "-f", path});
  if (applied.exit_code != 0)
    throw std::runtime_error("writing the webhook Service's Endpoints: " + describe(applied));
  webhook_registered_ = true;
}

json OperatorE2e::wait_for_phase(const std::string& name, const std::string& phase,
                                 std::chrono::seconds timeout) {
  json job;
  const bool reached = wait_for(
      [&] {
        job = trainingjob(name);
        return !job.is_null() && job.value("/status/phase"_json_pointer, "") == phase;
      },
      timeout);
  EXPECT_TRUE(reached) << "TrainingJob " << name << " did not reach phase " << phase << " within "
                       << timeout.count() << " s; last seen: "
                       << (job.is_null() ? "absent" : job.value("status", json::object()).dump());
  return job;
}

// --- free functions -----------------------------------------------------------------------------

double example_data_entropy() {
  return stage::TokenCorpus::from_file(kSource + "/examples/data/fables.txt", 256)
      .unigram_entropy();
}

json condition_of(const json& object, const std::string& type) {
  for (const json& condition : object.value("/status/conditions"_json_pointer, json::array()))
    if (condition.value("type", "") == type) return condition;
  return nullptr;
}

std::optional<std::string> table_cell(const std::string& table, const std::string& name,
                                      const std::string& column) {
  std::istringstream lines(table);
  std::string header, line;
  if (!std::getline(lines, header)) return std::nullopt;
  // Columns start where a header word starts; a cell runs to the next column's start.
  std::vector<size_t> starts;
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] != ' ' && (i == 0 || header[i - 1] == ' ')) starts.push_back(i);
  size_t index = starts.size();
  for (size_t c = 0; c < starts.size(); ++c)
    if (header.compare(starts[c], column.size(), column) == 0 &&
        (starts[c] + column.size() == header.size() || header[starts[c] + column.size()] == ' '))
      index = c;
  if (index == starts.size()) return std::nullopt;
  const auto trim = [](std::string text) {
    text.erase(0, text.find_first_not_of(' '));
    text.erase(text.find_last_not_of(' ') + 1);
    return text;
  };
  while (std::getline(lines, line)) {
    if (trim(line.substr(0, starts.size() > 1 ? starts[1] : line.size())) != name) continue;
    if (starts[index] >= line.size()) return std::string();
    const size_t end = index + 1 < starts.size() ? starts[index + 1] : line.size();
    return trim(line.substr(starts[index], end - starts[index]));
  }
  return std::nullopt;
}

}  // namespace tessel::testing
