// The WAN emulator's data path: one thread reads IPv4 packets from every namespace's TUN
// device, passes each through the LinkShaper of its (source, destination) pair, holds it until
// its arrival time and writes it to the destination namespace's TUN device. With offload each
// packet comes and goes with its virtio_net_hdr, and a TCP super-packet is shaped by the bytes
// of the segments it stands for.
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
  std::uint64_t packets_in = 0;          // read from a TUN device (a super-packet counts once)
  std::uint64_t packets_out = 0;         // written to a TUN device
  std::uint64_t bytes_out = 0;           // the bytes the links carried (a super-packet's segments')
  std::uint64_t dropped_queue = 0;       // found the link's queue full
  std::uint64_t dropped_loss = 0;        // drawn lost
  std::uint64_t dropped_unroutable = 0;  // not IPv4, or to no namespace of the emulator
  std::uint64_t write_errors = 0;        // the destination TUN device refused it
  // The forwarding thread runs at real-time priority (SCHED_FIFO, kForwarderPriority); false
  // where the system refused it (no CAP_SYS_NICE, no real-time budget in this cgroup).
  bool realtime = false;
};

// The forwarder stands in for the network, which does not wait for a CPU: off the CPU, it lets
// its links idle (the token bucket keeps 1 ms of credit) and then admits the backlog the TUN
// devices queued meanwhile as one burst, which can overflow an emulated router queue that the
// senders' windows could never fill. On the shared 2-core build machine, at normal priority, it
// lost 10-40% of a 1 Gbit/s link that way during the 150 ms all-reduce bench
// (bench/transport/results.md, 2026-11-26 21:34 UTC). So it runs above every normal thread; it
// sleeps whenever no packet is due, and the kernel's real-time throttling (95% of a CPU by
// default) bounds it if it ever did not. Low among real-time priorities (1-99): the kernel's
// own real-time threads stay above it.
inline constexpr int kForwarderPriority = 10;

class PacketForwarder {
 public:
  // tun_fds[i]: namespace i's TUN device (non-blocking; the forwarder does not own them);
  // namespace i has address base + i + 1; links: link_matrix's layout; offload: the devices
  // were opened with it (open_tun_in).
  PacketForwarder(std::vector<int> tun_fds, std::uint32_t base,
                  const std::vector<LinkSettings>& links, int mtu, bool offload,
                  std::uint64_t seed);
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
  bool realtime_ = false;
  std::thread thread_;
};

}  // namespace tessel::wan
