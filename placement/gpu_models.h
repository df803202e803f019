// The GPU models tessel knows, with their dense 16-bit tensor-core peak, fp32 peak and memory:
// the geo topology generator equips its sites from them, and the operator recognises a node's
// GPUs from the nvidia.com/gpu.product label that NVIDIA's GPU feature discovery sets.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "placement/topology.h"

namespace tessel::placement {

// Catalogue order. The first kGeneratedGpuModels are the mix the geo generator draws from (its
// seeded outputs depend on them); later entries are only recognised.
const std::vector<GpuType>& known_gpu_types();
inline constexpr size_t kGeneratedGpuModels = 5;

// The model a product label names ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB",
// "Tesla-V100-SXM2-16GB", "NVIDIA-L40S"...), matched on the model's marker in the label;
// nullopt when none matches. Memory is the model's; a label's own size is not read.
std::optional<GpuType> gpu_type_for_product(const std::string& product);

}  // namespace tessel::placement
