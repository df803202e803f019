// The measuring side: one authenticated session to a peer's prober, measuring this node's link
// to it, in this direction (client -> server):
//  - round-trip time: `round_trips` pings of 8 bytes, one at a time; median and p90 in ms;
//  - small-message throughput: `small_messages` messages of `small_message_bytes`, each sent
//    and acknowledged before the next, as a pipeline's activations travel (Gbit/s, so it
//    includes the round trip's cost);
//  - bulk throughput: messages of `bulk_message_bytes` streamed back to back for
//    `bulk_duration`, timed from the first byte sent to the peer's acknowledgement of all of
//    them (Gbit/s).
// Everything sent is bounded by `max_bytes`: the bulk phase stops early when it would exceed
// it. A session ends with the client's bye and the server's close, which the client waits for:
// when a probe returns, the peer is free for the next (a peer serves one session at a time). Every
// read and write has a deadline, so a peer that vanishes gives an error, never a hang.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "api/link_annotations.h"
#include "noderuntime/transport/link_emulator.h"

namespace tessel::prober {

struct ProbePeer {
  std::string name;  // "<node>" or "<cluster>/<node>", as the annotation names it
  std::string host;
  uint16_t port = 0;
};

// Limits of the options (checked by check_probe_options).
inline constexpr int kMaxRoundTrips = 10'000;
inline constexpr int kMaxSmallMessages = 10'000;
inline constexpr std::chrono::milliseconds kMaxBulkDuration{60'000};

struct ProbeOptions {
  std::string secret;
  std::string self_name;  // how this prober introduces itself
  int round_trips = 200;
  // A check's pings: enough for a median that shows a drift, few enough that checking every
  // peer every minute costs the node little time (20 x 40 ms = 0.8 s a check).
  int check_round_trips = 20;
  size_t small_message_bytes = 64 * 1024;
  int small_messages = 32;
  size_t bulk_message_bytes = 4 * 1024 * 1024;
  std::chrono::milliseconds bulk_duration{1000};
  uint64_t max_bytes = 512ull * 1024 * 1024;  // everything one measurement sends
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds io_timeout{5000};
  // Shapes this side's sending path with the transport's link emulator (tests, and demos on
  // one machine); unshaped by default.
  transport::LinkShape emulated_link;
};

// Throws ProbeError naming the option, its value and the limit.
void check_probe_options(const ProbeOptions& options);

// What one measurement sends at most before its bulk phase: the pings, the small messages and
// the frames around them.
uint64_t fixed_probe_bytes(const ProbeOptions& options);

struct ProbeResult {
  api::LinkMeasurement measurement;  // measured_at: when it finished, RFC 3339
  uint64_t bytes_sent = 0;           // everything this side sent (<= options.max_bytes)
};

// Measures the link to `peer`. Throws ProbeError
// "prober peer <name> (<host>:<port>): <phase>: <why>"; ProbeBusy (same form) when the peer's
// prober is serving another peer's probe.
ProbeResult measure_peer(const ProbePeer& peer, const ProbeOptions& options);

// What one round-trip check sends at most: the handshake, `check_round_trips` pings and the bye.
uint64_t round_trip_probe_bytes(const ProbeOptions& options);

// A check of the link to `peer`: one authenticated session of `check_round_trips` pings only (a few
// KiB). The measurement has the RTT fields and measured_at; its Gbit/s fields are 0. Throws
// ProbeError as measure_peer does.
ProbeResult measure_round_trips(const ProbePeer& peer, const ProbeOptions& options);

}  // namespace tessel::prober
