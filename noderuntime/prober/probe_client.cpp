#include "noderuntime/prober/probe_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "kube/object.h"
#include "noderuntime/prober/probe_auth.h"
#include "noderuntime/prober/probe_channel.h"
#include "noderuntime/prober/probe_error.h"
#include "noderuntime/prober/probe_handshake.h"
#include "noderuntime/transport/socket.h"
#include "noderuntime/transport/stream_plan.h"
#include "noderuntime/transport/transport_error.h"
#include "placement/limits.h"

namespace tessel::prober {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// The nearest-rank percentile (0 < p <= 1) of a non-empty sample.
double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

uint64_t read_u64(std::span<const std::byte> bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(bytes[i]);
  return value;
}

// Reads a sync-ack and checks the peer counted exactly the data bytes sent since the sync
// before; returns the peer's clock on reading the sync (ns; 0 from a version 1 peer).
uint64_t read_sync_ack(ProbeChannel& channel, uint32_t version, uint64_t sent,
                       std::vector<std::byte>& payload) {
  channel.receive_expected(FrameType::kSyncAck, payload, sync_ack_bytes(version));
  const uint64_t counted = read_u64(payload);
  if (counted != sent) {
    throw ProbeError("the peer acknowledged " + std::to_string(counted) + " bytes of the " +
                     std::to_string(sent) + " sent");
  }
  return version >= 2 ? read_u64(std::span(payload).subspan(8)) : 0;
}

void sync(ProbeChannel& channel, uint32_t version, uint64_t sent, std::vector<std::byte>& payload) {
  channel.send(FrameType::kSync);
  read_sync_ack(channel, version, sent, payload);
}

// A measurement with only its round-trip fields set: the median and 90th percentile of
// `round_trips` pings.
api::LinkMeasurement measure_rtt(ProbeChannel& channel, int round_trips) {
  std::vector<double> rtts_ms;
  rtts_ms.reserve(round_trips);
  std::vector<std::byte> ping(kPingPayloadBytes), pong;
  for (int i = 0; i < round_trips; ++i) {
    for (size_t b = 0; b < ping.size(); ++b) ping[b] = static_cast<std::byte>(i >> (8 * b));
    const auto start = Clock::now();
    channel.send(FrameType::kPing, ping);
    channel.receive_expected(FrameType::kPong, pong, kPingPayloadBytes);
    const auto end = Clock::now();
    if (pong != ping) throw ProbeError("pong " + std::to_string(i) + " does not echo its ping");
    rtts_ms.push_back(seconds_between(start, end) * 1e3);
  }
  api::LinkMeasurement measurement;
  measurement.rtt_p50_ms = percentile(rtts_ms, 0.5);
  measurement.rtt_p90_ms = percentile(rtts_ms, 0.9);
  return measurement;
}

double measure_small(ProbeChannel& channel, uint32_t version, const ProbeOptions& options) {
  const std::vector<std::byte> message(options.small_message_bytes, std::byte{0x5a});
  std::vector<std::byte> payload;
  const auto start = Clock::now();
  for (int i = 0; i < options.small_messages; ++i) {
    channel.send(FrameType::kData, message);
    sync(channel, version, message.size(), payload);
  }
  const double bits = 8.0 * static_cast<double>(message.size()) * options.small_messages;
  return bits / seconds_between(start, Clock::now()) / 1e9;
}

// What one stream of a bulk phase carried: its rate in Gbit/s.
//
// A stream's first round trips are its ramp (slow start and, on a long fat link, the losses that
// end it), so with a version 2 peer only the phase's second half counts: a sync at the half
// marks it, and the peer's clock on reading that sync and the last one times the data between
// them, as it arrived (a sender's clock would count its send buffer's data as sent). With a
// version 1 peer, or a budget that ends the phase before its half, the whole phase counts,
// from the first byte sent to the acknowledgement of all of them.
double send_bulk(ProbeChannel& channel, uint32_t version, const std::vector<std::byte>& message,
                 Clock::time_point start, Clock::time_point end_sending, uint64_t budget) {
  const uint64_t per_message = kFrameHeaderBytes + message.size();
  const Clock::time_point half = start + (end_sending - start) / 2;
  std::vector<std::byte> payload;
  uint64_t sent = 0;
  std::optional<uint64_t> before_mark;  // data sent before the mark's sync
  do {
    channel.send(FrameType::kData, message);
    sent += message.size();
    budget -= per_message;
    if (version >= 2 && !before_mark && Clock::now() >= half &&
        budget >= kFrameHeaderBytes + per_message) {
      channel.send(FrameType::kSync);  // its acknowledgement is read at the end
      budget -= kFrameHeaderBytes;
      before_mark = sent;
    }
  } while (Clock::now() < end_sending && budget >= per_message);
  channel.send(FrameType::kSync);
  if (!before_mark) {
    read_sync_ack(channel, version, sent, payload);
    return 8.0 * static_cast<double>(sent) / seconds_between(start, Clock::now()) / 1e9;
  }
  const uint64_t marked_ns = read_sync_ack(channel, version, *before_mark, payload);
  const uint64_t after = sent - *before_mark;
  const uint64_t end_ns = read_sync_ack(channel, version, after, payload);
  if (end_ns <= marked_ns) {
    throw ProbeError("the peer's clock read the last sync at " + std::to_string(end_ns) +
                     " ns, not after the mark's at " + std::to_string(marked_ns) + " ns");
  }
  return 8.0 * static_cast<double>(after) / static_cast<double>(end_ns - marked_ns);
}

// One stream's bulk rate (Gbit/s).
double measure_bulk(ProbeChannel& channel, uint32_t version, const ProbeOptions& options,
                    std::chrono::milliseconds duration, uint64_t budget) {
  const std::vector<std::byte> message(options.bulk_message_bytes, std::byte{0xa5});
  const auto start = Clock::now();
  return send_bulk(channel, version, message, start, start + duration, budget);
}

// Runs work(k) for k in [0, count) on threads of their own; rethrows the first error, as
// ProbeError "stream <k + 1> of <count>: <why>".
template <typename Work>
void on_each_stream(int count, Work work) {
  std::vector<std::exception_ptr> errors(count);
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (int k = 0; k < count; ++k) {
    threads.emplace_back([&, k] {
      try {
        work(k);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < count; ++k) {
    if (!errors[k]) continue;
    const std::string stream =
        "stream " + std::to_string(k + 1) + " of " + std::to_string(count) + ": ";
    try {
      std::rethrow_exception(errors[k]);
    } catch (const transport::TransportError& e) {
      throw ProbeError(stream + e.what());
    } catch (const ProbeError& e) {
      throw ProbeError(stream + e.what());
    }
  }
}

std::string option_error(const std::string& field, const std::string& value,
                         const std::string& limit) {
  return "prober option " + field + " = " + value + ": " + limit;
}

// What the client sends of the handshake at most: hello (with the longest name) and response
// (one frame header to spare).
uint64_t handshake_bytes() {
  return 3 * kFrameHeaderBytes + max_payload_bytes(FrameType::kHello) +
         max_payload_bytes(FrameType::kResponse);
}

// What a joined connection sends besides its bulk data: the handshake, its syncs and its bye.
uint64_t join_overhead_bytes() { return handshake_bytes() + 3 * kFrameHeaderBytes; }

// After the bye, the server closes the connection once its session is over and it is free for
// the next: waiting for that, the next probe of this peer (ours or another prober's) does not
// find it still busy with this one.
void await_server_close(const ProbeChannel& channel, std::chrono::milliseconds io_timeout) {
  const auto deadline = Clock::now() + io_timeout;
  while (true) {
    std::byte extra;
    const ssize_t got = ::recv(channel.fd(), &extra, 1, 0);
    if (got == 0 || (got < 0 && errno == ECONNRESET)) return;
    if (got > 0) throw ProbeError("the peer sent more after the bye");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      throw ProbeError(std::string("recv: ") + std::strerror(errno));
    }
    pollfd readable{channel.fd(), POLLIN, 0};
    if (::poll(&readable, 1, transport::poll_timeout_ms(deadline)) == 0) {
      throw ProbeError("timed out waiting for the peer to close the session");
    }
  }
}

// A connection to `peer`, authenticated with `hello`, as `who`; `phase` says which step it is in.
std::pair<ProbeChannel, SessionOffer> open_connection(const ProbePeer& peer,
                                                      const ProbeOptions& options,
                                                      const std::string& who,
                                                      const HelloOptions& hello,
                                                      std::string& phase) {
  phase = "connect";
  transport::UniqueFd fd =
      transport::connect_until(peer.host, peer.port, Clock::now() + options.connect_timeout);
  transport::set_tcp_nodelay(fd.get());
  ProbeChannel channel(std::move(fd), who, options.io_timeout, options.emulated_link);
  phase = "authentication";
  SessionOffer offer = authenticate_to_server(channel, options.secret, options.self_name, hello);
  return {std::move(channel), offer};
}

void say_bye(ProbeChannel& channel, std::chrono::milliseconds io_timeout) {
  channel.send(FrameType::kBye);
  await_server_close(channel, io_timeout);
}

// The bulk rate over `plan`'s streams, connections joining the session of `ticket` at once (Gbit/s),
// each sending for `duration` within its share of `budget`; adds what they sent to `sent`.
double measure_joined_bulk(const ProbePeer& peer, const ProbeOptions& options,
                           const std::string& who, const SessionTicket& ticket,
                           const transport::StreamPlan& plan, std::chrono::milliseconds duration,
                           uint64_t budget, uint64_t& sent) {
  const int streams = plan.streams;
  std::vector<std::optional<ProbeChannel>> channels(streams);
  on_each_stream(streams, [&](int k) {
    std::string step;
    try {
      channels[k].emplace(
          open_connection(peer, options, who, {kProtocolVersion, ticket}, step).first);
      if (plan.buffer_bytes > 0) transport::set_socket_buffers(channels[k]->fd(), plan.buffer_bytes);
    } catch (const ProbeError& e) {
      throw ProbeError(step + ": " + e.what());
    } catch (const transport::TransportError& e) {
      throw ProbeError(step + ": " + e.what());
    }
  });
  const std::vector<std::byte> message(options.bulk_message_bytes, std::byte{0xa5});
  const uint64_t share = budget / static_cast<uint64_t>(streams) - join_overhead_bytes();
  std::vector<double> gbps(streams);
  const auto start = Clock::now();
  on_each_stream(streams, [&](int k) {
    gbps[k] = send_bulk(*channels[k], kProtocolVersion, message, start, start + duration, share);
  });
  on_each_stream(streams, [&](int k) { say_bye(*channels[k], options.io_timeout); });
  // The streams ran side by side over the same half: the link carried the sum of their rates.
  double total = 0;
  for (int k = 0; k < streams; ++k) {
    total += gbps[k];
    sent += channels[k]->bytes_sent();
  }
  return total;
}

// One authenticated session to `peer` (opened in the newest protocol version, again in the
// oldest when the peer does not speak it): connect, authenticate, `measure` (which names the
// phase it is in and adds what other connections sent), bye. Every error becomes ProbeError
// "<peer>: <phase>: <why>".
template <typename Measure>
ProbeResult run_session(const ProbePeer& peer, const ProbeOptions& options, Measure measure) {
  check_probe_options(options);
  const std::string who =
      "prober peer " + peer.name + " (" + peer.host + ":" + std::to_string(peer.port) + ")";
  std::string phase = "connect";
  try {
    std::optional<std::pair<ProbeChannel, SessionOffer>> session;
    try {
      session.emplace(open_connection(peer, options, who, {}, phase));
    } catch (const ProbeVersionRefused&) {
      // A prober of an older release: this session speaks its version.
      session.emplace(open_connection(peer, options, who, {kOldestProtocolVersion, {}}, phase));
    }
    auto& [channel, offer] = *session;
    uint64_t other_bytes = 0;
    api::LinkMeasurement measurement = measure(channel, offer, phase, other_bytes);
    phase = "bye";
    say_bye(channel, options.io_timeout);
    measurement.measured_at = kube::format_rfc3339(std::chrono::system_clock::now());
    return {measurement, channel.bytes_sent() + other_bytes};
  } catch (const ProbeError& e) {
    // The channel's errors already start with the peer; the others do not.
    const std::string what = e.what();
    const size_t at = what.find(who + ": ");
    const std::string detail =
        at == std::string::npos ? what : what.substr(0, at) + what.substr(at + who.size() + 2);
    if (dynamic_cast<const ProbeBusy*>(&e) != nullptr) {
      throw ProbeBusy(who + ": " + phase + ": " + detail);
    }
    throw ProbeError(who + ": " + phase + ": " + detail);
  } catch (const transport::TransportError& e) {
    throw ProbeError(who + ": " + phase + ": " + e.what());
  }
}

}  // namespace

uint64_t fixed_probe_bytes(const ProbeOptions& options) {
  const uint64_t pings =
      static_cast<uint64_t>(options.round_trips) * (kFrameHeaderBytes + kPingPayloadBytes);
  const uint64_t small = static_cast<uint64_t>(options.small_messages) *
                         (2 * kFrameHeaderBytes + options.small_message_bytes);
  // The bulk phase's two syncs, the bye.
  return handshake_bytes() + pings + small + 3 * kFrameHeaderBytes;
}

void check_probe_options(const ProbeOptions& options) {
  check_probe_secret(options.secret, "prober option secret");
  if (options.self_name.empty() || options.self_name.size() > kMaxPeerNameBytes) {
    throw ProbeError(option_error("self_name", "'" + options.self_name + "'",
                                  "must be 1 to " + std::to_string(kMaxPeerNameBytes) + " bytes"));
  }
  for (const auto& [field, count] : {std::pair{"round_trips", options.round_trips},
                                     std::pair{"check_round_trips", options.check_round_trips}}) {
    if (count < 1 || count > kMaxRoundTrips) {
      throw ProbeError(option_error(field, std::to_string(count),
                                    "must be 1 to " + std::to_string(kMaxRoundTrips)));
    }
  }
  if (options.small_messages < 1 || options.small_messages > kMaxSmallMessages) {
    throw ProbeError(option_error("small_messages", std::to_string(options.small_messages),
                                  "must be 1 to " + std::to_string(kMaxSmallMessages)));
  }
  for (const auto& [field, bytes] : {std::pair{"small_message_bytes", options.small_message_bytes},
                                     std::pair{"bulk_message_bytes", options.bulk_message_bytes}}) {
    if (bytes < 1 || bytes > kMaxDataFrameBytes) {
      throw ProbeError(option_error(field, std::to_string(bytes),
                                    "must be 1 to " + std::to_string(kMaxDataFrameBytes)));
    }
  }
  if (options.bulk_duration.count() < 1 || options.bulk_duration > kMaxBulkDuration) {
    throw ProbeError(
        option_error("bulk_duration", std::to_string(options.bulk_duration.count()) + " ms",
                     "must be 1 to " + std::to_string(kMaxBulkDuration.count()) + " ms"));
  }
  const uint64_t least =
      fixed_probe_bytes(options) + kFrameHeaderBytes + options.bulk_message_bytes;
  if (options.max_bytes < least) {
    throw ProbeError(option_error("max_bytes", std::to_string(options.max_bytes),
                                  "must be at least " + std::to_string(least) +
                                      " (the pings, the small messages and one bulk message)"));
  }
  if (options.bulk_round_trips < 1 || options.bulk_round_trips > kMaxBulkRoundTrips) {
    throw ProbeError(option_error("bulk_round_trips", std::to_string(options.bulk_round_trips),
                                  "must be 1 to " + std::to_string(kMaxBulkRoundTrips)));
  }
  if (options.bulk_streams < 0 || options.bulk_streams > placement::kMaxTcpStreamsPerLink) {
    throw ProbeError(option_error("bulk_streams", std::to_string(options.bulk_streams),
                                  "must be 0 (chosen by the link) to " +
                                      std::to_string(placement::kMaxTcpStreamsPerLink)));
  }
  if (!(options.link_capacity_gbps >= placement::kMinBandwidthGbps &&
        options.link_capacity_gbps <= placement::kMaxBandwidthGbps)) {
    throw ProbeError(option_error("link_capacity_gbps",
                                  placement::number_text(options.link_capacity_gbps),
                                  "must be in [" + placement::number_text(placement::kMinBandwidthGbps) +
                                      ", " + placement::number_text(placement::kMaxBandwidthGbps) +
                                      "] Gbit/s"));
  }
  for (const auto& [field, timeout] : {std::pair{"connect_timeout", options.connect_timeout},
                                       std::pair{"io_timeout", options.io_timeout}}) {
    if (timeout.count() <= 0) {
      throw ProbeError(
          option_error(field, std::to_string(timeout.count()) + " ms", "must be positive"));
    }
  }
}

std::chrono::milliseconds bulk_duration_for(const ProbeOptions& options, double rtt_ms) {
  const double round_trips_ms = std::ceil(options.bulk_round_trips * std::max(rtt_ms, 0.0));
  if (!(round_trips_ms < static_cast<double>(kMaxBulkDuration.count()))) return kMaxBulkDuration;
  return std::max(options.bulk_duration,
                  std::chrono::milliseconds(static_cast<int64_t>(round_trips_ms)));
}

transport::StreamPlan plan_bulk_streams(const ProbeOptions& options, double rtt_ms, int joins,
                                        uint64_t bulk_budget) {
  if (options.emulated_link.shaped()) return {};
  const double capacity = options.link_capacity_gbps * 1e9 / 8;
  const double rtt_s = std::max(rtt_ms, 0.0) / 1e3;
  const transport::SocketBufferLimits limits = transport::read_socket_buffer_limits();
  transport::StreamPlan plan = transport::plan_link_streams(
      capacity, rtt_s, joins < 1 ? 1 : options.bulk_streams, limits);
  // The one-stream phase takes a (streams + 1)th of the budget; each joined stream its share
  // of the rest, which must hold its overhead and one message.
  const uint64_t per_stream =
      join_overhead_bytes() + kFrameHeaderBytes + options.bulk_message_bytes;
  int streams = std::min(plan.streams, std::max(joins, 1));
  while (streams > 1 && bulk_budget / static_cast<uint64_t>(streams + 1) < per_stream) --streams;
  if (streams != plan.streams) plan = transport::plan_link_streams(capacity, rtt_s, streams, limits);
  return plan;
}

ProbeResult measure_peer(const ProbePeer& peer, const ProbeOptions& options) {
  return run_session(peer, options,
                     [&](ProbeChannel& channel, const SessionOffer& offer, std::string& phase,
                         uint64_t& other_bytes) {
    phase = "round-trip time";
    api::LinkMeasurement measurement = measure_rtt(channel, options.round_trips);
    phase = "small-message throughput";
    measurement.small_gbps = measure_small(channel, offer.version, options);
    const uint64_t budget = options.max_bytes - fixed_probe_bytes(options);
    const auto duration = bulk_duration_for(options, measurement.rtt_p50_ms);
    const transport::StreamPlan plan =
        plan_bulk_streams(options, measurement.rtt_p50_ms, offer.joins, budget);
    const int streams = plan.streams;
    if (plan.buffer_bytes > 0) transport::set_socket_buffers(channel.fd(), plan.buffer_bytes);
    if (streams == 1) {
      phase = "bulk throughput";
      measurement.bulk_gbps = measure_bulk(channel, offer.version, options, duration, budget);
      return measurement;
    }
    const uint64_t one_stream_budget = budget / static_cast<uint64_t>(streams + 1);
    phase = "bulk throughput, one stream";
    measurement.stream_gbps =
        measure_bulk(channel, offer.version, options, duration, one_stream_budget);
    phase = "bulk throughput, " + std::to_string(streams) + " streams";
    measurement.bulk_gbps =
        measure_joined_bulk(peer, options, channel.peer(), offer.ticket, plan, duration,
                            budget - one_stream_budget, other_bytes);
    measurement.streams = streams;
    return measurement;
  });
}

uint64_t round_trip_probe_bytes(const ProbeOptions& options) {
  const uint64_t pings =
      static_cast<uint64_t>(options.check_round_trips) * (kFrameHeaderBytes + kPingPayloadBytes);
  return handshake_bytes() + pings + kFrameHeaderBytes;  // the bye
}

ProbeResult measure_round_trips(const ProbePeer& peer, const ProbeOptions& options) {
  return run_session(peer, options,
                     [&](ProbeChannel& channel, const SessionOffer&, std::string& phase, uint64_t&) {
                       phase = "round-trip time";
                       return measure_rtt(channel, options.check_round_trips);
                     });
}

}  // namespace tessel::prober
