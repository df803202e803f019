#include "noderuntime/prober/probe_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

#include "kube/object.h"
#include "noderuntime/prober/probe_auth.h"
#include "noderuntime/prober/probe_channel.h"
#include "noderuntime/prober/probe_error.h"
#include "noderuntime/prober/probe_handshake.h"
#include "noderuntime/transport/socket.h"
#include "noderuntime/transport/transport_error.h"

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

// Sends a sync and checks the peer counted exactly the data bytes sent since the last one.
void sync(ProbeChannel& channel, uint64_t sent, std::vector<std::byte>& payload) {
  channel.send(FrameType::kSync);
  channel.receive_expected(FrameType::kSyncAck, payload, 8);
  uint64_t counted = 0;
  for (int i = 7; i >= 0; --i) counted = (counted << 8) | static_cast<uint8_t>(payload[i]);
  if (counted != sent) {
    throw ProbeError("the peer acknowledged " + std::to_string(counted) + " bytes of the " +
                     std::to_string(sent) + " sent");
  }
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

double measure_small(ProbeChannel& channel, const ProbeOptions& options) {
  const std::vector<std::byte> message(options.small_message_bytes, std::byte{0x5a});
  std::vector<std::byte> payload;
  const auto start = Clock::now();
  for (int i = 0; i < options.small_messages; ++i) {
    channel.send(FrameType::kData, message);
    sync(channel, message.size(), payload);
  }
  const double bits = 8.0 * static_cast<double>(message.size()) * options.small_messages;
  return bits / seconds_between(start, Clock::now()) / 1e9;
}

double measure_bulk(ProbeChannel& channel, const ProbeOptions& options, uint64_t budget) {
  const std::vector<std::byte> message(options.bulk_message_bytes, std::byte{0xa5});
  const uint64_t per_message = kFrameHeaderBytes + message.size();
  std::vector<std::byte> payload;
  uint64_t sent = 0;
  const auto start = Clock::now();
  const auto end_sending = start + options.bulk_duration;
  do {
    channel.send(FrameType::kData, message);
    sent += message.size();
    budget -= per_message;
  } while (Clock::now() < end_sending && budget >= per_message);
  sync(channel, sent, payload);
  return 8.0 * static_cast<double>(sent) / seconds_between(start, Clock::now()) / 1e9;
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

// One authenticated session to `peer`: connect, authenticate, `measure` (which names the phase
// it is in), bye. Every error becomes ProbeError "<peer>: <phase>: <why>".
template <typename Measure>
ProbeResult run_session(const ProbePeer& peer, const ProbeOptions& options, Measure measure) {
  check_probe_options(options);
  const std::string who =
      "prober peer " + peer.name + " (" + peer.host + ":" + std::to_string(peer.port) + ")";
  std::string phase = "connect";
  try {
    transport::UniqueFd fd =
        transport::connect_until(peer.host, peer.port, Clock::now() + options.connect_timeout);
    transport::set_tcp_nodelay(fd.get());
    ProbeChannel channel(std::move(fd), who, options.io_timeout, options.emulated_link);
    phase = "authentication";
    authenticate_to_server(channel, options.secret, options.self_name);
    api::LinkMeasurement measurement = measure(channel, phase);
    phase = "bye";
    channel.send(FrameType::kBye);
    await_server_close(channel, options.io_timeout);
    measurement.measured_at = kube::format_rfc3339(std::chrono::system_clock::now());
    return {measurement, channel.bytes_sent()};
  } catch (const ProbeError& e) {
    // The channel's errors already start with the peer; the others do not.
    const std::string what = e.what();
    const std::string detail = what.starts_with(who) ? what.substr(who.size() + 2) : what;
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
  // The bulk phase's sync, the bye.
  return handshake_bytes() + pings + small + 2 * kFrameHeaderBytes;
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
  for (const auto& [field, timeout] : {std::pair{"connect_timeout", options.connect_timeout},
                                       std::pair{"io_timeout", options.io_timeout}}) {
    if (timeout.count() <= 0) {
      throw ProbeError(
          option_error(field, std::to_string(timeout.count()) + " ms", "must be positive"));
    }
  }
}

ProbeResult measure_peer(const ProbePeer& peer, const ProbeOptions& options) {
  return run_session(peer, options, [&](ProbeChannel& channel, std::string& phase) {
    phase = "round-trip time";
    api::LinkMeasurement measurement = measure_rtt(channel, options.round_trips);
    phase = "small-message throughput";
    measurement.small_gbps = measure_small(channel, options);
    phase = "bulk throughput";
    measurement.bulk_gbps =
        measure_bulk(channel, options, options.max_bytes - fixed_probe_bytes(options));
    return measurement;
  });
}

uint64_t round_trip_probe_bytes(const ProbeOptions& options) {
  const uint64_t pings =
      static_cast<uint64_t>(options.check_round_trips) * (kFrameHeaderBytes + kPingPayloadBytes);
  return handshake_bytes() + pings + kFrameHeaderBytes;  // the bye
}

ProbeResult measure_round_trips(const ProbePeer& peer, const ProbeOptions& options) {
  return run_session(peer, options, [&](ProbeChannel& channel, std::string& phase) {
    phase = "round-trip time";
    return measure_rtt(channel, options.check_round_trips);
  });
}

}  // namespace tessel::prober
