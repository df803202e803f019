#include "placement/gpu_models.h"

#include <algorithm>
#include <cctype>

namespace tessel::placement {
namespace {

struct Model {
  GpuType type;
  std::vector<std::string> markers;  // upper case; the first model with a marker in the label
};

// Dense (no sparsity) peaks from NVIDIA's data sheets.
const std::vector<Model>& models() {
  static const std::vector<Model> table = {
      {{"H100-SXM", 989, 67, 80}, {"H100-SXM", "H100-80GB-HBM3", "H100"}},
      {{"H200", 989, 67, 141}, {"H200"}},
      {{"A100-SXM", 312, 19.5, 80}, {"A100"}},
      {{"L40S", 362, 91.6, 48}, {"L40S"}},
      {{"V100-SXM2-16GB", 125, 15.7, 16}, {"V100"}},
      {{"H100-PCIe", 756, 51, 80}, {"H100-PCIE", "H100 PCIE"}},
      {{"L4", 121, 30.3, 24}, {"L4"}},
      {{"A10", 125, 31.2, 24}, {"A10G", "A10"}},
  };
  return table;
}

}  // namespace

const std::vector<GpuType>& known_gpu_types() {
  static const std::vector<GpuType> types = [] {
    std::vector<GpuType> out;
    for (const Model& m : models()) out.push_back(m.type);
    return out;
  }();
  return types;
}

std::optional<GpuType> gpu_type_for_product(const std::string& product) {
  std::string label = product;
  std::transform(label.begin(), label.end(), label.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  // A PCIe H100 must not be taken for the SXM part, nor an L40S for an L4: the most specific
  // marker wins, whatever its model's place in the catalogue.
  const GpuType* best = nullptr;
  size_t best_length = 0;
  for (const Model& m : models()) {
    for (const std::string& marker : m.markers) {
      if (marker.size() > best_length && label.find(marker) != std::string::npos) {
        best = &m.type;
        best_length = marker.size();
      }
    }
  }
  if (!best) return std::nullopt;
  return *best;
}

}  // namespace tessel::placement
