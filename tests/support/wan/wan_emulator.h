// The WAN emulator that the kernel's TCP sees (issue 20): N network namespaces, a TUN device in
// each (namespace i at <subnet>.(i+1)/24, so every namespace reaches every other through it),
// and a user-space forwarder between the devices that delays, rate-limits and drops packets per
// directed pair (LinkSettings). For tests and benches, run as root; never part of the product.
//
//   auto wan = WanEmulator::start(config);         // throws WanUnavailable where it cannot run
//   wan->run_in(1, "some-server --listen " + wan->address(1));
//   wan->call_in(0, [&] { /* sockets made here live in namespace 0 */ });
//
// Stopping (or destroying) it closes the devices and deletes the namespaces it made.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/support/wan/link_settings.h"
#include "tests/support/wan/network_namespace.h"
#include "tests/support/wan/packet_forwarder.h"

namespace tessel::wan {

class WanEmulator {
 public:
  // Checks the config (std::invalid_argument naming the field), then the privileges
  // (WanUnavailable naming what is missing), then makes the namespaces and devices and starts
  // forwarding. What it made is removed again when a step fails.
  static std::unique_ptr<WanEmulator> start(const WanConfig& config);
  ~WanEmulator();
  WanEmulator(const WanEmulator&) = delete;
  WanEmulator& operator=(const WanEmulator&) = delete;

  // Stops forwarding, closes the TUN devices, deletes the namespaces it made. Idempotent.
  void stop();

  std::size_t size() const { return names_.size(); }
  const std::string& namespace_name(std::size_t i) const { return names_.at(i); }
  const std::string& address(std::size_t i) const { return addresses_.at(i); }
  // The settings of the link from `from` to `to`.
  LinkSettings link(std::size_t from, std::size_t to) const;
  // Changes the link from `from` to `to` while the emulator forwards: from its next packet on,
  // the link delays, limits and drops as `settings` say (loss 1: a partition of that direction,
  // every packet dropped and no reset sent). Packets already on the link arrive as admitted.
  // Throws std::invalid_argument naming the link for settings out of range (or a loss other
  // than 0 or 1 with offload), std::out_of_range
  // for a pair that does not exist or from == to. Thread-safe.
  void set_link(std::size_t from, std::size_t to, const LinkSettings& settings);

  // `command` as it runs inside namespace i: "ip netns exec <name> <command>".
  std::string command_in(std::size_t i, const std::string& command) const;
  // Runs `command` inside namespace i with /bin/sh; its exit status, its output in `output`.
  int run_in(std::size_t i, const std::string& command, std::string& output) const;
  // Runs `action` on a thread inside namespace i (see run_in_namespace).
  void call_in(std::size_t i, const std::function<void()>& action) const;

  ForwarderStats stats() const;

 private:
  WanEmulator() = default;

  WanConfig config_;
  mutable std::mutex links_mutex_;
  std::vector<LinkSettings> links_;  // under links_mutex_ once started
  std::vector<std::string> names_, addresses_;
  std::vector<std::string> created_;  // namespaces this emulator made (and deletes)
  std::vector<int> tun_fds_;
  std::unique_ptr<PacketForwarder> forwarder_;
};

}  // namespace tessel::wan
