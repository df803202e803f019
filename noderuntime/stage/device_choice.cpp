#include "noderuntime/stage/device_choice.h"

namespace tessel::stage {

DeviceRequest parse_device_request(const std::string& text) {
  if (text == "cpu") return DeviceRequest::kCpu;
  if (text == "cuda") return DeviceRequest::kCuda;
  if (text == "auto") return DeviceRequest::kAuto;
  throw ConfigError("--device: expected cpu, cuda or auto, got '" + text + "'");
}

DeviceChoice choose_device(DeviceRequest request, placement::Precision precision,
                           const std::optional<std::string>& gpu_unavailable) {
  switch (request) {
    case DeviceRequest::kCpu:
      return {Device::kCpu, "--device cpu (fp32 arithmetic)"};
    case DeviceRequest::kCuda:
      if (gpu_unavailable) throw ConfigError("--device cuda: no usable GPU: " + *gpu_unavailable);
      return {Device::kCuda, "--device cuda (bf16 mixed precision)"};
    case DeviceRequest::kAuto:
      break;
  }
  if (precision != placement::Precision::BF16) {
    return {Device::kCpu, std::string("--device auto: the job's precision is ") +
                              placement::to_string(precision) +
                              ", which the CPU backend computes (the CUDA backend trains in bf16)"};
  }
  if (gpu_unavailable) {
    return {Device::kCpu, "--device auto: no usable GPU (" + *gpu_unavailable +
                              "), so the CPU backend computes the bf16 job in fp32"};
  }
  return {Device::kCuda, "--device auto: a bf16 job and a usable GPU"};
}

}  // namespace tessel::stage
