// tessel-stage's --device: which backend a rank trains on, and why.
#include "noderuntime/stage/device_choice.h"

#include <gtest/gtest.h>

#include <string>

namespace tessel::stage {
namespace {

using placement::Precision;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(DeviceChoice, ParsesTheThreeValuesAndNamesTheFlagOtherwise) {
  EXPECT_EQ(parse_device_request("cpu"), DeviceRequest::kCpu);
  EXPECT_EQ(parse_device_request("cuda"), DeviceRequest::kCuda);
  EXPECT_EQ(parse_device_request("auto"), DeviceRequest::kAuto);
  try {
    parse_device_request("gpu");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "--device: expected cpu, cuda or auto, got 'gpu'");
  }
}

TEST(DeviceChoice, CudaWithoutAGpuIsAnErrorWithTheReason) {
  EXPECT_EQ(choose_device(DeviceRequest::kCuda, Precision::BF16, std::nullopt).device,
            Device::kCuda);
  try {
    choose_device(DeviceRequest::kCuda, Precision::BF16, "no CUDA-capable device is detected");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--device cuda: no usable GPU: no CUDA-capable device is detected");
  }
}

TEST(DeviceChoice, CpuIsTakenAsAskedEvenWithAGpu) {
  EXPECT_EQ(choose_device(DeviceRequest::kCpu, Precision::BF16, std::nullopt).device, Device::kCpu);
}

TEST(DeviceChoice, AutoTrainsABf16JobOnTheGpuAndEverythingElseOnTheCpu) {
  const DeviceChoice gpu = choose_device(DeviceRequest::kAuto, Precision::BF16, std::nullopt);
  EXPECT_EQ(gpu.device, Device::kCuda);
  EXPECT_TRUE(contains(gpu.reason, "bf16")) << gpu.reason;

  const DeviceChoice fp32 = choose_device(DeviceRequest::kAuto, Precision::FP32, std::nullopt);
  EXPECT_EQ(fp32.device, Device::kCpu);
  EXPECT_TRUE(contains(fp32.reason, "precision is fp32")) << fp32.reason;

  const DeviceChoice no_gpu = choose_device(DeviceRequest::kAuto, Precision::BF16, "no driver");
  EXPECT_EQ(no_gpu.device, Device::kCpu);
  EXPECT_TRUE(contains(no_gpu.reason, "no usable GPU (no driver)")) << no_gpu.reason;
}

}  // namespace
}  // namespace tessel::stage
