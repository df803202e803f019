#include "noderuntime/prober/app/emulated_link.h"

#include <optional>
#include <stdexcept>

#include "noderuntime/prober/app/flag_number.h"
#include "placement/limits.h"

namespace tessel::prober {

EmulatedLink parse_emulated_link(const std::string& text) {
  const std::string what = "--emulate-link: '" + text + "'";
  const auto equals = text.rfind('=');
  const auto slash = text.rfind('/');
  if (equals == std::string::npos || slash == std::string::npos || slash < equals) {
    throw std::invalid_argument(what + " is not PREFIX=GBPS/MS (e.g. member-b/=0.2/40)");
  }
  EmulatedLink link;
  link.prefix = text.substr(0, equals);
  const std::string gbps_text = text.substr(equals + 1, slash - equals - 1);
  const std::string ms_text = text.substr(slash + 1);
  const std::optional<double> gbps = parse_flag_number(gbps_text);
  if (!gbps || *gbps < 0 || (*gbps > 0 && *gbps < placement::kMinBandwidthGbps) ||
      *gbps > placement::kMaxBandwidthGbps) {
    throw std::invalid_argument(what + ": GBPS '" + gbps_text +
                                "' is not 0 (unlimited) or a rate in " +
                                placement::number_text(placement::kMinBandwidthGbps) + ".." +
                                placement::number_text(placement::kMaxBandwidthGbps) + " Gbit/s");
  }
  const std::optional<double> ms = parse_flag_number(ms_text);
  if (!ms || *ms < 0 || *ms > placement::kMaxLatencyMs) {
    throw std::invalid_argument(what + ": MS '" + ms_text + "' is not a delay in 0.." +
                                placement::number_text(placement::kMaxLatencyMs) + " ms");
  }
  link.shape.bytes_per_s = *gbps * 1e9 / 8;
  link.shape.latency_s = *ms / 1e3;
  return link;
}

transport::LinkShape emulated_shape(const std::vector<EmulatedLink>& links,
                                    const std::string& peer) {
  const EmulatedLink* best = nullptr;
  for (const EmulatedLink& link : links) {
    if (peer.compare(0, link.prefix.size(), link.prefix) == 0 &&
        (best == nullptr || link.prefix.size() > best->prefix.size())) {
      best = &link;
    }
  }
  return best == nullptr ? transport::LinkShape{} : best->shape;
}

}  // namespace tessel::prober
