#include "noderuntime/launcher/stage_devices.h"

#include <fstream>

namespace tessel::launcher {
namespace {

// The device line is the first a rank writes; a log is read no further than this for it.
constexpr std::streamsize kDeviceLineSearchBytes = 64 * 1024;

}  // namespace

std::optional<StageDevice> device_of_log(const std::string& log_path) {
  std::ifstream in(log_path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string head(static_cast<size_t>(kDeviceLineSearchBytes), '\0');
  in.read(head.data(), kDeviceLineSearchBytes);
  head.resize(static_cast<size_t>(in.gcount()));
  size_t start = 0;
  while (start < head.size()) {
    const size_t end = head.find('\n', start);
    if (end == std::string::npos) break;  // a line still being written
    const std::string line = head.substr(start, end - start);
    start = end + 1;
    // "tessel-stage rank R: device D: reason"
    if (line.rfind("tessel-stage rank ", 0) != 0) continue;
    const size_t device_at = line.find(": device ");
    if (device_at == std::string::npos) continue;
    const size_t name_at = device_at + std::string(": device ").size();
    const size_t reason_at = line.find(": ", name_at);
    if (reason_at == std::string::npos) continue;
    StageDevice device{line.substr(name_at, reason_at - name_at), line.substr(reason_at + 2)};
    if (device.device != "cpu" && device.device != "cuda") continue;
    return device;
  }
  return std::nullopt;
}

std::string precision_note(placement::Precision precision,
                           const std::vector<std::optional<StageDevice>>& devices,
                           const std::vector<std::string>& labels) {
  // The backend whose arithmetic is not the job's, and what it computes instead.
  const bool bf16 = precision == placement::Precision::BF16;
  if (!bf16 && precision != placement::Precision::FP32) return "";
  const std::string other = bf16 ? "cpu" : "cuda";
  const std::string instead = bf16 ? "the CPU backend, which computes it in fp32"
                                   : "the CUDA backend, which computes it in bf16 mixed "
                                     "precision (fp32 master weights)";
  int known = 0;
  std::vector<size_t> mismatched;
  for (size_t r = 0; r < devices.size(); ++r) {
    if (!devices[r]) continue;
    ++known;
    if (devices[r]->device == other) mismatched.push_back(r);
  }
  if (mismatched.empty()) return "";
  const size_t first = mismatched.front();
  const bool all = mismatched.size() == static_cast<size_t>(known);
  const std::string who =
      all && known == 1 ? "its rank runs"
      : all             ? "all " + std::to_string(known) + " ranks run"
            : std::to_string(mismatched.size()) + " of " + std::to_string(known) + " ranks run";
  std::string label = "rank " + std::to_string(first);
  if (first < labels.size()) label += ", " + labels[first];
  return std::string("the job's precision is ") + placement::to_string(precision) + ", but " + who +
         " on " + instead + " (" + label + ": " + devices[first]->reason + ")";
}

}  // namespace tessel::launcher
