#include "placement/data_parallel_choice.h"

#include <cstdio>

namespace tessel::placement {

namespace {

// "H=50: given (spec.dataParallel.syncEvery)", or "H=50: given" with no field.
std::string given(const std::string& value, const std::string& field) {
  return value + ": given" + (field.empty() ? "" : " (" + field + ")");
}

}  // namespace

DataParallelChoice choose_data_parallel(const DataParallelMode& mode, const ScheduleSpec& spec,
                                        const PipelineTiming& timing,
                                        const std::string& sync_every_field,
                                        const std::string& delta_bits_field) {
  DataParallelChoice out;
  out.mode = mode;
  out.mode.choose_sync_every = false;
  out.mode.choose_delta_bits = false;
  if (!mode.low_communication()) return out;
  if (mode.choose_sync_every) {
    out.sync_every = choose_sync_every(spec, timing, mode.sync_overhead);
    out.mode.sync_every = out.sync_every->sync_every;
    out.sync_every_reason = sync_every_reason(*out.sync_every);
  } else {
    out.sync_every_reason = given("H=" + std::to_string(mode.sync_every), sync_every_field);
  }
  if (mode.choose_delta_bits) {
    out.delta_bits = choose_delta_bits();
    out.mode.delta_bits = out.delta_bits->bits;
    out.delta_bits_reason = delta_bits_reason(*out.delta_bits);
  } else {
    out.delta_bits_reason =
        given(std::to_string(mode.delta_bits) + "-bit deltas", delta_bits_field);
  }
  return out;
}

std::string data_parallel_name(const DataParallelMode& m) {
  if (!m.low_communication()) return "synchronous";
  char text[96];
  std::snprintf(text, sizeof text, "low-communication H=%d %d-bit%s", m.sync_every, m.delta_bits,
                m.delayed ? "" : " blocking");
  return text;
}

}  // namespace tessel::placement
