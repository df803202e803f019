#include "placement/data_parallel_mode.h"

#include <stdexcept>

#include "placement/limits.h"
#include "placement/workload.h"

namespace tessel::placement {

const char* to_string(DataParallelKind kind) {
  return kind == DataParallelKind::LowCommunication ? "low-communication" : "synchronous";
}

DataParallelKind parse_data_parallel_kind(const std::string& text) {
  if (text == "synchronous") return DataParallelKind::Synchronous;
  if (text == "low-communication") return DataParallelKind::LowCommunication;
  throw WorkloadError("must be \"synchronous\" or \"low-communication\", got \"" + text + "\"");
}

void DataParallelMode::validate(const std::string& source) const {
  if (!low_communication()) return;
  if (!(sync_overhead > 0 && sync_overhead <= kMaxSyncOverhead))
    throw WorkloadError(source + ": data_parallel.sync_overhead: must be in (0, " +
                        number_text(kMaxSyncOverhead) + "] (a fraction of the inner step), got " +
                        number_text(sync_overhead));
  if (!choose_sync_every && sync_overhead != kDefaultSyncOverhead)
    throw WorkloadError(source +
                        ": data_parallel.sync_overhead: applies only when sync_every is auto");
  if (sync_every < 1 || sync_every > kMaxSyncEvery)
    throw WorkloadError(source + ": data_parallel.sync_every: must be in [1, " +
                        std::to_string(kMaxSyncEvery) + "], got " + std::to_string(sync_every));
  if (delta_bits != 32 && delta_bits != 8 && delta_bits != 4)
    throw WorkloadError(source + ": data_parallel.delta_bits: must be 32, 8 or 4, got " +
                        std::to_string(delta_bits));
}

double delta_encoding_bytes(int64_t parameters, int bits) {
  constexpr int64_t kBlock = 128;  // noderuntime/stage/delta_codec.h kDeltaBlock
  const int64_t n = parameters;
  int64_t bytes = 0;
  switch (bits) {
    case 32:
      return 4.0 * double(n);
    case 8:
      bytes = n;
      break;
    case 4:
      bytes = (n + 1) / 2;
      break;
    default:
      throw std::invalid_argument("delta_bits must be 32, 8 or 4, got " + std::to_string(bits));
  }
  const int64_t scales = 4 * ((n + kBlock - 1) / kBlock);
  return 4.0 * double((scales + bytes + 3) / 4);
}

}  // namespace tessel::placement
