// What the prober's tests share: a ProbeServer on a loopback port, a client's options, the
// peer and the connection that reach a server on loopback, the error text an action throws, and
// a generous wait for a condition.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "noderuntime/prober/probe_channel.h"
#include "noderuntime/prober/probe_client.h"
#include "noderuntime/prober/probe_error.h"
#include "noderuntime/prober/probe_server.h"
#include "noderuntime/transport/socket.h"

namespace tessel::prober {

// Generous: only runs out when the code under test is broken.
inline constexpr std::chrono::seconds kTestTimeout{30};

// A ProbeServer with `secret`, serving on `listener`.
inline std::unique_ptr<ProbeServer> start_probe_server(
    transport::TcpListener listener, const std::string& secret,
    std::chrono::milliseconds io_timeout = ProbeServerOptions{}.io_timeout) {
  ProbeServerOptions options;
  options.secret = secret;
  options.io_timeout = io_timeout;
  return std::make_unique<ProbeServer>(std::move(listener), options);
}

// The same on a loopback port the kernel picks.
inline std::unique_ptr<ProbeServer> start_probe_server(
    const std::string& secret,
    std::chrono::milliseconds io_timeout = ProbeServerOptions{}.io_timeout) {
  return start_probe_server(transport::TcpListener::bind("127.0.0.1", 0), secret, io_timeout);
}

// A client's options with `secret`, this prober named gpu-node-1; the rest defaults.
inline ProbeOptions probe_options_with(const std::string& secret) {
  ProbeOptions options;
  options.secret = secret;
  options.self_name = "gpu-node-1";
  return options;
}

// A shorter measurement than the defaults: `round_trips` pings, `small_messages` small messages,
// 1 MiB bulk messages for `bulk_duration`.
inline ProbeOptions short_probe_options(const std::string& secret, int round_trips,
                                        int small_messages,
                                        std::chrono::milliseconds bulk_duration) {
  ProbeOptions options = probe_options_with(secret);
  options.round_trips = round_trips;
  options.small_messages = small_messages;
  options.bulk_message_bytes = 1024 * 1024;
  options.bulk_duration = bulk_duration;
  return options;
}

// The prober on loopback at `port`, as the peer `name`.
inline ProbePeer loopback_peer(uint16_t port, const std::string& name = "gpu-node-2") {
  return {name, "127.0.0.1", port};
}

// How the client's errors name that peer: "prober peer <name> (127.0.0.1:<port>)".
inline std::string loopback_peer_text(uint16_t port, const std::string& name = "gpu-node-2") {
  return "prober peer " + name + " (127.0.0.1:" + std::to_string(port) + ")";
}

// A raw connection to the server on loopback at `port`, unauthenticated; `name` names the peer
// in its errors.
inline ProbeChannel loopback_channel(uint16_t port, const std::string& name) {
  auto fd = transport::connect_until("127.0.0.1", port,
                                     std::chrono::steady_clock::now() + kTestTimeout);
  transport::set_tcp_nodelay(fd.get());
  return ProbeChannel(std::move(fd), name, std::chrono::milliseconds(5000));
}

// The message of the ProbeError `action` throws; "(no error)" when it throws none.
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const ProbeError& e) {
    return e.what();
  }
  return "(no error)";
}

// Waits until `condition` holds, at most kTestTimeout; whether it came to hold.
inline bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kTestTimeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace tessel::prober
