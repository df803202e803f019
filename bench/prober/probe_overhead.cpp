// bench/prober: what the prober's probes cost each link. For each emulated link (the transport's
// link emulator on the probe's sending path: a rate and a round-trip latency), one real full
// probe (the default ProbeOptions, max_bytes = the schedule's first_probe_max_bytes) and one
// real check (measure_round_trips) run against a ProbeServer on 127.0.0.1; their bytes_sent and
// durations give the per-probe costs. Then one node's ProbeSchedule (the default options) runs
// over a simulated hour and a simulated day with all these links as its peers, one probe at a
// time, each probe costing what the real one did (a full probe's bulk phase cut to the
// max_bytes the schedule allows). Printed per peer: full probes and checks per hour, bytes per
// hour, and their share of the link (bytes/hour / (rate x 3600 s)); for the day also the
// fullest hour window's share. The budget is 1% of the *measured* bulk rate.
// Usage: probe_overhead [--gbps 0.05,0.2,1,10] [--rtt-ms 1,40] [--seed 1]
// Recorded results: bench/prober/results.md.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "noderuntime/prober/probe_channel.h"
#include "noderuntime/prober/probe_client.h"
#include "noderuntime/prober/probe_error.h"
#include "noderuntime/prober/probe_schedule.h"
#include "noderuntime/prober/probe_server.h"
#include "noderuntime/transport/socket.h"

using namespace tessel::prober;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;
const std::string kSecret = "probe-overhead-bench-secret-0123456789";

struct Link {
  std::string name;  // the peer's name in the schedule
  double gbps = 0;   // emulated rate
  double rtt_ms = 0;
  // Measured on loopback:
  ProbeResult full, check;
  double full_seconds = 0, check_seconds = 0;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One real full probe and one real check over the emulated link.
void measure_costs(Link& link, const ScheduleOptions& schedule, ProbeServer& server) {
  ProbeOptions options;
  options.secret = kSecret;
  options.self_name = "gpu-node-0";
  options.max_bytes = schedule.first_probe_max_bytes;
  // The emulator shapes what the client sends; the server's replies are not delayed, so the
  // whole round trip's latency goes on the way out.
  options.emulated_link = {link.gbps * 1e9 / 8, link.rtt_ms / 1e3};
  const ProbePeer peer{link.name, "127.0.0.1", server.port()};
  auto start = Clock::now();
  link.full = measure_peer(peer, options);
  link.full_seconds = seconds_since(start);
  start = Clock::now();
  link.check = measure_round_trips(peer, options);
  link.check_seconds = seconds_since(start);
}

// A simulated probe of `link` as the real ones went: a check costs what the real check did; a
// full probe what the real one did, its bulk phase cut to `max_bytes` (whole messages, at least
// one), and its time shrinks with it at the measured rate.
std::pair<uint64_t, double> simulated_cost(const Link& link, const PlannedProbe& probe,
                                           const ProbeOptions& options) {
  if (probe.kind == ProbeKind::kCheck) return {link.check.bytes_sent, link.check_seconds};
  const uint64_t fixed = fixed_probe_bytes(options);
  const uint64_t message = kFrameHeaderBytes + options.bulk_message_bytes;
  const uint64_t real_bulk = link.full.bytes_sent > fixed ? link.full.bytes_sent - fixed : message;
  // Uncut, the bulk phase runs bulk_duration at the measured rate (the real one may have been
  // cut by first_probe_max_bytes).
  const double by_time = link.full.measurement.bulk_gbps * 1e9 / 8 *
                         std::chrono::duration<double>(options.bulk_duration).count();
  const uint64_t uncut = std::max<uint64_t>(message, static_cast<uint64_t>(by_time));
  const uint64_t allowed = probe.max_bytes > fixed ? (probe.max_bytes - fixed) / message : 1;
  const uint64_t bulk =
      std::max<uint64_t>(1, std::min<uint64_t>(allowed, (uncut + message - 1) / message)) * message;
  const double rate = link.full.measurement.bulk_gbps * 1e9 / 8;
  const double fixed_seconds =
      std::max(0.0, link.full_seconds - static_cast<double>(real_bulk) / rate);
  return {fixed + bulk, fixed_seconds + static_cast<double>(bulk) / rate};
}

struct PeerTotals {
  int full = 0, checks = 0;
  uint64_t bytes = 0;
  uint64_t fullest_hour = 0;  // the most bytes in any hour window
};

// One node probing every link, one probe at a time, for `duration` of simulated time.
std::map<std::string, PeerTotals> simulate(const std::vector<Link>& links,
                                           const ScheduleOptions& so, Clock::duration duration) {
  ProbeOptions options;
  options.secret = kSecret;
  options.self_name = "gpu-node-0";
  ProbeSchedule schedule(so, options);
  std::vector<std::string> names;
  for (const Link& link : links) names.push_back(link.name);
  const Clock::time_point start = Clock::time_point{} + 1000h;
  schedule.set_peers(names, start);
  std::map<std::string, PeerTotals> totals;
  Clock::time_point now = start;
  while (const auto next = schedule.next()) {
    const auto& [at, probe] = *next;
    now = std::max(now, at);
    if (now >= start + duration) break;
    const Link& link = *std::find_if(links.begin(), links.end(),
                                     [&](const Link& l) { return l.name == probe.peer; });
    const auto [bytes, seconds] = simulated_cost(link, probe, options);
    ProbeResult result = probe.kind == ProbeKind::kFull ? link.full : link.check;
    result.bytes_sent = std::min(bytes, probe.max_bytes);
    now += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    schedule.record(probe, now, &result);
    PeerTotals& t = totals[probe.peer];
    (probe.kind == ProbeKind::kFull ? t.full : t.checks) += 1;
    t.bytes += result.bytes_sent;
    t.fullest_hour = std::max(t.fullest_hour, schedule.bytes_last_hour(probe.peer, now));
  }
  return totals;
}

std::string bytes_text(double bytes) {
  char text[32];
  if (bytes >= 1e9) {
    std::snprintf(text, sizeof text, "%.2f GB", bytes / 1e9);
  } else if (bytes >= 1e6) {
    std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.1f kB", bytes / 1e3);
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<double> rates{0.05, 0.2, 1, 10};
  std::vector<double> rtts{1, 40};
  uint64_t seed = 1;
  CLI::App app{"probe_overhead: the prober's bytes per hour per peer and share of the link"};
  app.add_option("--gbps", rates, "emulated link rates, Gbit/s")->delimiter(',');
  app.add_option("--rtt-ms", rtts, "emulated round-trip times, ms")->delimiter(',');
  app.add_option("--seed", seed, "the schedule's seed (jitter, order)");
  CLI11_PARSE(app, argc, argv);

  ScheduleOptions so;
  so.seed = seed;
  std::vector<Link> links;
  try {
    ProbeServerOptions server_options;
    server_options.secret = kSecret;
    ProbeServer server(tessel::transport::TcpListener::bind("127.0.0.1", 0), server_options);
    for (double rtt : rtts) {
      for (double gbps : rates) {
        Link link;
        char name[64];
        std::snprintf(name, sizeof name, "peer-%gg-%gms", gbps, rtt);
        link.name = name;
        link.gbps = gbps;
        link.rtt_ms = rtt;
        std::fprintf(stderr, "measuring %s ...\n", name);
        measure_costs(link, so, server);
        links.push_back(std::move(link));
      }
    }
  } catch (const ProbeError& e) {
    std::fprintf(stderr, "probe_overhead: %s\n", e.what());
    return 1;
  }

  std::printf(
      "# real probes on 127.0.0.1 over the link emulator (default ProbeOptions, full probe "
      "max_bytes %s)\n",
      bytes_text(static_cast<double>(so.first_probe_max_bytes)).c_str());
  std::printf("# %-18s %9s %7s %11s %10s %7s %11s %8s %8s\n", "peer", "link", "rtt", "meas.bulk",
              "meas.rtt", "full", "full bytes", "check", "check B");
  for (const Link& l : links) {
    std::printf("  %-18s %6.2f Gb %5.1f ms %7.3f Gb %7.2f ms %6.2f s %11s %6.2f s %8llu\n",
                l.name.c_str(), l.gbps, l.rtt_ms, l.full.measurement.bulk_gbps,
                l.check.measurement.rtt_p50_ms, l.full_seconds,
                bytes_text(static_cast<double>(l.full.bytes_sent)).c_str(), l.check_seconds,
                static_cast<unsigned long long>(l.check.bytes_sent));
  }
  for (const auto& [label, hours] : {std::pair{"one hour", 1}, std::pair{"one day", 24}}) {
    const auto totals = simulate(links, so, std::chrono::hours(hours));
    std::printf(
        "\n# ProbeSchedule, default options (budget %.0f%% of the measured bulk rate), all "
        "%zu peers of one node, simulated %s\n",
        so.budget_fraction * 100, links.size(), label);
    std::printf("# %-18s %9s %8s %9s %11s %8s %11s\n", "peer", "link", "full/h", "checks/h",
                "bytes/h", "share", "peak hour");
    for (const Link& l : links) {
      const PeerTotals& t = totals.count(l.name) ? totals.at(l.name) : PeerTotals{};
      const double per_hour = static_cast<double>(t.bytes) / hours;
      const double link_hour = l.gbps * 1e9 / 8 * 3600;
      std::printf("  %-18s %6.2f Gb %8.2f %9.1f %11s %7.3f%% %10.3f%%\n", l.name.c_str(), l.gbps,
                  static_cast<double>(t.full) / hours, static_cast<double>(t.checks) / hours,
                  bytes_text(per_hour).c_str(), 100 * per_hour / link_hour,
                  100 * static_cast<double>(t.fullest_hour) / link_hour);
    }
  }
  return 0;
}
