// The GPU catalogue: product labels as GPU feature discovery writes them name the right model.
#include "placement/gpu_models.h"

#include <gtest/gtest.h>

namespace tessel::placement {
namespace {

std::string model_of(const std::string& product) {
  const auto type = gpu_type_for_product(product);
  return type ? type->name : "(none)";
}

TEST(GpuModels, ProductLabelsNameTheirModel) {
  EXPECT_EQ(model_of("NVIDIA-H100-80GB-HBM3"), "H100-SXM");
  EXPECT_EQ(model_of("NVIDIA-H100-PCIe"), "H100-PCIe");
  EXPECT_EQ(model_of("NVIDIA-H200"), "H200");
  EXPECT_EQ(model_of("NVIDIA-A100-SXM4-40GB"), "A100-SXM");
  EXPECT_EQ(model_of("Tesla-V100-SXM2-16GB"), "V100-SXM2-16GB");
  EXPECT_EQ(model_of("NVIDIA-L40S"), "L40S");
  EXPECT_EQ(model_of("NVIDIA-L4"), "L4");
  EXPECT_EQ(model_of("NVIDIA-A10G"), "A10");
  EXPECT_EQ(model_of("nvidia-h200-nvl"), "H200");
  EXPECT_EQ(model_of("NVIDIA-GeForce-RTX-4090"), "(none)");
  EXPECT_EQ(model_of(""), "(none)");
}

TEST(GpuModels, TheCatalogueIsSane) {
  ASSERT_GE(known_gpu_types().size(), kGeneratedGpuModels);
  for (const GpuType& type : known_gpu_types()) {
    EXPECT_GT(type.peak_tflops, type.peak_tflops_fp32) << type.name;
    EXPECT_GT(type.memory_gib, 0) << type.name;
  }
}

}  // namespace
}  // namespace tessel::placement
