// When the prober measures which peer, and how much it may send: one probe at a time per node,
// peers in a jittered order, the probe traffic to each peer bounded by a share of that peer's
// measured bulk rate over any hour.
//
// Per peer, two kinds of probe:
//  - a check (measure_round_trips: pings only, a few KiB) every check_interval, jittered: it
//    keeps the peer known alive and detects drift (its RTT median moved from the last full
//    probe's by more than drift_threshold, relative, and by more than kDriftFloorMs): the full
//    probe is then due at once;
//  - a full probe (measure_peer) every refresh_interval, jittered, never two closer than
//    min_full_interval.
// Budget: the bytes sent to a peer in any hour (a sliding window of what record() saw; a failed
// probe counts the max_bytes it was allowed, since what it sent is unknown) stay within
// budget_fraction x the peer's measured bulk rate x 3600 s. A probe is planned only when what
// the window leaves covers it: a check its round_trip_probe_bytes; a full probe at least
// fixed_probe_bytes + one bulk message plus the reserve of an hour's checks (so that a full
// probe never starves them), its max_bytes then the smaller of the probe options' max_bytes
// and what the window leaves beyond the reserve. A peer whose rate is not known yet gets a
// full probe first, with first_probe_max_bytes; its checks start after it. A failed probe backs
// the peer off: check_interval, doubling with each consecutive failure, at most
// refresh_interval. A link whose measured budget cannot cover one full probe (below about
// 1.5 Mbit/s with the default options) keeps its checks but gets no more full probes (its
// measurement goes stale, and the operator estimates it); one whose budget cannot cover a check
// (below about 1 kbit/s) is not probed at all.
//
// Time is the caller's (SteadyClock time points passed in): the schedule never reads a clock
// and never sleeps, so it is tested over a simulated day.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "noderuntime/prober/probe_client.h"

namespace tessel::prober {

using SteadyClock = std::chrono::steady_clock;

// A check's RTT median must move by more than this too (besides drift_threshold) to count as a
// drift: loopback and LAN medians of 0.05 ms jitter by more than 25% between checks.
inline constexpr double kDriftFloorMs = 0.2;
// The window of the probe budget.
inline constexpr std::chrono::seconds kBudgetWindow{3600};

enum class ProbeKind { kFull, kCheck };
const char* probe_kind_name(ProbeKind kind);  // "full", "check"

struct PlannedProbe {
  std::string peer;
  ProbeKind kind = ProbeKind::kFull;
  uint64_t max_bytes = 0;  // what the probe may send (ProbeOptions::max_bytes of a full probe)
  bool operator==(const PlannedProbe&) const = default;
};

struct ScheduleOptions {
  // Probe bytes <= this share of the peer's measured bulk rate, over any hour.
  double budget_fraction = 0.01;
  // RTT-only checks of each peer (drift detection, liveness).
  std::chrono::seconds check_interval{60};
  // A full probe at least this often (budget allowing).
  std::chrono::seconds refresh_interval{1200};
  // Never two full probes of one peer closer than this.
  std::chrono::seconds min_full_interval{120};
  // A check whose RTT median moved by more (and by > kDriftFloorMs): full probe due now.
  double drift_threshold = 0.25;
  // The first full probe of a peer (its rate, hence its budget, not known yet).
  uint64_t first_probe_max_bytes = 64ull << 20;
  // Every interval drawn uniformly in [1 - jitter, 1 + jitter] x its value.
  double jitter = 0.2;
  // Of the jitter and of the order of new peers; 0: random.
  uint64_t seed = 0;
};

// Limits of the options (checked by check_schedule_options).
inline constexpr double kMaxBudgetFraction = 0.5;
inline constexpr std::chrono::seconds kMaxScheduleInterval{24 * 3600};
inline constexpr double kMaxJitter = 0.5;
inline constexpr double kMaxDriftThreshold = 10;

// Throws ProbeError "prober schedule option <name> = <value>: <limit>".
void check_schedule_options(const ScheduleOptions& options);

class ProbeSchedule {
 public:
  // `probe`: the options the probes run with (checked; fixed_probe_bytes, bulk_message_bytes,
  // max_bytes and round_trips size the probes). Throws ProbeError for bad options, and when
  // first_probe_max_bytes cannot cover one full probe.
  ProbeSchedule(ScheduleOptions options, ProbeOptions probe);

  // The peers to probe from now on: new ones are due at `now` (a full probe, in a random
  // order), ones no longer listed are forgotten, the others keep their state.
  void set_peers(const std::vector<std::string>& peers, SteadyClock::time_point now);

  // The next probe (one at a time per node) and when it is due (never before the latest time
  // passed to set_peers, record or postpone); nullopt without peers. The same until one of those
  // is called. When several are overdue (probes that took longer than the intervals), the one
  // due first goes first, so that no peer waits behind others that keep coming due.
  std::optional<std::pair<SteadyClock::time_point, PlannedProbe>> next() const;

  // No probe of `peer` before `until` (a busy peer: neither a failure nor bytes sent). Ignored
  // for a peer not listed.
  void postpone(const std::string& peer, SteadyClock::time_point until);

  // After the probe ran (now: when it ended): `result` (nullptr when it failed) updates the
  // peer's rate, drift, budget window and back-off. A probe of a peer no longer listed is
  // ignored.
  void record(const PlannedProbe& probe, SteadyClock::time_point now, const ProbeResult* result);

  // The bytes recorded for `peer` in the hour up to `now` (0 for an unknown peer).
  uint64_t bytes_last_hour(const std::string& peer, SteadyClock::time_point now) const;

  // What the budget allows `peer` per hour; nullopt while its rate is not known.
  std::optional<uint64_t> hourly_budget(const std::string& peer) const;

 private:
  struct Peer {
    uint64_t order = 0;                // random: breaks ties between peers due at once
    std::optional<double> bulk_gbps;   // of the latest full probe
    double full_rtt_ms = 0;            // its RTT median: the drift baseline
    SteadyClock::time_point full_due;  // refresh or drift
    SteadyClock::time_point check_due;
    std::optional<SteadyClock::time_point> last_full;  // latest full probe, failed or not
    SteadyClock::time_point not_before;                // back-off after failures
    int failures = 0;
    std::deque<std::pair<SteadyClock::time_point, uint64_t>> sent;  // (when, bytes), in order
  };
  struct Plan {
    SteadyClock::time_point at;
    PlannedProbe probe;
  };

  std::optional<Plan> plan_for(const std::string& name, const Peer& peer) const;
  // The earliest time >= from at which the peer's window leaves at least `need` bytes of its
  // budget, and what it leaves then.
  std::pair<SteadyClock::time_point, uint64_t> budget_time(const Peer& peer, uint64_t budget,
                                                           uint64_t need,
                                                           SteadyClock::time_point from) const;
  SteadyClock::duration jittered(std::chrono::seconds interval);

  ScheduleOptions options_;
  ProbeOptions probe_;
  uint64_t full_min_bytes_;  // fixed_probe_bytes + one bulk message
  uint64_t check_bytes_;     // round_trip_probe_bytes
  uint64_t check_reserve_;   // an hour's checks: a full probe leaves room for them
  std::mt19937_64 random_;
  SteadyClock::time_point latest_{};  // the latest time passed in
  std::map<std::string, Peer> peers_;
};

}  // namespace tessel::prober
