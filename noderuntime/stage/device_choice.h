// Which backend trains a rank's chunks: tessel-stage's --device flag (cpu, cuda or auto), the
// job's precision and whether this process can use a GPU decide it, with the reason said on
// stderr at the start of every run.
//   cpu   the CPU backend (fp32 arithmetic whatever the job's precision);
//   cuda  the CUDA backend (bf16 mixed precision); an error when no GPU is usable;
//   auto  CUDA for a bf16 job when a GPU is usable, else the CPU: an fp32 job stays on the CPU,
//         whose arithmetic is the one it asks for.
#pragma once

#include <optional>
#include <string>

#include "noderuntime/stage/chunk_model.h"
#include "placement/workload.h"

namespace tessel::stage {

enum class DeviceRequest { kCpu, kCuda, kAuto };

// Throws ConfigError naming --device and the accepted values.
DeviceRequest parse_device_request(const std::string& text);

struct DeviceChoice {
  Device device = Device::kCpu;
  std::string reason;  // e.g. "--device auto: the job's precision is fp32"
};

// gpu_unavailable: why no GPU can be used (kernels/cuda/device.h), or nullopt when one can.
// Throws ConfigError for --device cuda without a usable GPU, with the reason.
DeviceChoice choose_device(DeviceRequest request, placement::Precision precision,
                           const std::optional<std::string>& gpu_unavailable);

}  // namespace tessel::stage
