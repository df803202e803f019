#include "noderuntime/prober/probe_schedule.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "noderuntime/prober/probe_channel.h"
#include "noderuntime/prober/probe_error.h"
#include "placement/limits.h"

namespace tessel::prober {
namespace {

std::string option_error(const std::string& field, const std::string& value,
                         const std::string& limit) {
  return "prober schedule option " + field + " = " + value + ": " + limit;
}

std::string seconds_text(std::chrono::seconds s) { return std::to_string(s.count()) + " s"; }

// Bytes the budget allows per hour at `gbps`.
uint64_t hourly_bytes(double budget_fraction, double gbps) {
  const double bytes =
      budget_fraction * gbps * 1e9 / 8 * std::chrono::duration<double>(kBudgetWindow).count();
  return bytes <= 0 ? 0 : static_cast<uint64_t>(std::min(bytes, 1e18));
}

}  // namespace

const char* probe_kind_name(ProbeKind kind) { return kind == ProbeKind::kFull ? "full" : "check"; }

void check_schedule_options(const ScheduleOptions& options) {
  const auto number = [](double x) { return placement::number_text(x); };
  if (!(options.budget_fraction > 0 && options.budget_fraction <= kMaxBudgetFraction)) {
    throw ProbeError(option_error("budget_fraction", number(options.budget_fraction),
                                  "must be in (0, " + number(kMaxBudgetFraction) + "]"));
  }
  for (const auto& [field, interval] :
       {std::pair{"check_interval", options.check_interval},
        std::pair{"refresh_interval", options.refresh_interval},
        std::pair{"min_full_interval", options.min_full_interval}}) {
    if (interval.count() < 1 || interval > kMaxScheduleInterval) {
      throw ProbeError(option_error(field, seconds_text(interval),
                                    "must be 1 s to " + seconds_text(kMaxScheduleInterval)));
    }
  }
  if (options.refresh_interval < options.check_interval) {
    throw ProbeError(option_error(
        "refresh_interval", seconds_text(options.refresh_interval),
        "must be at least check_interval (" + seconds_text(options.check_interval) + ")"));
  }
  if (options.min_full_interval > options.refresh_interval) {
    throw ProbeError(option_error(
        "min_full_interval", seconds_text(options.min_full_interval),
        "must be at most refresh_interval (" + seconds_text(options.refresh_interval) + ")"));
  }
  if (!(options.drift_threshold > 0 && options.drift_threshold <= kMaxDriftThreshold)) {
    throw ProbeError(option_error("drift_threshold", number(options.drift_threshold),
                                  "must be in (0, " + number(kMaxDriftThreshold) + "]"));
  }
  if (!(options.jitter >= 0 && options.jitter <= kMaxJitter)) {
    throw ProbeError(option_error("jitter", number(options.jitter),
                                  "must be in [0, " + number(kMaxJitter) + "]"));
  }
}

ProbeSchedule::ProbeSchedule(ScheduleOptions options, ProbeOptions probe)
    : options_(options), probe_(std::move(probe)) {
  check_schedule_options(options_);
  check_probe_options(probe_);
  full_min_bytes_ = fixed_probe_bytes(probe_) + kFrameHeaderBytes + probe_.bulk_message_bytes;
  check_bytes_ = round_trip_probe_bytes(probe_);
  const double checks_per_window = std::ceil(
      std::chrono::duration<double>(kBudgetWindow).count() /
      (std::chrono::duration<double>(options_.check_interval).count() * (1 - options_.jitter)));
  check_reserve_ = static_cast<uint64_t>(checks_per_window) * check_bytes_;
  if (options_.first_probe_max_bytes < full_min_bytes_) {
    throw ProbeError(option_error("first_probe_max_bytes",
                                  std::to_string(options_.first_probe_max_bytes),
                                  "must be at least " + std::to_string(full_min_bytes_) +
                                      " (the probe's pings, small messages and one bulk message)"));
  }
  random_.seed(options_.seed != 0 ? options_.seed : std::random_device{}());
}

SteadyClock::duration ProbeSchedule::jittered(std::chrono::seconds interval) {
  std::uniform_real_distribution<double> factor(1 - options_.jitter, 1 + options_.jitter);
  return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(interval) *
                                                           factor(random_));
}

void ProbeSchedule::set_peers(const std::vector<std::string>& peers, SteadyClock::time_point now) {
  latest_ = std::max(latest_, now);
  const std::set<std::string> wanted(peers.begin(), peers.end());
  std::erase_if(peers_, [&](const auto& entry) { return !wanted.contains(entry.first); });
  for (const std::string& name : wanted) {
    if (peers_.contains(name)) continue;
    Peer peer;
    peer.order = random_();
    peer.full_due = peer.check_due = peer.not_before = now;
    peers_.emplace(name, std::move(peer));
  }
}

std::pair<SteadyClock::time_point, uint64_t> ProbeSchedule::budget_time(
    const Peer& peer, uint64_t budget, uint64_t need, SteadyClock::time_point from) const {
  // Bytes still in the window at `from`; each entry leaves it kBudgetWindow after it was sent.
  auto it = peer.sent.begin();
  while (it != peer.sent.end() && it->first + kBudgetWindow <= from) ++it;
  uint64_t in_window = 0;
  for (auto rest = it; rest != peer.sent.end(); ++rest) in_window += rest->second;
  SteadyClock::time_point at = from;
  while (in_window > budget || budget - in_window < need) {
    if (it == peer.sent.end()) return {SteadyClock::time_point::max(), 0};  // never enough
    at = it->first + kBudgetWindow;
    in_window -= it->second;
    ++it;
  }
  return {at, budget - in_window};
}

std::optional<ProbeSchedule::Plan> ProbeSchedule::plan_for(const std::string& name,
                                                           const Peer& peer) const {
  // Not clamped to latest_ here: next() orders the overdue by when they were due.
  const SteadyClock::time_point earliest = peer.not_before;
  if (!peer.bulk_gbps) {  // rate unknown: a first full probe, nothing else
    return Plan{
        std::max(earliest, peer.full_due),
        {name, ProbeKind::kFull, std::min(options_.first_probe_max_bytes, probe_.max_bytes)}};
  }
  const uint64_t budget = hourly_bytes(options_.budget_fraction, *peer.bulk_gbps);
  SteadyClock::time_point full_from = std::max(earliest, peer.full_due);
  if (peer.last_full) full_from = std::max(full_from, *peer.last_full + options_.min_full_interval);
  const auto [full_at, allowance] =
      budget_time(peer, budget, full_min_bytes_ + check_reserve_, full_from);
  const auto [check_at, unused] =
      budget_time(peer, budget, check_bytes_, std::max(earliest, peer.check_due));
  if (full_at == SteadyClock::time_point::max() && check_at == SteadyClock::time_point::max()) {
    return std::nullopt;  // the budget covers not even a check
  }
  if (full_at <= check_at) {  // a full probe measures the RTT too
    return Plan{full_at,
                {name, ProbeKind::kFull, std::min(probe_.max_bytes, allowance - check_reserve_)}};
  }
  return Plan{check_at, {name, ProbeKind::kCheck, check_bytes_}};
}

std::optional<std::pair<SteadyClock::time_point, PlannedProbe>> ProbeSchedule::next() const {
  std::optional<Plan> best;
  uint64_t best_order = 0;
  for (const auto& [name, peer] : peers_) {
    std::optional<Plan> plan = plan_for(name, peer);
    if (!plan) continue;
    if (!best || plan->at < best->at || (plan->at == best->at && peer.order < best_order)) {
      best = std::move(plan);
      best_order = peer.order;
    }
  }
  if (!best) return std::nullopt;
  return std::pair{std::max(best->at, latest_), std::move(best->probe)};
}

void ProbeSchedule::postpone(const std::string& peer, SteadyClock::time_point until) {
  const auto found = peers_.find(peer);
  if (found == peers_.end()) return;
  found->second.not_before = std::max(found->second.not_before, until);
}

void ProbeSchedule::record(const PlannedProbe& probe, SteadyClock::time_point now,
                           const ProbeResult* result) {
  latest_ = std::max(latest_, now);
  const auto found = peers_.find(probe.peer);
  if (found == peers_.end()) return;
  Peer& peer = found->second;
  // A failed probe's bytes are unknown: count all it was allowed.
  peer.sent.emplace_back(now, result ? result->bytes_sent : probe.max_bytes);
  while (!peer.sent.empty() && peer.sent.front().first + kBudgetWindow <= now) {
    peer.sent.pop_front();
  }
  if (probe.kind == ProbeKind::kFull) peer.last_full = now;
  if (!result) {
    ++peer.failures;
    const auto doubled = options_.check_interval * (int64_t{1} << std::min(peer.failures - 1, 30));
    peer.not_before =
        now + jittered(std::min<std::chrono::seconds>(doubled, options_.refresh_interval));
    return;
  }
  peer.failures = 0;
  peer.not_before = now;
  peer.check_due = now + jittered(options_.check_interval);
  const api::LinkMeasurement& m = result->measurement;
  if (probe.kind == ProbeKind::kFull) {
    peer.bulk_gbps = m.bulk_gbps;
    peer.full_rtt_ms = m.rtt_p50_ms;
    peer.full_due = now + jittered(options_.refresh_interval);
    return;
  }
  if (!peer.bulk_gbps) return;  // no full probe yet: no baseline
  const double moved = std::abs(m.rtt_p50_ms - peer.full_rtt_ms);
  if (moved > options_.drift_threshold * peer.full_rtt_ms && moved > kDriftFloorMs) {
    peer.full_due = std::min(peer.full_due, now);
  }
}

uint64_t ProbeSchedule::bytes_last_hour(const std::string& peer,
                                        SteadyClock::time_point now) const {
  const auto found = peers_.find(peer);
  if (found == peers_.end()) return 0;
  uint64_t bytes = 0;
  for (const auto& [at, sent] : found->second.sent) {
    if (at + kBudgetWindow > now && at <= now) bytes += sent;
  }
  return bytes;
}

std::optional<uint64_t> ProbeSchedule::hourly_budget(const std::string& peer) const {
  const auto found = peers_.find(peer);
  if (found == peers_.end() || !found->second.bulk_gbps) return std::nullopt;
  return hourly_bytes(options_.budget_fraction, *found->second.bulk_gbps);
}

}  // namespace tessel::prober
