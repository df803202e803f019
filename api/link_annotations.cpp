#include "api/link_annotations.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>

#include "api/manifest_error.h"
#include "api/manifest_text.h"
#include "placement/limits.h"
#include "placement/tcp_link_rate.h"

namespace tessel::api {
namespace {

using nlohmann::json;

const std::string kField = std::string("metadata.annotations[") + kLinksAnnotation + "]";

// A [first, second] pair of numbers, or an error (once per pair).
bool read_pair(const json& pair, double& first, double& second, const std::string& field,
               std::vector<FieldError>& errors) {
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_number()) {
    errors.push_back({field, "must be a list of two numbers, got " + describe_json_value(pair)});
    return false;
  }
  first = pair[0].get<double>();
  second = pair[1].get<double>();
  return true;
}

// What is wrong with a peer name in the annotation of `node` ("<node>" or "<cluster>/<node>");
// empty when nothing. A peer is "<node>", "<cluster>/<node>", "*" or "<cluster>/*".
std::string peer_name_error(const std::string& peer, const std::string& node) {
  const size_t slash = peer.find('/');
  const std::string cluster = slash == std::string::npos ? "" : peer.substr(0, slash);
  const std::string rest = slash == std::string::npos ? peer : peer.substr(slash + 1);
  const size_t node_slash = node.find('/');
  if (rest == "*") {
    if (slash == std::string::npos) return "";
    if (!is_dns_subdomain(cluster)) return "not a cluster name before \"/*\"";
    if (node_slash != std::string::npos && cluster == node.substr(0, node_slash)) {
      return "aggregates the annotated node's own cluster: its aggregate is written \"*\"";
    }
    return "";
  }
  if (peer.find('*') != std::string::npos) {
    return "'*' stands only for a whole site: \"*\" (the rest of the node's own cluster) or "
           "\"<cluster>/*\" (the rest of that cluster)";
  }
  if (!is_dns_subdomain(rest) || (slash != std::string::npos && !is_dns_subdomain(cluster))) {
    return "not a node name or <cluster>/<node>";
  }
  // A peer of the same cluster is named by its node name alone.
  if (peer == node || (node_slash != std::string::npos && peer == node.substr(node_slash + 1))) {
    return "is the annotated node itself: a node has no link to itself";
  }
  return "";
}

// The median of `values` (not empty): of an even count, the mean of the two middle ones.
double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

std::optional<std::chrono::sys_seconds> parse_measured_at(const std::string& text) {
  if (text.size() > 64) return std::nullopt;
  static const std::regex rfc3339(
      "(\\d{4})-(\\d{2})-(\\d{2})[Tt](\\d{2}):(\\d{2}):(\\d{2})(\\.\\d{1,9})?"
      "([Zz]|([+-])(\\d{2}):(\\d{2}))");
  std::smatch m;
  if (!std::regex_match(text, m, rfc3339)) return std::nullopt;
  const auto number = [&](int group) { return std::stoi(m[group].str()); };
  using namespace std::chrono;
  const year_month_day date{year{number(1)}, month{static_cast<unsigned>(number(2))},
                            day{static_cast<unsigned>(number(3))}};
  const int hour = number(4), minute = number(5), second = number(6);
  if (!date.ok() || hour > 23 || minute > 59 || second > 60)
    return std::nullopt;  // 60: a leap second
  sys_seconds time = sys_days{date} + hours{hour} + minutes{minute} + seconds{second};
  if (m[9].matched) {
    const int offset_hours = number(10), offset_minutes = number(11);
    if (offset_hours > 23 || offset_minutes > 59) return std::nullopt;
    const seconds offset = hours{offset_hours} + minutes{offset_minutes};
    time -= m[9].str() == "+" ? offset : -offset;  // 01:00+01:00 is 00:00Z
  }
  return time;
}

NodeLinks parse_node_links(const std::string& value, const std::string& node) {
  const json document = parse_json_object(value, kMaxLinksAnnotationBytes, kField, node);
  const json& version = field_of(document, "version");
  if (version != 1) {
    throw ManifestError(node,
                        {{kField + ".version", "must be 1, got " + describe_json_value(version)}});
  }
  const json& peers = field_of(document, "peers");
  if (!peers.is_object()) {
    throw ManifestError(
        node, {{kField + ".peers", "must be an object, got " + describe_json_value(peers)}});
  }
  if (peers.size() > static_cast<size_t>(placement::kMaxDevices)) {
    throw ManifestError(node, {{kField + ".peers", "lists " + std::to_string(peers.size()) +
                                                       " peers, more than the limit of " +
                                                       std::to_string(placement::kMaxDevices)}});
  }
  std::vector<FieldError> errors;
  size_t unreported = 0;
  NodeLinks links;
  const double max_rtt_ms = 2 * placement::kMaxLatencyMs;
  for (const auto& [peer, entry] : peers.items()) {
    if (errors.size() >= kMaxReportedFieldErrors) {
      ++unreported;
      continue;
    }
    const std::string at = kField + ".peers[" + shown_text(peer) + "]";
    if (const std::string why = peer_name_error(peer, node); !why.empty()) {
      errors.push_back({at, why});
      continue;
    }
    if (!entry.is_object()) {
      errors.push_back({at, "must be an object, got " + describe_json_value(entry)});
      continue;
    }
    add_unknown_field_errors(entry, {"rttMs", "gbps", "streams", "at"}, at, errors);
    LinkMeasurement m;
    const json &rtt = field_of(entry, "rttMs"), &gbps = field_of(entry, "gbps");
    const auto in_range = [&](double x, double lo, double hi, const std::string& field,
                              const std::string& unit) {
      if (!(x >= lo && x <= hi)) {
        errors.push_back({field, "must be in [" + placement::number_text(lo) + ", " +
                                     placement::number_text(hi) + "] " + unit + ", got " +
                                     placement::number_text(x)});
      }
    };
    if (read_pair(rtt, m.rtt_p50_ms, m.rtt_p90_ms, at + ".rttMs", errors)) {
      in_range(m.rtt_p50_ms, 0, max_rtt_ms, at + ".rttMs[0]", "ms");
      in_range(m.rtt_p90_ms, m.rtt_p50_ms, max_rtt_ms, at + ".rttMs[1]", "ms (and >= the median)");
    }
    if (read_pair(gbps, m.small_gbps, m.bulk_gbps, at + ".gbps", errors)) {
      in_range(m.small_gbps, placement::kMinBandwidthGbps, placement::kMaxBandwidthGbps,
               at + ".gbps[0]", "Gbit/s");
      in_range(m.bulk_gbps, placement::kMinBandwidthGbps, placement::kMaxBandwidthGbps,
               at + ".gbps[1]", "Gbit/s");
    }
    if (entry.contains("streams")) {
      double count = 0;
      if (read_pair(entry.at("streams"), count, m.stream_gbps, at + ".streams", errors)) {
        if (!(count >= 2 && count <= placement::kMaxTcpStreamsPerLink) ||
            count != std::floor(count)) {
          errors.push_back({at + ".streams[0]",
                            "must be a whole number of TCP streams in [2, " +
                                std::to_string(placement::kMaxTcpStreamsPerLink) +
                                "] (one stream is written without \"streams\"), got " +
                                placement::number_text(count)});
        } else {
          m.streams = static_cast<int>(count);
        }
        in_range(m.stream_gbps, placement::kMinBandwidthGbps, placement::kMaxBandwidthGbps,
                 at + ".streams[1]", "Gbit/s");
      }
    }
    const json& when = field_of(entry, "at");
    if (!when.is_string() || !parse_measured_at(when.get<std::string>())) {
      errors.push_back({at + ".at", "must be an RFC 3339 time (\"2026-11-26T00:12:03Z\"), got " +
                                        describe_json_value(when)});
    } else {
      m.measured_at = when.get<std::string>();
    }
    links.peers[peer] = m;
  }
  if (unreported > 0) {
    errors.push_back({kField + ".peers", "and " + std::to_string(unreported) +
                                             " more peers not checked after " +
                                             std::to_string(kMaxReportedFieldErrors) + " errors"});
  }
  if (!errors.empty()) throw ManifestError(node, errors);
  return links;
}

double significant(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*g", kSignificantDigits, value);
  return std::strtod(text, nullptr);
}

std::string format_node_links(const NodeLinks& links) {
  json peers = json::object();
  for (const auto& [peer, m] : links.peers) {
    peers[peer] = {{"rttMs", {significant(m.rtt_p50_ms), significant(m.rtt_p90_ms)}},
                   {"gbps", {significant(m.small_gbps), significant(m.bulk_gbps)}},
                   {"at", m.measured_at}};
    if (m.streams > 1) peers[peer]["streams"] = {m.streams, significant(m.stream_gbps)};
  }
  return json{{"version", 1}, {"peers", peers}}.dump();
}

bool is_aggregate(const std::string& peer) { return peer == "*" || peer.ends_with("/*"); }

std::string site_aggregate(const std::string& peer) {
  const size_t slash = peer.find('/');
  return slash == std::string::npos ? "*" : peer.substr(0, slash) + "/*";
}

LinkMeasurement aggregate_measurements(const std::vector<LinkMeasurement>& measurements) {
  if (measurements.empty()) {
    throw std::invalid_argument("an aggregate link measurement needs at least one measurement");
  }
  const auto field = [&](double LinkMeasurement::*member) {
    std::vector<double> values;
    values.reserve(measurements.size());
    for (const LinkMeasurement& m : measurements) values.push_back(m.*member);
    return significant(median(std::move(values)));  // no more precise than what it stands for
  };
  LinkMeasurement out;
  out.rtt_p50_ms = field(&LinkMeasurement::rtt_p50_ms);
  out.rtt_p90_ms = field(&LinkMeasurement::rtt_p90_ms);  // >= the median of the medians
  out.small_gbps = field(&LinkMeasurement::small_gbps);
  out.bulk_gbps = field(&LinkMeasurement::bulk_gbps);
  // Streams: a one-stream measurement's stream rate is its bulk rate.
  std::vector<double> counts, stream_rates;
  for (const LinkMeasurement& m : measurements) {
    counts.push_back(m.streams);
    stream_rates.push_back(m.streams > 1 ? m.stream_gbps : m.bulk_gbps);
  }
  out.streams = static_cast<int>(std::floor(median(std::move(counts))));
  out.stream_gbps = out.streams > 1 ? significant(median(std::move(stream_rates))) : 0;
  std::optional<std::chrono::sys_seconds> oldest;
  for (const LinkMeasurement& m : measurements) {
    const auto at = parse_measured_at(m.measured_at);
    if (!at) {
      throw std::invalid_argument("link measurement time \"" + shown_text(m.measured_at) +
                                  "\" is not an RFC 3339 time");
    }
    if (!oldest || *at < *oldest) {
      oldest = at;
      out.measured_at = m.measured_at;
    }
  }
  return out;
}

}  // namespace tessel::api
