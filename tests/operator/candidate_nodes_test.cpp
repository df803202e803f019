// Which GPUs of a member cluster a job may use: Ready, schedulable, matching the GPU selector,
// allocatable less what bound, unfinished pods hold.
#include "operator/controller/candidate_nodes.h"

#include <gtest/gtest.h>

namespace tessel::controller {
namespace {

using nlohmann::json;

json node(const std::string& name, const json& gpus, bool ready = true,
          const json& labels = json::object()) {
  return {{"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", json::object()},
          {"status",
           {{"allocatable", {{"cpu", "64"}, {"nvidia.com/gpu", gpus}}},
            {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
}

json pod(const std::string& node_name, const json& containers, const std::string& phase = "Running",
         const json& labels = json::object()) {
  return {{"metadata", {{"name", "p"}, {"labels", labels}}},
          {"spec", {{"nodeName", node_name}, {"containers", containers}}},
          {"status", {{"phase", phase}}}};
}

json gpu_container(const std::string& kind, const json& n) {
  return {{"name", "c"}, {"resources", {{kind, {{"nvidia.com/gpu", n}}}}}};
}

TEST(PodGpuRequest, RequestsLimitsAndInitContainers) {
  EXPECT_EQ(pod_gpu_request(pod("n", json::array({gpu_container("requests", "2")}))), 2);
  EXPECT_EQ(pod_gpu_request(pod("n", json::array({gpu_container("limits", 4)}))), 4);
  EXPECT_EQ(pod_gpu_request(pod(
                "n", json::array({gpu_container("requests", "1"), gpu_container("limits", "1")}))),
            2);
  json with_init = pod("n", json::array({gpu_container("requests", "1")}));
  with_init["spec"]["initContainers"] = json::array({gpu_container("requests", "3")});
  EXPECT_EQ(pod_gpu_request(with_init), 3);
  EXPECT_EQ(pod_gpu_request(pod("n", json::array({gpu_container("requests", "1.5")}))), 0);
  EXPECT_EQ(pod_gpu_request(pod("n", json::array({{{"name", "cpu-only"}}}))), 0);
}

TEST(CandidateNodes, FreeGpusOfReadySchedulableMatchingNodes) {
  json cordoned = node("gpu-c", "8");
  cordoned["spec"]["unschedulable"] = true;
  const std::vector<json> nodes = {
      node("gpu-b", "8", true,
           {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"},
            {"topology.kubernetes.io/zone", "eu-north-1a"}}),
      node("gpu-a", "4", true, {{"topology.kubernetes.io/region", "eu-west-1"}}),
      node("gpu-down", "8", false),
      cordoned,
      node("gpu-full", "2"),
      node("cpu-only", "0"),
      node("gpu-a100", "8", true, {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}}),
  };
  const std::vector<json> pods = {
      pod("gpu-b", json::array({gpu_container("requests", "3")})),
      pod("gpu-b", json::array({gpu_container("requests", "5")}), "Succeeded"),  // done
      pod("", json::array({gpu_container("requests", "8")}), "Pending"),         // unbound
      pod("gpu-full", json::array({gpu_container("limits", "2")})),
      pod("gpu-a", json::array({gpu_container("requests", "4")}), "Running",
          {{"tessel.dev/job-uid", "uid-1"}}),  // this job's own
  };
  api::LabelSelector selector;
  selector.match_expressions.push_back(
      {"nvidia.com/gpu.product", "NotIn", {"NVIDIA-A100-SXM4-80GB"}});
  const Candidates c = candidate_nodes("member-a", "eu-north-1", nodes, pods, selector, "uid-1");
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.nodes[0].name, "gpu-a");
  EXPECT_EQ(c.nodes[0].free_gpus, 4);
  EXPECT_EQ(c.nodes[0].region, "eu-west-1");  // its label wins over the cluster's
  EXPECT_EQ(c.nodes[1].name, "gpu-b");
  EXPECT_EQ(c.nodes[1].free_gpus, 5);
  EXPECT_EQ(c.nodes[1].region, "eu-north-1");
  EXPECT_EQ(c.nodes[1].zone, "eu-north-1a");
  EXPECT_EQ(c.nodes[1].gpu_product, "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(c.free_gpus(), 9);
  std::map<std::string, std::string> excluded;
  for (const ExcludedNode& e : c.excluded) excluded[e.name] = e.reason;
  EXPECT_EQ(excluded, (std::map<std::string, std::string>{
                          {"gpu-down", "not Ready"},
                          {"gpu-c", "cordoned"},
                          {"gpu-full", "no free nvidia.com/gpu (2 held of 2)"},
                          {"gpu-a100", "does not match spec.placement.gpuSelector"}}));
  // Without ignoring its own pods, the job finds gpu-a full.
  EXPECT_EQ(candidate_nodes("member-a", "", nodes, pods, selector).free_gpus(), 5);
}

}  // namespace
}  // namespace tessel::controller
