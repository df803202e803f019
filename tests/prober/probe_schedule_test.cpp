// The probe schedule over simulated time (no clock, no sleeps): the byte budget holds in every
// hour window over a day, full probes come every refresh_interval where the budget allows,
// checks in between, drift re-probes at once, failures back off, new peers are probed in a
// seeded random order, bad options are refused by name.
#include "noderuntime/prober/probe_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "tests/prober/prober_test_support.h"

namespace tessel::prober {
namespace {

using namespace std::chrono_literals;
using TimePoint = SteadyClock::time_point;

const TimePoint kStart = TimePoint{} + 1000h;

ProbeOptions probe_options() { return probe_options_with("tessel-probe-test-secret-0123456789"); }

ScheduleOptions schedule_options(uint64_t seed = 7) {
  ScheduleOptions options;
  options.seed = seed;
  return options;
}

// A peer's link as the fake measure sees it.
struct FakeLink {
  double gbps = 1;
  double rtt_ms = 1;
  bool fails = false;
};

// What measure_peer / measure_round_trips would send and report over `link`: the pings, the
// small messages, then bulk messages for bulk_duration or until max_bytes would be exceeded
// (at least one), as probe_client.cpp sends them.
struct FakeRun {
  ProbeResult result;
  SteadyClock::duration took;
};

FakeRun fake_measure(const PlannedProbe& probe, const FakeLink& link, const ProbeOptions& options) {
  const double bytes_per_s = link.gbps * 1e9 / 8;
  const int pings =
      probe.kind == ProbeKind::kCheck ? options.check_round_trips : options.round_trips;
  const double rtts = pings * link.rtt_ms / 1e3;
  FakeRun run;
  run.result.measurement = {link.rtt_ms, link.rtt_ms * 1.2, 0, 0, "2026-11-26T00:00:00Z"};
  if (probe.kind == ProbeKind::kCheck) {
    run.result.bytes_sent = round_trip_probe_bytes(options) - 400;  // a short name in the hello
    run.took =
        std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(rtts));
    return run;
  }
  const uint64_t fixed = fixed_probe_bytes(options) - 400;
  const uint64_t per_message = kFrameHeaderBytes + options.bulk_message_bytes;
  const double bulk_seconds = std::chrono::duration<double>(options.bulk_duration).count();
  const auto by_time = static_cast<uint64_t>(std::ceil(bytes_per_s * bulk_seconds / per_message));
  const uint64_t by_budget = (probe.max_bytes - fixed) / per_message;
  const uint64_t messages = std::max<uint64_t>(1, std::min(by_time, by_budget));
  run.result.bytes_sent = fixed + messages * per_message;
  run.result.measurement.small_gbps = link.gbps / 2;
  run.result.measurement.bulk_gbps = link.gbps;
  run.took = std::chrono::duration_cast<SteadyClock::duration>(
      std::chrono::duration<double>(rtts + run.result.bytes_sent / bytes_per_s));
  return run;
}

struct Event {
  TimePoint start, end;
  PlannedProbe probe;
  uint64_t bytes = 0;
  bool failed = false;
};

// Runs the schedule from `now` until `until`, one probe at a time; `links` may change as time
// goes (change(now) is called before each probe).
std::vector<Event> simulate(ProbeSchedule& schedule, std::map<std::string, FakeLink>& links,
                            const ProbeOptions& options, TimePoint now, TimePoint until,
                            const std::function<void(TimePoint)>& change = {}) {
  std::vector<Event> events;
  while (true) {
    const auto next = schedule.next();
    if (!next) break;
    EXPECT_EQ(schedule.next(), next) << "next() changes without a record";
    const auto& [at, probe] = *next;
    EXPECT_GE(at, now) << "a probe due before the previous one ended";
    now = std::max(now, at);
    if (now >= until) break;
    if (change) change(now);
    const FakeLink& link = links.at(probe.peer);
    FakeRun run = fake_measure(probe, link, options);
    EXPECT_LE(run.result.bytes_sent, probe.max_bytes) << probe.peer;
    const TimePoint end = now + run.took;
    schedule.record(probe, end, link.fails ? nullptr : &run.result);
    events.push_back(
        {now, end, probe, link.fails ? probe.max_bytes : run.result.bytes_sent, link.fails});
    now = end;
  }
  return events;
}

std::vector<Event> of_peer(const std::vector<Event>& events, const std::string& peer,
                           std::optional<ProbeKind> kind = std::nullopt) {
  std::vector<Event> out;
  for (const Event& e : events) {
    if (e.probe.peer == peer && (!kind || e.probe.kind == *kind)) out.push_back(e);
  }
  return out;
}

uint64_t hourly_budget_bytes(double gbps, double fraction = 0.01) {
  return static_cast<uint64_t>(fraction * gbps * 1e9 / 8 * 3600);
}

// The other peers' probes that may run first when several are due: the 2 Mbit/s link's full
// probe alone takes about 35 s.
constexpr auto kOthersFirst = 60s;

double seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

TEST(ProbeSchedule, ADayKeepsEveryHourWithinTheBudgetAndRefreshesEveryPeer) {
  const ProbeOptions options = probe_options();
  const ScheduleOptions so = schedule_options();
  ProbeSchedule schedule(so, options);
  // 2 Mbit/s: a budget of 9 MB an hour, room for one full probe (6.3 MB at least) an hour.
  std::map<std::string, FakeLink> links{{"gpu-slowest", {0.002, 40}},
                                        {"gpu-slow", {0.05, 40}},
                                        {"gpu-mid", {1, 1}},
                                        {"member-b/gpu-fast", {10, 0.2}}};
  schedule.set_peers({"gpu-slowest", "gpu-slow", "gpu-mid", "member-b/gpu-fast"}, kStart);
  const auto events = simulate(schedule, links, options, kStart, kStart + 24h);

  for (const auto& [peer, link] : links) {
    SCOPED_TRACE(peer);
    const uint64_t budget = hourly_budget_bytes(link.gbps);
    ASSERT_EQ(schedule.hourly_budget(peer), budget);
    const auto mine = of_peer(events, peer);
    // Every hour window (the fullest ones end at a probe) holds at most the budget.
    uint64_t fullest = 0;
    for (size_t i = 0; i < mine.size(); ++i) {
      uint64_t in_window = 0;
      for (size_t j = 0; j <= i; ++j) {
        if (mine[j].end + 1h > mine[i].end) in_window += mine[j].bytes;
      }
      EXPECT_LE(in_window, budget) << "hour up to probe " << i;
      fullest = std::max(fullest, in_window);
    }
    EXPECT_EQ(schedule.bytes_last_hour(peer, mine.back().end), [&] {
      uint64_t sum = 0;
      for (const Event& e : mine) sum += e.end + 1h > mine.back().end ? e.bytes : 0;
      return sum;
    }());
    // Full probes: the first at once, then at least every refresh_interval (jittered, plus the
    // other peers' probes that may run first) or, where the budget is the limit, as soon as
    // the window leaves room; never closer than min_full_interval.
    const bool budget_limited = link.gbps < 0.01;
    const auto full = of_peer(events, peer, ProbeKind::kFull);
    ASSERT_GE(full.size(), 2u);
    EXPECT_LT(full.front().start, kStart + 1min);
    EXPECT_EQ(full.front().probe.max_bytes, so.first_probe_max_bytes);
    const SteadyClock::duration longest =
        (budget_limited ? SteadyClock::duration(kBudgetWindow)
                        : std::chrono::duration_cast<SteadyClock::duration>(so.refresh_interval *
                                                                            (1 + so.jitter))) +
        kOthersFirst;
    for (size_t i = 1; i < full.size(); ++i) {
      EXPECT_LE(full[i].start - full[i - 1].end, longest) << "full probe " << i;
      EXPECT_GE(full[i].start - full[i - 1].end, so.min_full_interval) << "full probe " << i;
      const uint64_t least =
          fixed_probe_bytes(options) + kFrameHeaderBytes + options.bulk_message_bytes;
      EXPECT_GE(full[i].probe.max_bytes, least);
      EXPECT_LE(full[i].probe.max_bytes, options.max_bytes);
    }
    EXPECT_GE(full.size(), static_cast<size_t>(24h / longest));
    // Checks in between: an RTT measurement (a check or a full probe) about every
    // check_interval, the budget-limited link's too.
    const auto checks = of_peer(events, peer, ProbeKind::kCheck);
    EXPECT_GE(checks.size(), static_cast<size_t>(24h / (so.check_interval * 1.2)) - full.size());
    for (size_t i = 1; i < mine.size(); ++i) {
      EXPECT_LE(mine[i].start - mine[i - 1].end, so.check_interval * (1 + so.jitter) + kOthersFirst)
          << "probe " << i;
    }
    if (budget_limited) {  // one full probe (6.3 MB) and the checks an hour, of 9 MB
      EXPECT_GT(fullest, budget * 7 / 10);
      EXPECT_LT(full.back().probe.max_bytes, options.max_bytes);
    }
  }
}

TEST(ProbeSchedule, OneProbeAtATimeAndNewPeersInASeededRandomOrder) {
  const ProbeOptions options = probe_options();
  const std::vector<std::string> peers{"gpu-a", "gpu-b", "gpu-c", "gpu-d", "gpu-e"};
  const auto first_round = [&](uint64_t seed) {
    ProbeSchedule schedule(schedule_options(seed), options);
    EXPECT_EQ(schedule.next(), std::nullopt);
    schedule.set_peers(peers, kStart);
    std::vector<std::string> order;
    TimePoint now = kStart;
    for (size_t i = 0; i < peers.size(); ++i) {
      const auto next = schedule.next();
      EXPECT_TRUE(next.has_value());
      if (!next) break;
      EXPECT_EQ(next->first, now);  // due at once, but one after the other
      EXPECT_EQ(next->second.kind, ProbeKind::kFull);
      order.push_back(next->second.peer);
      ProbeResult result;
      result.measurement = {1, 1.2, 0.5, 1, "2026-11-26T00:00:00Z"};
      result.bytes_sent = 1 << 20;
      now += 2s;
      schedule.record(next->second, now, &result);
    }
    return order;
  };
  std::set<std::vector<std::string>> orders;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const auto order = first_round(seed);
    EXPECT_EQ(std::set<std::string>(order.begin(), order.end()).size(), peers.size())
        << "each new peer once in the first round";
    EXPECT_EQ(first_round(seed), order) << "the same seed, the same order";
    orders.insert(order);
  }
  EXPECT_GE(orders.size(), 6u) << "the order depends on the seed";
  EXPECT_FALSE(orders.size() == 1 && *orders.begin() == peers) << "not in name order";
}

TEST(ProbeSchedule, PeersOverdueBehindLongProbesTakeTurnsNoneStarves) {
  // Checks every second, but a check of a 100 ms link takes 2 s and a full probe over 20 s: the
  // node is always behind, and every peer is overdue whenever it is looked at. The one due first
  // must go first, or the peers that keep coming due starve the others.
  const ProbeOptions options = probe_options();
  ScheduleOptions schedule = schedule_options();
  schedule.check_interval = 1s;
  schedule.min_full_interval = 1s;
  schedule.refresh_interval = 60s;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    schedule.seed = seed;
    ProbeSchedule s(schedule, options);
    std::map<std::string, FakeLink> links = {{"gpu-a", {1, 100}},
                                             {"gpu-b", {1, 100}},
                                             {"member-b/gpu-c", {0.2, 100}},
                                             {"member-b/gpu-d", {0.2, 100}}};
    s.set_peers({"gpu-a", "gpu-b", "member-b/gpu-c", "member-b/gpu-d"}, kStart);
    const std::vector<Event> events = simulate(s, links, options, kStart, kStart + 30min);
    size_t fewest = events.size(), most = 0;
    for (const auto& [peer, link] : links) {
      const std::vector<Event> mine = of_peer(events, peer);
      ASSERT_FALSE(mine.empty()) << peer << " never probed (seed " << seed << ")";
      EXPECT_FALSE(of_peer(events, peer, ProbeKind::kFull).empty()) << peer;
      fewest = std::min(fewest, mine.size());
      most = std::max(most, mine.size());
      // Between two probes of a peer, at most one probe of each other peer (and a little slack
      // for the full probes that cut in).
      for (size_t i = 1; i < mine.size(); ++i) {
        const auto between = std::count_if(events.begin(), events.end(), [&](const Event& e) {
          return e.start > mine[i - 1].start && e.start < mine[i].start;
        });
        EXPECT_LE(between, 2 * static_cast<long>(links.size())) << peer << " waited";
      }
    }
    EXPECT_GE(2 * fewest, most) << "seed " << seed << ": unfair turns";
  }
}

TEST(ProbeSchedule, APostponedPeerWaitsWithoutAFailureOrBytes) {
  const ProbeOptions options = probe_options();
  ProbeSchedule s(schedule_options(), options);
  s.set_peers({"gpu-a"}, kStart);
  const auto first = s.next();
  ASSERT_TRUE(first);
  s.postpone("gpu-a", kStart + 2s);
  const auto later = s.next();
  ASSERT_TRUE(later);
  EXPECT_EQ(later->first, kStart + 2s);
  EXPECT_EQ(later->second, first->second);  // the same probe, not a back-off or a smaller one
  EXPECT_EQ(s.bytes_last_hour("gpu-a", kStart + 2s), 0u);
  s.postpone("gpu-a", kStart + 1s);  // never earlier than already set
  EXPECT_EQ(s.next()->first, kStart + 2s);
  s.postpone("gpu-unknown", kStart + 1h);  // ignored
  EXPECT_EQ(s.next()->first, kStart + 2s);
}

TEST(ProbeSchedule, ADriftBeyondTheThresholdProbesAtOnce) {
  const ProbeOptions options = probe_options();
  const ScheduleOptions so = schedule_options();
  ProbeSchedule schedule(so, options);
  std::map<std::string, FakeLink> links{{"gpu-a", {1, 10}}, {"gpu-b", {1, 0.3}}};
  schedule.set_peers({"gpu-a", "gpu-b"}, kStart);
  const TimePoint drift_at = kStart + 2h;
  const auto events = simulate(schedule, links, options, kStart, kStart + 3h, [&](TimePoint now) {
    if (now >= drift_at) {
      links["gpu-a"].rtt_ms = 20;    // +100%: a drift
      links["gpu-b"].rtt_ms = 0.45;  // +50% but 0.15 ms: not one
    }
  });
  const auto full_after = [&](const std::string& peer) {
    for (const Event& e : of_peer(events, peer, ProbeKind::kFull)) {
      if (e.start >= drift_at) return e.start;
    }
    return TimePoint::max();
  };
  const auto full_before = [&](const std::string& peer) {
    TimePoint last{};
    for (const Event& e : of_peer(events, peer, ProbeKind::kFull)) {
      if (e.start < drift_at) last = e.end;
    }
    return last;
  };
  // gpu-a: the next check (within a jittered check_interval) sees the drift, its full probe
  // follows at once (min_full_interval allowing).
  const auto a_reprobe = full_after("gpu-a") - drift_at;
  EXPECT_LE(a_reprobe, so.check_interval * (1 + so.jitter) + 30s)
      << "gpu-a re-probed " << seconds(a_reprobe) << " s after the drift";
  EXPECT_GE(full_after("gpu-a") - full_before("gpu-a"), so.min_full_interval);
  // gpu-b waits for its refresh.
  EXPECT_GE(full_after("gpu-b") - full_before("gpu-b"), so.refresh_interval * (1 - so.jitter));
  // A drift right after a full probe waits for min_full_interval.
  ProbeSchedule fresh(so, options);
  fresh.set_peers({"gpu-a"}, kStart);
  ProbeResult full;
  full.measurement = {10, 12, 0.5, 1, "2026-11-26T00:00:00Z"};
  full.bytes_sent = 1 << 20;
  fresh.record(fresh.next()->second, kStart + 1s, &full);
  ProbeResult check = full;
  check.measurement.rtt_p50_ms = 30;
  check.bytes_sent = 4096;
  const auto planned_check = fresh.next();
  ASSERT_EQ(planned_check->second.kind, ProbeKind::kCheck);
  fresh.record(planned_check->second, planned_check->first + 1s, &check);
  const auto reprobe = fresh.next();
  EXPECT_EQ(reprobe->second.kind, ProbeKind::kFull);
  EXPECT_EQ(reprobe->first, kStart + 1s + so.min_full_interval);
}

TEST(ProbeSchedule, FailuresBackOffDoublingUpToTheRefreshInterval) {
  const ProbeOptions options = probe_options();
  ScheduleOptions so = schedule_options();
  so.jitter = 0;  // exact intervals
  ProbeSchedule schedule(so, options);
  schedule.set_peers({"gpu-gone"}, kStart);
  TimePoint now = kStart;
  std::vector<int64_t> gaps;
  for (int i = 0; i < 8; ++i) {
    const auto next = schedule.next();
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->second.kind, ProbeKind::kFull) << "rate unknown: only full probes";
    EXPECT_EQ(next->second.max_bytes, so.first_probe_max_bytes);
    gaps.push_back(std::chrono::duration_cast<std::chrono::seconds>(next->first - now).count());
    now = next->first;
    schedule.record(next->second, now, nullptr);
  }
  EXPECT_EQ(gaps, (std::vector<int64_t>{0, 60, 120, 240, 480, 960, 1200, 1200}));
  // A failed probe counts all it was allowed: the attempts at 900, 1860, 3060 and 4260 s are in
  // the hour up to now.
  EXPECT_EQ(schedule.bytes_last_hour("gpu-gone", now), 4 * so.first_probe_max_bytes);
  // A success resets the back-off: the next check comes check_interval later.
  ProbeResult result;
  result.measurement = {1, 1.2, 0.5, 1, "2026-11-26T00:00:00Z"};
  result.bytes_sent = 1 << 20;
  const auto next = schedule.next();
  now = next->first;
  schedule.record(next->second, now, &result);
  EXPECT_EQ(schedule.next()->first, now + so.check_interval);
  EXPECT_EQ(schedule.next()->second.kind, ProbeKind::kCheck);
}

TEST(ProbeSchedule, AFullProbeWaitsUntilTheWindowLeavesRoomForIt) {
  const ProbeOptions options = probe_options();
  ScheduleOptions so = schedule_options();
  so.jitter = 0;
  ProbeSchedule schedule(so, options);
  schedule.set_peers({"gpu-slow"}, kStart);
  // 1 Mbit/s: a budget of 4.5 MB an hour; the first probe sent 4 MB.
  ProbeResult first;
  first.measurement = {5, 6, 0.0005, 0.001, "2026-11-26T00:00:00Z"};
  first.bytes_sent = 4'000'000;
  schedule.record(schedule.next()->second, kStart, &first);
  ASSERT_EQ(schedule.hourly_budget("gpu-slow"), 4'500'000u);
  // Checks go on (a few KiB each); the next full probe needs fixed + one bulk message (about
  // 6.3 MB) and the checks' reserve: more than the budget ever leaves, so it never comes.
  TimePoint now = kStart;
  for (int i = 0; i < 200; ++i) {
    const auto next = schedule.next();
    ASSERT_TRUE(next.has_value());
    ASSERT_EQ(next->second.kind, ProbeKind::kCheck) << i;
    ProbeResult check;
    check.measurement = {5, 6, 0, 0, "2026-11-26T00:00:00Z"};
    check.bytes_sent = 4500;
    now = next->first;
    schedule.record(next->second, now, &check);
    EXPECT_LE(schedule.bytes_last_hour("gpu-slow", now), 4'500'000u);
  }
  // At 5 Mbit/s (22.5 MB an hour) a full probe that sent 20 MB leaves room for the next one
  // only after it leaves the window; then its max_bytes is what the window leaves.
  ProbeSchedule slow(so, options);
  slow.set_peers({"gpu-slow"}, kStart);
  first.measurement.bulk_gbps = 0.005;
  first.bytes_sent = 20'000'000;
  slow.record(slow.next()->second, kStart, &first);
  TimePoint full_at{};
  uint64_t full_max = 0;
  now = kStart;
  while (now < kStart + 3h) {
    const auto next = slow.next();
    now = next->first;
    if (next->second.kind == ProbeKind::kFull) {
      full_at = now;
      full_max = next->second.max_bytes;
      break;
    }
    ProbeResult check;
    check.measurement = {5, 6, 0, 0, "2026-11-26T00:00:00Z"};
    check.bytes_sent = 4500;
    slow.record(next->second, now, &check);
  }
  EXPECT_EQ(full_at, kStart + 1h) << "after " << seconds(full_at - kStart) << " s";
  // What the window leaves, less the reserve of an hour's checks (60 without jitter).
  const uint64_t reserve = 60 * round_trip_probe_bytes(options);
  EXPECT_EQ(full_max, 22'500'000u - reserve - slow.bytes_last_hour("gpu-slow", full_at));
}

TEST(ProbeSchedule, PeersThatLeaveAreForgotten) {
  const ProbeOptions options = probe_options();
  ProbeSchedule schedule(schedule_options(), options);
  schedule.set_peers({"gpu-a", "gpu-b"}, kStart);
  const auto first = schedule.next()->second;
  ProbeResult result;
  result.measurement = {1, 1.2, 0.5, 1, "2026-11-26T00:00:00Z"};
  result.bytes_sent = 1 << 20;
  schedule.record(first, kStart + 1s, &result);
  const std::string other = first.peer == "gpu-a" ? "gpu-b" : "gpu-a";
  schedule.set_peers({other}, kStart + 2s);
  EXPECT_EQ(schedule.bytes_last_hour(first.peer, kStart + 2s), 0u);
  EXPECT_EQ(schedule.hourly_budget(first.peer), std::nullopt);
  schedule.record(first, kStart + 3s, &result);  // ignored
  EXPECT_EQ(schedule.bytes_last_hour(first.peer, kStart + 3s), 0u);
  for (int i = 0; i < 5; ++i) {
    const auto next = schedule.next();
    EXPECT_EQ(next->second.peer, other);
    schedule.record(next->second, next->first + 1s, &result);
  }
  schedule.set_peers({}, kStart + 1h);
  EXPECT_EQ(schedule.next(), std::nullopt);
}

TEST(ProbeSchedule, BadOptionsNameTheOptionValueAndLimit) {
  const ProbeOptions options = probe_options();
  const auto refused = [&](const std::function<void(ScheduleOptions&)>& bad) {
    ScheduleOptions so = schedule_options();
    bad(so);
    return error_of([&] { ProbeSchedule(so, options); });
  };
  EXPECT_EQ(refused([](auto& o) { o.budget_fraction = 0; }),
            "prober schedule option budget_fraction = 0: must be in (0, 0.5]");
  EXPECT_EQ(refused([](auto& o) { o.budget_fraction = std::nan(""); }),
            "prober schedule option budget_fraction = nan: must be in (0, 0.5]");
  EXPECT_EQ(refused([](auto& o) { o.check_interval = 0s; }),
            "prober schedule option check_interval = 0 s: must be 1 s to 86400 s");
  EXPECT_EQ(refused([](auto& o) { o.refresh_interval = 30s; }),
            "prober schedule option refresh_interval = 30 s: must be at least check_interval "
            "(60 s)");
  EXPECT_EQ(refused([](auto& o) { o.min_full_interval = 1300s; }),
            "prober schedule option min_full_interval = 1300 s: must be at most refresh_interval "
            "(1200 s)");
  EXPECT_EQ(refused([](auto& o) { o.drift_threshold = -1; }),
            "prober schedule option drift_threshold = -1: must be in (0, 10]");
  EXPECT_EQ(refused([](auto& o) { o.jitter = 0.9; }),
            "prober schedule option jitter = 0.9: must be in [0, 0.5]");
  const uint64_t least =
      fixed_probe_bytes(options) + kFrameHeaderBytes + options.bulk_message_bytes;
  EXPECT_EQ(refused([](auto& o) { o.first_probe_max_bytes = 1000; }),
            "prober schedule option first_probe_max_bytes = 1000: must be at least " +
                std::to_string(least) +
                " (the probe's pings, small messages and one bulk message)");
  ProbeOptions bad_probe = options;
  bad_probe.round_trips = 0;
  EXPECT_EQ(error_of([&] { ProbeSchedule(schedule_options(), bad_probe); }),
            "prober option round_trips = 0: must be 1 to 10000");
}

}  // namespace
}  // namespace tessel::prober
