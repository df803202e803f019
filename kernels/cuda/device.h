// Whether this process can run CUDA kernels at all. The build machines have nvcc but no GPU:
// there cudaGetDeviceCount fails (no driver, or no device) or reports 0, and GPU tests skip with
// the reason this gives.
#pragma once

#include <optional>
#include <string>

namespace tessel::kernels::cuda {

// nullopt when at least one CUDA device is usable; otherwise why not, e.g.
// "cudaGetDeviceCount failed: cudaErrorNoDevice (no CUDA-capable device is detected)".
std::optional<std::string> gpu_unavailable_reason();

}  // namespace tessel::kernels::cuda
