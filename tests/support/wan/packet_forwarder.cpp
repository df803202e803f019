#include "tests/support/wan/packet_forwarder.h"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>

#include "tests/support/wan/link_shaper.h"

namespace tessel::wan {
namespace {

// Packets read from one device before the loop turns to the others and to due releases.
constexpr int kReadBatch = 64;

struct HeldPacket {
  Clock::time_point arrival;
  std::size_t wire = 0;             // the bytes it takes on the link
  std::size_t length = 0;           // of `bytes`, as read: with its virtio_net_hdr when offloaded
  std::vector<std::uint8_t> bytes;  // a whole read buffer (buffer_bytes)
};

// The largest packet a TUN device with offload hands over: a GSO super-packet of 64 KB.
constexpr std::size_t kMaxSuperPacket = 65536;

// The header ahead of each packet of a TUN device with IFF_VNET_HDR: the kernel's struct
// virtio_net_hdr (linux/virtio_net.h, which does not compile as C++), in this machine's byte
// order (a TUN device's default).
struct VirtioNetHeader {
  std::uint8_t flags;
  std::uint8_t gso_type;
  std::uint16_t hdr_len;
  std::uint16_t gso_size;
  std::uint16_t csum_start;
  std::uint16_t csum_offset;
};
static_assert(sizeof(VirtioNetHeader) == 10);
constexpr std::uint8_t kGsoTcpV4 = 1;   // VIRTIO_NET_HDR_GSO_TCPV4
constexpr std::uint8_t kGsoEcn = 0x80;  // VIRTIO_NET_HDR_GSO_ECN, a flag on gso_type

// The IPv4 destination of `packet`, host order; 0 when it is not IPv4.
std::uint32_t ipv4_destination(const std::uint8_t* packet, std::size_t size) {
  if (size < 20 || (packet[0] >> 4) != 4) return 0;
  return std::uint32_t{packet[16]} << 24 | std::uint32_t{packet[17]} << 16 |
         std::uint32_t{packet[18]} << 8 | std::uint32_t{packet[19]};
}

// The bytes an IPv4 packet of `size` takes on the wire: a TCP super-packet (GSO, segments of
// gso_size payload bytes) stands for as many segments, each with its own IP and TCP headers.
std::size_t wire_bytes(const VirtioNetHeader& header, const std::uint8_t* packet,
                       std::size_t size) {
  if ((header.gso_type & ~kGsoEcn) != kGsoTcpV4 || header.gso_size == 0 || size < 20) return size;
  const std::size_t ip_header = (packet[0] & 0x0fu) * std::size_t{4};
  if (size < ip_header + 20) return size;
  const std::size_t headers = ip_header + (packet[ip_header + 12] >> 4u) * std::size_t{4};
  if (size <= headers) return size;
  const std::size_t segments = (size - headers + header.gso_size - 1) / header.gso_size;
  return size + (segments - 1) * headers;
}

}  // namespace

struct PacketForwarder::State {
  std::vector<int> tun_fds;
  std::uint32_t base = 0;
  int mtu = 0;
  std::size_t header = 0;           // the virtio_net_hdr ahead of each packet (offload), or 0
  std::size_t buffer_bytes = 0;     // the largest read: header and packet
  std::size_t spare_limit = 0;      // spare buffers kept: about 8 MiB of them
  std::vector<LinkShaper> shapers;  // [from * n + to]
  std::vector<std::deque<HeldPacket>> held;      // the same layout, each in arrival order
  std::vector<std::vector<std::uint8_t>> spare;  // buffers to reuse
  std::atomic<std::uint64_t> packets_in{0}, packets_out{0}, bytes_out{0}, dropped_queue{0},
      dropped_loss{0}, dropped_unroutable{0}, write_errors{0};
};

PacketForwarder::PacketForwarder(std::vector<int> tun_fds, std::uint32_t base,
                                 const std::vector<LinkSettings>& links, int mtu, bool offload,
                                 std::uint64_t seed)
    : state_(std::make_unique<State>()), seed_(seed) {
  const std::size_t n = tun_fds.size();
  if (links.size() != n * n) throw std::invalid_argument("PacketForwarder: links is not n x n");
  state_->tun_fds = std::move(tun_fds);
  state_->base = base;
  state_->mtu = mtu;
  state_->header = offload ? sizeof(VirtioNetHeader) : 0;
  state_->buffer_bytes =
      state_->header + (offload ? kMaxSuperPacket : static_cast<std::size_t>(mtu));
  state_->spare_limit = std::max<std::size_t>(64, (std::size_t{8} << 20) / state_->buffer_bytes);
  for (std::size_t i = 0; i < links.size(); ++i) {
    state_->shapers.emplace_back(links[i], mtu, seed + i);  // each pair its own loss draws
  }
  state_->held.resize(links.size());
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this] { run(); });
  sched_param priority{};
  priority.sched_priority = kForwarderPriority;
  realtime_ = ::pthread_setschedparam(thread_.native_handle(), SCHED_FIFO, &priority) == 0;
}

PacketForwarder::~PacketForwarder() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void PacketForwarder::stop() {
  if (!thread_.joinable()) return;
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  thread_.join();
}

void PacketForwarder::set_link(std::size_t pair, const LinkSettings& settings) {
  if (pair >= state_->shapers.size()) throw std::out_of_range("PacketForwarder: no such link");
  std::lock_guard lock(pending_mutex_);
  pending_.emplace_back(pair, settings);
  has_pending_.store(true, std::memory_order_release);
}

ForwarderStats PacketForwarder::stats() const {
  const State& s = *state_;
  return {s.packets_in.load(),   s.packets_out.load(),
          s.bytes_out.load(),    s.dropped_queue.load(),
          s.dropped_loss.load(), s.dropped_unroutable.load(),
          s.write_errors.load(), realtime_};
}

void PacketForwarder::run() {
  State& s = *state_;
  const std::size_t n = s.tun_fds.size();
  // The kernel may defer a sleeping thread's wake-up by its timer slack (50 us by default) to
  // batch wake-ups; a held packet's release should not drift by it.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  const int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  auto watch = [&](int fd, std::uint64_t tag) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = tag;
    ::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
  };
  for (std::size_t i = 0; i < n; ++i) watch(s.tun_fds[i], i);
  watch(wake_fd_, n);

  // Buffers keep their full size, the length read beside them: resizing a 64 KB buffer back up
  // would clear it on every read.
  auto take_buffer = [&] {
    if (s.spare.empty()) return std::vector<std::uint8_t>(s.buffer_bytes);
    std::vector<std::uint8_t> buffer = std::move(s.spare.back());
    s.spare.pop_back();
    return buffer;
  };
  auto give_back = [&](std::vector<std::uint8_t> buffer) {
    if (s.spare.size() < s.spare_limit) s.spare.push_back(std::move(buffer));
  };

  // Takes the settings set_link() left for the thread.
  auto take_new_settings = [&] {
    if (!has_pending_.load(std::memory_order_acquire)) return;
    std::lock_guard lock(pending_mutex_);
    for (const auto& [pair, settings] : pending_) {
      s.shapers[pair] = LinkShaper(settings, s.mtu, seed_ + pair);
    }
    pending_.clear();
    has_pending_.store(false, std::memory_order_relaxed);
  };

  // Reads what device `from` has (up to a batch) and queues each packet on its link.
  auto read_from = [&](std::size_t from) {
    take_new_settings();
    for (int k = 0; k < kReadBatch; ++k) {
      std::vector<std::uint8_t> buffer = take_buffer();
      const ssize_t got = ::read(s.tun_fds[from], buffer.data(), buffer.size());
      if (got <= 0) {
        give_back(std::move(buffer));
        return;
      }
      s.packets_in.fetch_add(1, std::memory_order_relaxed);
      const auto length = static_cast<std::size_t>(got);
      if (length < s.header) {
        s.dropped_unroutable.fetch_add(1, std::memory_order_relaxed);
        give_back(std::move(buffer));
        continue;
      }
      const std::uint8_t* packet = buffer.data() + s.header;
      const std::size_t size = length - s.header;
      const std::uint32_t destination = ipv4_destination(packet, size);
      const std::uint64_t to = std::uint64_t{destination} - s.base - 1;
      if (destination <= s.base || to >= n || to == from) {
        s.dropped_unroutable.fetch_add(1, std::memory_order_relaxed);
        give_back(std::move(buffer));
        continue;
      }
      const std::size_t pair = from * n + to;
      std::size_t wire = size;
      if (s.header > 0) {
        VirtioNetHeader header{};
        std::memcpy(&header, buffer.data(), sizeof header);
        wire = wire_bytes(header, packet, size);
      }
      const Admission admission = s.shapers[pair].admit(wire, Clock::now());
      if (admission.fate == Fate::kDroppedQueueFull) {
        s.dropped_queue.fetch_add(1, std::memory_order_relaxed);
        give_back(std::move(buffer));
      } else if (admission.fate == Fate::kDroppedLoss) {
        s.dropped_loss.fetch_add(1, std::memory_order_relaxed);
        give_back(std::move(buffer));
      } else {
        s.held[pair].push_back({admission.arrival, wire, length, std::move(buffer)});
      }
    }
  };

  // Writes every held packet whose time has come; the earliest time still ahead, if any.
  auto release_due = [&]() -> std::optional<Clock::time_point> {
    const Clock::time_point now = Clock::now();
    std::optional<Clock::time_point> next;
    for (std::size_t pair = 0; pair < s.held.size(); ++pair) {
      auto& line = s.held[pair];
      while (!line.empty() && line.front().arrival <= now) {
        const std::vector<std::uint8_t>& bytes = line.front().bytes;
        const std::size_t length = line.front().length;
        const std::size_t wire = line.front().wire;
        // Counted before the write: the packet may reach its reader (and a reply come back)
        // before this thread runs again, and whoever then reads the counters should see it.
        s.packets_out.fetch_add(1, std::memory_order_relaxed);
        s.bytes_out.fetch_add(wire, std::memory_order_relaxed);
        if (::write(s.tun_fds[pair % n], bytes.data(), length) != static_cast<ssize_t>(length)) {
          s.packets_out.fetch_sub(1, std::memory_order_relaxed);
          s.bytes_out.fetch_sub(wire, std::memory_order_relaxed);
          s.write_errors.fetch_add(1, std::memory_order_relaxed);
        }
        give_back(std::move(line.front().bytes));
        line.pop_front();
      }
      if (!line.empty() && (!next || line.front().arrival < *next)) next = line.front().arrival;
    }
    return next;
  };

  epoll_event events[kMaxNamespaces + 1];
  for (;;) {
    const std::optional<Clock::time_point> next = release_due();
    timespec timeout{};
    timespec* wait = nullptr;  // no packet held: wait for one
    if (next) {
      const auto left = std::max<std::int64_t>(
          0, std::chrono::duration_cast<std::chrono::nanoseconds>(*next - Clock::now()).count());
      timeout.tv_sec = left / 1'000'000'000;
      timeout.tv_nsec = left % 1'000'000'000;
      wait = &timeout;
    }
    const int ready = ::epoll_pwait2(epoll, events, static_cast<int>(n + 1), wait, nullptr);
    for (int e = 0; e < ready; ++e) {
      if (events[e].data.u64 == n) {
        ::close(epoll);
        return;
      }
      read_from(events[e].data.u64);
    }
  }
}

}  // namespace tessel::wan
