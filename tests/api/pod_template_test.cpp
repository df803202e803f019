// spec.template's rules are the TrainingJob's: api/'s one parser refuses a template tessel cannot
// merge into its stage pods, naming the field, so `kubectl apply` (the webhook) refuses it at
// once instead of the reconciler finding out later.
#include "api/pod_template.h"

#include <gtest/gtest.h>

#include <set>

#include "api/trainingjob.h"

namespace tessel::api {
namespace {

using nlohmann::json;

json job_with_template(json pod_template) {
  return {{"apiVersion", "tessel.dev/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", "fables"}, {"namespace", "ml"}}},
          {"spec",
           {{"model", {{"layers", 2}, {"hidden", 64}, {"heads", 4}, {"seqLen", 16}}},
            {"parallelism", {{"stages", 2}, {"replicas", 1}}},
            {"batch", {{"microBatch", 1}, {"globalBatch", 2}}},
            {"training", {{"steps", 1}}},
            {"data", {{"synthetic", json::object()}}},
            {"template", std::move(pod_template)}}}};
}

std::set<std::string> fields_of(json object) {
  std::set<std::string> fields;
  for (const FieldError& e : trainingjob_errors(object)) fields.insert(e.field);
  return fields;
}

TEST(PodTemplate, AGoodTemplateIsAccepted) {
  json object =
      job_with_template({{"image", "registry.example/tessel/stage:0.1.0"},
                         {"resources", {{"limits", {{"nvidia.com/gpu", 1}, {"memory", "64Gi"}}}}},
                         {"env", {{{"name", "NCCL_DEBUG"}, {"value", "WARN"}}}},
                         {"volumes", {{{"name", "ckpt"}, {"emptyDir", json::object()}}}},
                         {"volumeMounts", {{{"name", "ckpt"}, {"mountPath", "/ckpt"}}}}});
  EXPECT_TRUE(trainingjob_errors(object).empty());
}

TEST(PodTemplate, EveryRuleNamesItsFieldThroughTheJobsParser) {
  json object =
      job_with_template({{"resources", {{"requests", {{"nvidia.com/gpu", 2}}}}},
                         {"env", {{{"name", "POD_IP"}, {"value", "1.2.3.4"}}}},
                         {"volumes", {{{"name", "tessel-job"}, {"emptyDir", json::object()}}}},
                         {"volumeMounts",
                          {{{"name", "missing"}, {"mountPath", "/data"}},
                           {{"name", "tessel-job"}, {"mountPath", "/etc/tessel/stage/"}}}}});
  EXPECT_EQ(fields_of(object), (std::set<std::string>{
                                   "spec.template.resources.requests[nvidia.com/gpu]",
                                   "spec.template.env[0].name",
                                   "spec.template.volumes[0].name",
                                   "spec.template.volumeMounts[0].name",
                                   "spec.template.volumeMounts[1].mountPath",
                               }));
  try {
    parse_trainingjob(object, "TrainingJob ml/fables");
    FAIL() << "a bad template was accepted";
  } catch (const ManifestError& e) {
    EXPECT_NE(std::string(e.what()).find("tessel gives every stage pod exactly 1 GPU, got 2"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessel::api
