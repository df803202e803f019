// The measuring side: one authenticated session to a peer's prober, measuring this node's link
// to it, in this direction (client -> server):
//  - round-trip time: `round_trips` pings of 8 bytes, one at a time; median and p90 in ms;
//  - small-message throughput: `small_messages` messages of `small_message_bytes`, each sent
//    and acknowledged before the next, as a pipeline's activations travel (Gbit/s, so it
//    includes the round trip's cost);
//  - bulk throughput: messages of `bulk_message_bytes` streamed back to back for
//    `bulk_duration` (or `bulk_round_trips` measured round trips, if longer: a TCP stream takes
//    about a dozen round trips of slow start to reach its rate), timed from the first byte sent
//    to the peer's acknowledgement of all of them (Gbit/s).
// Bulk over several TCP streams (protocol version 2): one TCP stream moves at most its window
// per round trip, so on a long fat link one stream measures its window, not the link. Where the
// link could hold more than one stream's window (the transport's rule, stream_plan.h, for a
// link of `link_capacity_gbps` at the measured round trip), the bulk phase runs twice: over the
// session's own connection (the one-stream rate, `stream_gbps`), then over that many connections
// joining the session at once (the link's rate, `bulk_gbps`, what the planner prices and the
// transport reaches with its streams). Every stream then has the socket buffers the transport
// gives its streams on that link. A peer of protocol version 1 is measured over one stream.
// Everything sent is bounded by `max_bytes`: the bulk phase stops early when it would exceed
// it (and uses fewer streams when it cannot give each one message). A session ends with the client's bye and the server's close, which the client waits for:
// when a probe returns, the peer is free for the next (a peer serves one session at a time). Every
// read and write has a deadline, so a peer that vanishes gives an error, never a hang.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "api/link_annotations.h"
#include "noderuntime/transport/link_emulator.h"
#include "noderuntime/transport/stream_plan.h"
#include "placement/tcp_link_rate.h"

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
inline constexpr int kMaxBulkRoundTrips = 1000;

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
  // The bulk phase lasts at least this many measured round trips (at most kMaxBulkDuration):
  // 3 s over a 150 ms round trip, of which slow start takes about a third.
  int bulk_round_trips = 20;
  // TCP streams of the bulk phase: 0 chooses (above), 1 measures one stream only, N measures
  // one stream, then N (at most what the peer offers; kMaxTcpStreamsPerLink at most).
  int bulk_streams = 0;
  // The fastest this node's links may be (its NIC's rate): the capacity the chosen streams are
  // to fill. Too high costs a few more connections; too low leaves a long fat link's rate
  // unmeasured.
  double link_capacity_gbps = 10;
  uint64_t max_bytes = 512ull * 1024 * 1024;  // everything one measurement sends
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds io_timeout{5000};
  // Shapes this side's sending path with the transport's link emulator (tests, and demos on
  // one machine); unshaped by default. It shapes each connection by itself, so a shaped probe
  // measures its bulk phase over one stream.
  transport::LinkShape emulated_link;
};

// Throws ProbeError naming the option, its value and the limit.
void check_probe_options(const ProbeOptions& options);

// What one measurement sends at most besides its bulk data: the pings, the small messages and
// the frames around them (of its own connection; a joined one's are counted in its budget).
uint64_t fixed_probe_bytes(const ProbeOptions& options);

// The streams of the bulk phase for a measured round trip, a peer that takes `joins` joined
// connections (0: a version 1 peer) and what the budget allows, and their socket buffers, as
// the transport would open them on this link (stream_plan.h): `bulk_streams` when set, else the
// streams that fill a link of `link_capacity_gbps` (one on a link one stream fills). At most
// `joins`, and each stream must get one bulk message of `bulk_budget` after the one-stream
// phase's (else fewer).
transport::StreamPlan plan_bulk_streams(const ProbeOptions& options, double rtt_ms, int joins,
                                        uint64_t bulk_budget);
// How long each bulk phase runs for a measured round trip.
std::chrono::milliseconds bulk_duration_for(const ProbeOptions& options, double rtt_ms);

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
