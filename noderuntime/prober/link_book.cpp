#include "noderuntime/prober/link_book.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "noderuntime/prober/probe_error.h"
#include "placement/limits.h"

namespace tessel::prober {
namespace {

std::string option_error(const std::string& field, const std::string& value,
                         const std::string& limit) {
  return "prober link book option " + field + " = " + value + ": " + limit;
}

bool in_cluster(const std::string& peer) { return peer.find('/') == std::string::npos; }

// What the annotation holds when the first `named` of `ordered` are listed by name and the rest
// aggregated per site (a site left with one peer lists it by name).
api::NodeLinks layout(const std::vector<std::pair<std::string, api::LinkMeasurement>>& ordered,
                      size_t named) {
  api::NodeLinks links;
  std::map<std::string, std::vector<size_t>> rest;  // site aggregate -> indexes in `ordered`
  for (size_t i = 0; i < ordered.size(); ++i) {
    if (i < named) {
      links.peers.emplace(ordered[i].first, ordered[i].second);
    } else {
      rest[api::site_aggregate(ordered[i].first)].push_back(i);
    }
  }
  for (const auto& [site, indexes] : rest) {
    if (indexes.size() == 1) {
      links.peers.emplace(ordered[indexes[0]].first, ordered[indexes[0]].second);
      continue;
    }
    std::vector<api::LinkMeasurement> measurements;
    measurements.reserve(indexes.size());
    for (size_t i : indexes) measurements.push_back(ordered[i].second);
    links.peers.emplace(site, api::aggregate_measurements(measurements));
  }
  return links;
}

// Entries when the first `named` of `ordered` are listed by name: those plus one per site of
// the rest.
size_t entries(const std::vector<std::pair<std::string, api::LinkMeasurement>>& ordered,
               size_t named) {
  std::set<std::string> sites;
  for (size_t i = named; i < ordered.size(); ++i) {
    sites.insert(api::site_aggregate(ordered[i].first));
  }
  return named + sites.size();
}

// Whether `now` moved by a material amount from `was`.
bool moved(double was, double now, double relative, double floor) {
  const double change = std::abs(now - was);
  return change > 0 && change >= relative * std::abs(was) && change >= floor;
}

}  // namespace

void check_link_book_options(const LinkBookOptions& options) {
  const auto number = [](double x) { return placement::number_text(x); };
  for (const auto& [field, interval] : {std::pair{"peer_ttl", options.peer_ttl},
                                        std::pair{"republish_after", options.republish_after}}) {
    if (interval.count() < 1 || interval > kMaxPeerTtl) {
      throw ProbeError(
          option_error(field, std::to_string(interval.count()) + " s",
                       "must be 1 s to " + std::to_string(kMaxPeerTtl.count()) + " s"));
    }
  }
  if (options.max_failures < 1 || options.max_failures > kMaxFailuresLimit) {
    throw ProbeError(option_error("max_failures", std::to_string(options.max_failures),
                                  "must be 1 to " + std::to_string(kMaxFailuresLimit)));
  }
  if (options.max_listed_peers < 1 || options.max_listed_peers > kMaxListedPeers) {
    throw ProbeError(option_error("max_listed_peers", std::to_string(options.max_listed_peers),
                                  "must be 1 to " + std::to_string(kMaxListedPeers)));
  }
  if (!(options.material_change >= 0 && options.material_change <= 1)) {
    throw ProbeError(
        option_error("material_change", number(options.material_change), "must be in [0, 1]"));
  }
  if (!(options.rtt_floor_ms >= 0 && options.rtt_floor_ms <= placement::kMaxLatencyMs)) {
    throw ProbeError(option_error("rtt_floor_ms", number(options.rtt_floor_ms),
                                  "must be in [0, " + number(placement::kMaxLatencyMs) + "] ms"));
  }
}

LinkBook::LinkBook(LinkBookOptions options) : options_(options) {
  check_link_book_options(options_);
}

void LinkBook::set_peers(const std::vector<std::string>& peers) {
  const std::set<std::string> wanted(peers.begin(), peers.end());
  std::erase_if(peers_, [&](const auto& entry) { return !wanted.contains(entry.first); });
  for (const std::string& name : wanted) peers_.try_emplace(name);
}

void LinkBook::record_full(const std::string& peer, const api::LinkMeasurement& m,
                           SteadyClock::time_point now) {
  if (!api::parse_measured_at(m.measured_at)) {  // aggregates need its time
    throw ProbeError("prober link book: the measurement of " + peer + " has measured_at \"" +
                     m.measured_at + "\", not an RFC 3339 time");
  }
  const auto found = peers_.find(peer);
  if (found == peers_.end()) return;
  found->second.measurement = m;
  found->second.alive_at = now;
  found->second.failures = 0;
}

void LinkBook::record_check(const std::string& peer, SteadyClock::time_point now) {
  const auto found = peers_.find(peer);
  if (found == peers_.end()) return;
  found->second.alive_at = now;
  found->second.failures = 0;
}

void LinkBook::record_failure(const std::string& peer, SteadyClock::time_point) {
  const auto found = peers_.find(peer);
  if (found == peers_.end()) return;
  ++found->second.failures;
}

bool LinkBook::listed(const Peer& peer, SteadyClock::time_point now) const {
  return peer.measurement && peer.alive_at && now - *peer.alive_at < options_.peer_ttl &&
         peer.failures < options_.max_failures;
}

api::NodeLinks LinkBook::links(SteadyClock::time_point now) const {
  // This cluster's peers first, then the others; by name within each (the map's order).
  std::vector<std::pair<std::string, api::LinkMeasurement>> ordered;
  for (bool own_cluster : {true, false}) {
    for (const auto& [name, peer] : peers_) {
      if (in_cluster(name) == own_cluster && listed(peer, now)) {
        ordered.emplace_back(name, *peer.measurement);
      }
    }
  }
  // The most peers listed by name that keeps the entries within max_listed_peers (entries
  // grow with `named`: naming one more peer removes at most one aggregate).
  size_t named = std::min(ordered.size(), options_.max_listed_peers);
  while (named > 0 && entries(ordered, named) > options_.max_listed_peers) --named;
  api::NodeLinks links = layout(ordered, named);
  // Long names or long numbers: fewer by name, then fewer sites, until the annotation fits.
  for (size_t size;
       (size = api::format_node_links(links).size()) > api::kMaxLinksAnnotationBytes;) {
    if (named > 0) {
      // In proportion to the excess (aggregates are about as long as the peers they replace).
      named = std::min(named - 1, named * api::kMaxLinksAnnotationBytes / size);
      links = layout(ordered, named);
    } else {
      links.peers.erase(std::prev(links.peers.end()));
    }
  }
  while (links.peers.size() > options_.max_listed_peers) {  // more sites than entries
    links.peers.erase(std::prev(links.peers.end()));
  }
  return links;
}

bool LinkBook::should_publish(const std::optional<api::NodeLinks>& published,
                              SteadyClock::time_point published_at, const api::NodeLinks& candidate,
                              SteadyClock::time_point now) const {
  if (!published) return true;
  if (now - published_at >= options_.republish_after) return true;
  if (published->peers.size() != candidate.peers.size()) return true;
  for (const auto& [name, m] : candidate.peers) {
    const auto was = published->peers.find(name);
    if (was == published->peers.end()) return true;  // the peer set changed
    const api::LinkMeasurement& old = was->second;
    const double relative = options_.material_change;
    if (moved(old.rtt_p50_ms, m.rtt_p50_ms, relative, options_.rtt_floor_ms) ||
        moved(old.rtt_p90_ms, m.rtt_p90_ms, relative, options_.rtt_floor_ms) ||
        moved(old.small_gbps, m.small_gbps, relative, 0) ||
        moved(old.bulk_gbps, m.bulk_gbps, relative, 0)) {
      return true;
    }
  }
  return false;
}

}  // namespace tessel::prober
