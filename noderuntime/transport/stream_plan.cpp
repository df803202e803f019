#include "noderuntime/transport/stream_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "noderuntime/transport/transport_error.h"
#include "placement/tcp_link_rate.h"

namespace tessel::transport {
namespace {

void read_sysctl(const char* path, uint64_t& value) {
  std::ifstream in(path);
  uint64_t read = 0;
  if (in >> read && read > 0) value = read;
}

void check_rate(const char* field, double value) {
  if (!std::isfinite(value) || value < 0) {
    throw TransportError(std::string("stream plan: ") + field + " " + std::to_string(value) +
                         " must be finite and >= 0");
  }
}

std::string megabytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

}  // namespace

SocketBufferLimits read_socket_buffer_limits() {
  SocketBufferLimits limits;
  read_sysctl("/proc/sys/net/core/wmem_max", limits.wmem_max);
  read_sysctl("/proc/sys/net/core/rmem_max", limits.rmem_max);
  return limits;
}

bool read_slow_start_after_idle() {
  uint64_t value = 1;
  std::ifstream in("/proc/sys/net/ipv4/tcp_slow_start_after_idle");
  in >> value;
  return value != 0;
}

StreamPlan plan_link_streams(double capacity_bytes_per_s, double rtt_s, int configured_streams,
                             const SocketBufferLimits& limits, int max_streams) {
  check_rate("capacity", capacity_bytes_per_s);
  check_rate("rtt", rtt_s);
  if (max_streams < 1 || max_streams > kMaxStreamsPerLink) {
    throw TransportError("stream plan: max streams " + std::to_string(max_streams) +
                         " outside [1, " + std::to_string(kMaxStreamsPerLink) + "]");
  }
  if (configured_streams < 0 || configured_streams > max_streams) {
    throw TransportError("stream plan: streams per link " + std::to_string(configured_streams) +
                         " outside [1, " + std::to_string(max_streams) + "] (0 chooses)");
  }
  StreamPlan plan;
  plan.bdp_bytes = capacity_bytes_per_s * rtt_s;
  const uint64_t cap = std::min(limits.wmem_max, limits.rmem_max);
  if (plan.bdp_bytes <= static_cast<double>(kAutotunedWindowBytes)) {
    plan.streams = configured_streams > 0 ? configured_streams : 1;
    return plan;
  }
  plan.streams =
      configured_streams > 0
          ? configured_streams
          : placement::streams_to_fill(plan.bdp_bytes, static_cast<double>(cap), max_streams);
  const double share = plan.bdp_bytes / plan.streams * kBufferHeadroom;
  plan.buffer_bytes = std::min<uint64_t>(cap, static_cast<uint64_t>(std::ceil(share)));
  if (plan.bdp_bytes > static_cast<double>(cap)) {
    plan.capped_by = limits.wmem_max <= limits.rmem_max ? "net.core.wmem_max" : "net.core.rmem_max";
  }
  // The usable window of a buffer request of v is about v (see the top of stream_plan.h).
  plan.window_bound_bytes_per_s =
      rtt_s > 0 ? plan.streams * static_cast<double>(plan.buffer_bytes) / rtt_s : 0;
  return plan;
}

std::string describe(const StreamPlan& plan) {
  std::string out = std::to_string(plan.streams) + (plan.streams == 1 ? " stream" : " streams");
  out += plan.buffer_bytes ? ", buffers " + megabytes(static_cast<double>(plan.buffer_bytes))
                           : ", kernel-tuned buffers";
  if (plan.bdp_bytes > 0) {
    out += " (BDP " + megabytes(plan.bdp_bytes);
    if (!plan.capped_by.empty()) out += "; " + plan.capped_by + " caps one stream below it";
    out += ")";
  }
  return out;
}

}  // namespace tessel::transport
