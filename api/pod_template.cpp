#include "api/pod_template.h"

#include <map>
#include <set>
#include <string>

namespace tessel::api {
namespace {

using nlohmann::json;

std::string str(size_t n) { return std::to_string(n); }

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// A mount path as the API server compares them (a trailing '/' does not make it another path).
std::string normalized_path(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The one GPU count a template may name: 1, as a number or a quantity string.
bool is_one_gpu(const json& quantity) {
  return (quantity.is_number_integer() && quantity.get<int64_t>() == 1) ||
         (quantity.is_string() && quantity.get<std::string>() == "1");
}

void check_resources(const json& resources, std::vector<FieldError>& errors) {
  for (const char* kind : {"requests", "limits"}) {
    const json list = resources.value(kind, json::object());
    if (!list.contains(kGpuResource) || is_one_gpu(list.at(kGpuResource))) continue;
    errors.push_back({std::string("spec.template.resources.") + kind + "[" + kGpuResource + "]",
                      "tessel gives every stage pod exactly 1 GPU, got " +
                          list.at(kGpuResource).dump() +
                          "; a job gets more GPUs from more stages or replicas"});
  }
}

void check_env(const json& env, std::vector<FieldError>& errors) {
  for (size_t i = 0; i < env.size(); ++i) {
    if (env[i].value("name", "") != kPodIpVariable) continue;
    errors.push_back({"spec.template.env[" + str(i) + "].name",
                      std::string(kPodIpVariable) +
                          " is set by tessel (the address the stage advertises to its peers) "
                          "and may not be overridden"});
  }
}

// Returns the names of the template's volumes.
std::set<std::string> check_volumes(const json& volumes, std::vector<FieldError>& errors) {
  std::map<std::string, size_t> first_index;
  for (size_t i = 0; i < volumes.size(); ++i) {
    const std::string name = volumes[i].value("name", "");
    const std::string field = "spec.template.volumes[" + str(i) + "].name";
    if (name == kJobFileVolume || name == kStageSecretVolume) {
      errors.push_back({field, quoted(name) + " is the name of a volume tessel adds (" +
                                   (name == kJobFileVolume ? "the job file" : "the job's token") +
                                   "); pick another"});
    } else if (const auto [it, inserted] = first_index.emplace(name, i); !inserted) {
      errors.push_back({field, quoted(name) + " is also the name of spec.template.volumes[" +
                                   str(it->second) + "]"});
    }
  }
  std::set<std::string> names;
  for (const auto& [name, index] : first_index) names.insert(name);
  return names;
}

void check_volume_mounts(const json& mounts, const std::set<std::string>& template_volumes,
                         std::vector<FieldError>& errors) {
  std::map<std::string, std::string> paths = {
      {kJobFileDirectory, std::string("tessel's job file (volume ") + kJobFileVolume + ")"},
      {kStageSecretDirectory, std::string("tessel's token (volume ") + kStageSecretVolume + ")"}};
  for (size_t i = 0; i < mounts.size(); ++i) {
    const std::string at = "spec.template.volumeMounts[" + str(i) + "]";
    const std::string name = mounts[i].value("name", "");
    if (!template_volumes.contains(name) && name != kJobFileVolume && name != kStageSecretVolume) {
      errors.push_back({at + ".name", quoted(name) + " names no volume of spec.template.volumes"});
    }
    const std::string path = normalized_path(mounts[i].value("mountPath", ""));
    if (const auto [it, inserted] = paths.emplace(path, at); !inserted) {
      errors.push_back({at + ".mountPath", quoted(path) + " is already the mount path of " +
                                               it->second + "; every mount needs its own path"});
    }
  }
}

}  // namespace

std::vector<FieldError> pod_template_errors(const json& pod_template) {
  std::vector<FieldError> errors;
  check_resources(pod_template.value("resources", json::object()), errors);
  check_env(pod_template.value("env", json::array()), errors);
  const std::set<std::string> volumes =
      check_volumes(pod_template.value("volumes", json::array()), errors);
  check_volume_mounts(pod_template.value("volumeMounts", json::array()), volumes, errors);
  return errors;
}

}  // namespace tessel::api
