#include "operator/app/stage_service_label.h"

#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "kube/api_error.h"
#include "kube/object.h"
#include "kube/resource.h"

namespace tessel::app {
namespace {

using nlohmann::json;

const kube::ResourceInfo& pods() {
  static const kube::ResourceInfo info = *kube::ResourceRegistry().find_kind("v1", "Pod");
  return info;
}

}  // namespace

StageServiceLabel::StageServiceLabel(kube::Client& hub, StageServiceLabelOptions options)
    : hub_(hub), options_(std::move(options)) {
  if (!options_.logger) throw std::invalid_argument("StageServiceLabel: no logger");
}

void StageServiceLabel::set_label(const std::string& name, bool serving) {
  const json patch = {
      {"metadata",
       {{"labels", {{kStageServiceLabel, serving ? json(kStageServiceServing) : json(nullptr)}}}}}};
  kube::PatchOptions options;
  options.field_manager = hub_.options().field_manager;
  hub_.patch(pods(), options_.namespace_name, name, kube::PatchType::kMerge, patch, options);
}

void StageServiceLabel::claim() {
  kube::ListOptions selector;
  selector.label_selector = std::string(kStageServiceLabel) + "=" + kStageServiceServing;
  bool labelled = false;
  for (const json& pod : hub_.list_all(pods(), options_.namespace_name, selector).items) {
    const std::string name = kube::object_name(pod);
    if (name == options_.pod_name) {
      labelled = true;
      continue;
    }
    options_.logger->info("taking the stage-service label off a pod that no longer leads",
                          {{"pod", name}, {"namespace", options_.namespace_name}});
    try {
      set_label(name, false);
    } catch (const kube::ApiError& e) {
      if (e.code() != 404) throw;  // gone already: nothing to take off
    }
  }
  if (labelled) return;
  options_.logger->info("labelling this pod as the stage service's",
                        {{"pod", options_.pod_name},
                         {"namespace", options_.namespace_name},
                         {"label", std::string(kStageServiceLabel) + "=" + kStageServiceServing}});
  try {
    set_label(options_.pod_name, true);
  } catch (const kube::ApiError& e) {
    if (e.code() != 404) throw;
    throw std::runtime_error("--pod-name: no pod '" + options_.pod_name + "' in namespace '" +
                             options_.namespace_name + "' (--namespace)");
  }
}

bool StageServiceLabel::release() noexcept {
  try {
    options_.logger->info("taking the stage-service label off this pod",
                          {{"pod", options_.pod_name}, {"namespace", options_.namespace_name}});
    set_label(options_.pod_name, false);
    return true;
  } catch (const kube::ApiError& e) {
    if (e.code() == 404) return true;  // the pod is gone, and its label with it
    options_.logger->warning("could not take the stage-service label off this pod",
                             {{"pod", options_.pod_name}, {"error", e.what()}});
  } catch (const std::exception& e) {
    options_.logger->warning("could not take the stage-service label off this pod",
                             {{"pod", options_.pod_name}, {"error", e.what()}});
  }
  return false;
}

void StageServiceLabel::run(std::stop_token stop) {
  std::mutex mutex;
  std::condition_variable_any wake;
  std::unique_lock lock(mutex);
  while (!stop.stop_requested()) {
    try {
      claim();
    } catch (const std::exception& e) {
      options_.logger->warning(
          "could not label this pod as the stage service's; retrying",
          {{"pod", options_.pod_name},
           {"retry_in_s", std::chrono::duration<double>(options_.recheck).count()},
           {"error", e.what()}});
    }
    wake.wait_for(lock, stop, options_.recheck, [] { return false; });
  }
  release();
}

}  // namespace tessel::app
