// The WAN emulator's data path: one thread reads IPv4 packets from every namespace's TUN
// device, passes each through the LinkShaper of its (source, destination) pair, holds it until
// its arrival time and writes it to the destination namespace's TUN device.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/support/wan/link_settings.h"

namespace tessel::wan {

struct ForwarderStats {
  std::uint64_t packets_in = 0;   // read from a TUN device
  std::uint64_t packets_out = 0;  // written to a TUN device
  std::uint64_t bytes_out = 0;
  std::uint64_t dropped_queue = 0;       // found the link's queue full
  std::uint64_t dropped_loss = 0;        // drawn lost
  std::uint64_t dropped_unroutable = 0;  // not IPv4, or to no namespace of the emulator
  std::uint64_t write_errors = 0;        // the destination TUN device refused it
};

class PacketForwarder {
 public:
  // tun_fds[i]: namespace i's TUN device (non-blocking; the forwarder does not own them);
  // namespace i has address base + i + 1; links: link_matrix's layout.
  PacketForwarder(std::vector<int> tun_fds, std::uint32_t base,
                  const std::vector<LinkSettings>& links, int mtu, std::uint64_t seed);
  ~PacketForwarder();
  PacketForwarder(const PacketForwarder&) = delete;
  PacketForwarder& operator=(const PacketForwarder&) = delete;

  // Stops the thread; packets still held are dropped. Idempotent.
  void stop();
  // Gives the link `pair` (link_matrix's index) new settings: the forwarding thread takes them
  // before it admits its next packet, on a fresh shaper (an empty queue, a full bucket). Packets
  // already admitted keep their arrival times. Thread-safe; the caller checks the settings.
  void set_link(std::size_t pair, const LinkSettings& settings);
  ForwarderStats stats() const;

 private:
  struct State;
  void run();

  std::unique_ptr<State> state_;
  std::uint64_t seed_ = 0;
  // New settings not yet taken by the thread, and whether there are any.
  std::mutex pending_mutex_;
  std::vector<std::pair<std::size_t, LinkSettings>> pending_;  // under pending_mutex_
  std::atomic<bool> has_pending_{false};
  int wake_fd_ = -1;  // an eventfd that stop() signals
  std::thread thread_;
};

}  // namespace tessel::wan
