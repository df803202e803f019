// Which backend each stage process of a local job computes on. A tessel-stage decides it itself
// (noderuntime/stage/device_choice.h: its --device, the job's precision, whether it can use a
// GPU) and says so in the first line of its standard error, which the launcher sends to the
// rank's log:
//   tessel-stage rank 3: device cuda: --device auto: a bf16 job and a usable GPU
// The launcher reads that line back once the rank has started, for the report, and says once on
// its own standard error when ranks compute in another precision than the job's (a bf16 job in
// fp32 on the CPU); the ranks' lines stay in their logs, not on the console.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "placement/workload.h"

namespace tessel::launcher {

struct StageDevice {
  std::string device;  // "cpu" or "cuda"
  std::string reason;  // "--device auto: a bf16 job and a usable GPU"
};

// The device line of a rank's log (the first line that is one, among the log's first 64 KiB);
// nullopt when the log holds none (yet), or cannot be read.
std::optional<StageDevice> device_of_log(const std::string& log_path);

// The one line said when some ranks compute in another arithmetic than the job's precision:
// a bf16 job's ranks on the CPU backend (fp32), an fp32 job's on the CUDA backend (bf16 mixed
// precision, which --device cuda asks for): how many, and the first one's rank, label and
// reason. Empty when every rank whose device is known computes the job's precision. labels[r]
// names rank r; a rank whose device is not known is left out of the count.
std::string precision_note(placement::Precision precision,
                           const std::vector<std::optional<StageDevice>>& devices,
                           const std::vector<std::string>& labels);

}  // namespace tessel::launcher
