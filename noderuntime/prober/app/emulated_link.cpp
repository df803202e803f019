#include "noderuntime/prober/app/emulated_link.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "placement/limits.h"

namespace tessel::prober {
namespace {

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::optional<double> parse_number(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace

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
  const std::optional<double> gbps = parse_number(gbps_text);
  if (!gbps || *gbps < 0 || (*gbps > 0 && *gbps < placement::kMinBandwidthGbps) ||
      *gbps > placement::kMaxBandwidthGbps) {
    throw std::invalid_argument(what + ": GBPS '" + gbps_text +
                                "' is not 0 (unlimited) or a rate in " +
                                number_text(placement::kMinBandwidthGbps) + ".." +
                                number_text(placement::kMaxBandwidthGbps) + " Gbit/s");
  }
  const std::optional<double> ms = parse_number(ms_text);
  if (!ms || *ms < 0 || *ms > placement::kMaxLatencyMs) {
    throw std::invalid_argument(what + ": MS '" + ms_text + "' is not a delay in 0.." +
                                number_text(placement::kMaxLatencyMs) + " ms");
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
