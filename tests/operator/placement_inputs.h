// What the placement tests of the operator start from: candidate GPU nodes and a small
// TrainingJob (a 4-layer model that places in well under a second).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "api/trainingjob.h"
#include "operator/controller/candidate_nodes.h"

namespace tessel::controller {

// A node of `cluster` with `gpus` free GPUs of `product`.
inline GpuNode gpu_node(const std::string& cluster, const std::string& name, int gpus,
                        const std::string& region, const std::string& zone,
                        const std::string& product = "NVIDIA-H100-80GB-HBM3") {
  GpuNode n;
  n.cluster = cluster;
  n.name = name;
  n.free_gpus = gpus;
  n.region = region;
  n.zone = zone;
  n.gpu_product = product;
  return n;
}

// The same of H100s in zone "<region>a".
inline GpuNode gpu_node(const std::string& cluster, const std::string& name, int gpus,
                        const std::string& region) {
  return gpu_node(cluster, name, gpus, region, region + "a");
}

// TrainingJob ml/fables (generation 3): a `layers`-layer model, `stages` x `replicas` GPUs,
// searched with `evaluations` evaluations.
inline api::TrainingJob small_job(int stages, int replicas, int layers = 4, int evaluations = 300) {
  const nlohmann::json object = {
      {"apiVersion", "tessel.dev/v1alpha1"},
      {"kind", "TrainingJob"},
      {"metadata", {{"name", "fables"}, {"namespace", "ml"}, {"generation", 3}}},
      {"spec",
       {{"model",
         {{"layers", layers}, {"hidden", 128}, {"heads", 4}, {"seqLen", 64}, {"vocab", 256}}},
        {"parallelism", {{"stages", stages}, {"replicas", replicas}}},
        {"batch", {{"microBatch", 2}, {"globalBatch", 4 * replicas}}},
        {"training", {{"steps", 10}}},
        {"data", {{"synthetic", {{"seed", 1}}}}},
        {"placement", {{"evaluations", evaluations}}}}}};
  return api::parse_trainingjob(object, "test job");
}

}  // namespace tessel::controller
