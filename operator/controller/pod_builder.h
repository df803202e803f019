// The objects one placed TrainingJob needs in each member cluster it uses, built from the
// placement and the job's spec.template: a Secret `<job>-stage` (the job's rendezvous/progress
// token and the operator's CA), a ConfigMap `<job>-stage` (job.json) and one pod per tasklet,
// `<job>-s<stage>-r<replica>`, pinned to its node. All in the TrainingJob's own namespace, all
// labelled with where they come from (labels.h) and annotated with the start attempt. Pure: the
// reconciler creates what this returns.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/manifest_error.h"
#include "api/pod_template.h"
#include "api/trainingjob.h"

namespace tessel::controller {

// Where the stage pod finds its files; job.json names the token and CA files by these paths.
using api::kJobFileDirectory;
inline constexpr const char* kJobFilePath = "/etc/tessel/job/job.json";  // its key job.json
using api::kStageSecretDirectory;
inline constexpr const char* kStageTokenPath = "/etc/tessel/stage/token";
inline constexpr const char* kStageCaPath = "/etc/tessel/stage/ca.crt";
// The same two files as job.json names them: relative to the job file's folder, which
// tessel-stage resolves lexically (noderuntime/stage/job_spec.h). Relative, because a kubelet
// that cannot mount at these paths (the test's process kubelet) rewrites the job file's path
// on the command line but not the paths inside the file.
inline constexpr const char* kStageTokenFromJobFile = "../stage/token";
inline constexpr const char* kStageCaFromJobFile = "../stage/ca.crt";
// The env variable holding the address a stage advertises (job.json's advertise_env).
using api::kPodIpVariable;
// Where the stage writes how it ended (tessel-stage --termination-log): Kubernetes' default
// terminationMessagePath, set on the container all the same so that the two cannot drift.
inline constexpr const char* kTerminationMessagePath = "/dev/termination-log";
// The stage pod's container, and the two volumes tessel adds beside the template's.
inline constexpr const char* kStageContainerName = "stage";
using api::kJobFileVolume;
using api::kStageSecretVolume;

// One tasklet of the placement: rank = replica x stages + stage, on `node` of member `cluster`.
struct TaskletPlace {
  int rank = 0, stage = 0, replica = 0;
  std::string cluster, node;
};

struct StageObjectsInput {
  const api::TrainingJob* job = nullptr;
  std::string job_uid;                 // the TrainingJob's metadata.uid (kJobUidLabel)
  std::string hub_id;                  // kHubLabel (the operator's --hub-id)
  std::vector<TaskletPlace> tasklets;  // index = rank, stages x replicas of them
  std::string job_json;                // the ConfigMap's job.json (api/stage_job_file.h)
  std::string token;                   // the Secret's token
  std::string ca_pem;                  // the Secret's ca.crt
  std::string default_image;           // when spec.template.image is unset (--stage-image)
  int64_t attempt = 0;                 // kAttemptAnnotation on every object
};

// What one member cluster gets; pods in rank order.
struct MemberObjects {
  std::string cluster;
  nlohmann::json secret, config_map;
  std::vector<nlohmann::json> pods;
};

// The objects of every member the placement uses, in cluster name order. Throws
// api::ManifestError (source "TrainingJob <ns>/<name>") with pod_template_errors() when the
// template cannot be merged, and std::invalid_argument for an input the caller got wrong (a
// tasklet list that is not stages x replicas in rank order, an empty token, a hub id or uid
// that is not a valid label value).
std::vector<MemberObjects> build_stage_objects(const StageObjectsInput& input);

// The template rules live with the TrainingJob's other rules (api/pod_template.h).
using api::pod_template_errors;

std::string stage_pod_name(const std::string& job, int stage, int replica);
std::string stage_object_name(const std::string& job);  // the Secret and the ConfigMap
// The label selector of every object one hub made for one job in a member:
// "tessel.dev/hub=<hub_id>,tessel.dev/job-uid=<job_uid>".
std::string remote_selector(const std::string& hub_id, const std::string& job_uid);

// Empty when `value` is a valid label value (at most 63 characters, alphanumerics with '-',
// '_' or '.' between); else the rule it breaks.
std::string label_value_violation(const std::string& value);

}  // namespace tessel::controller
