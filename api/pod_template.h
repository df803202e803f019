// spec.template of a TrainingJob: the pod template its stage pods are made from, and the rules a
// template must keep so that tessel can add what every stage pod needs (one GPU, the job file
// and the token, the address it advertises). Checked by api/'s one parser (so by the admission
// webhook and the reconciler alike); the operator's pod builder adds these paths and names.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "api/manifest_error.h"

namespace tessel::api {

// What tessel adds to every stage pod, and so what a template may not use.
inline constexpr const char* kJobFileDirectory = "/etc/tessel/job";        // the ConfigMap
inline constexpr const char* kStageSecretDirectory = "/etc/tessel/stage";  // the Secret
inline constexpr const char* kJobFileVolume = "tessel-job";
inline constexpr const char* kStageSecretVolume = "tessel-stage";
// The env variable holding the address a stage advertises (job.json's advertise_env).
inline constexpr const char* kPodIpVariable = "POD_IP";
inline constexpr const char* kGpuResource = "nvidia.com/gpu";

// Every reason the template cannot be merged into a stage pod, each naming its field
// (spec.template...): a GPU count other than 1 (tessel gives each stage one GPU), an env
// POD_IP, a volume named like tessel's or twice, a mount at tessel's paths or another mount's,
// or of a volume not given.
std::vector<FieldError> pod_template_errors(const nlohmann::json& pod_template);

}  // namespace tessel::api
