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
  std::vector<std::uint8_t> bytes;
};

// The IPv4 destination of `packet`, host order; 0 when it is not IPv4.
std::uint32_t ipv4_destination(const std::uint8_t* packet, std::size_t size) {
  if (size < 20 || (packet[0] >> 4) != 4) return 0;
  return std::uint32_t{packet[16]} << 24 | std::uint32_t{packet[17]} << 16 |
         std::uint32_t{packet[18]} << 8 | std::uint32_t{packet[19]};
}

}  // namespace

struct PacketForwarder::State {
  std::vector<int> tun_fds;
  std::uint32_t base = 0;
  int mtu = 0;
  std::vector<LinkShaper> shapers;               // [from * n + to]
  std::vector<std::deque<HeldPacket>> held;      // the same layout, each in arrival order
  std::vector<std::vector<std::uint8_t>> spare;  // buffers to reuse
  std::atomic<std::uint64_t> packets_in{0}, packets_out{0}, bytes_out{0}, dropped_queue{0},
      dropped_loss{0}, dropped_unroutable{0}, write_errors{0};
};

PacketForwarder::PacketForwarder(std::vector<int> tun_fds, std::uint32_t base,
                                 const std::vector<LinkSettings>& links, int mtu,
                                 std::uint64_t seed)
    : state_(std::make_unique<State>()), seed_(seed) {
  const std::size_t n = tun_fds.size();
  if (links.size() != n * n) throw std::invalid_argument("PacketForwarder: links is not n x n");
  state_->tun_fds = std::move(tun_fds);
  state_->base = base;
  state_->mtu = mtu;
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

  auto take_buffer = [&] {
    if (s.spare.empty()) return std::vector<std::uint8_t>(static_cast<std::size_t>(s.mtu));
    std::vector<std::uint8_t> buffer = std::move(s.spare.back());
    s.spare.pop_back();
    buffer.resize(static_cast<std::size_t>(s.mtu));
    return buffer;
  };
  auto give_back = [&](std::vector<std::uint8_t> buffer) {
    if (s.spare.size() < 4096) s.spare.push_back(std::move(buffer));
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
      buffer.resize(static_cast<std::size_t>(got));
      const std::uint32_t destination = ipv4_destination(buffer.data(), buffer.size());
      const std::uint64_t to = std::uint64_t{destination} - s.base - 1;
      if (destination <= s.base || to >= n || to == from) {
        s.dropped_unroutable.fetch_add(1, std::memory_order_relaxed);
        give_back(std::move(buffer));
        continue;
      }
      const std::size_t pair = from * n + to;
      const Admission admission = s.shapers[pair].admit(buffer.size(), Clock::now());
      if (admission.fate == Fate::kDroppedQueueFull) {
        s.dropped_queue.fetch_add(1, std::memory_order_relaxed);
        give_back(std::move(buffer));
      } else if (admission.fate == Fate::kDroppedLoss) {
        s.dropped_loss.fetch_add(1, std::memory_order_relaxed);
        give_back(std::move(buffer));
      } else {
        s.held[pair].push_back({admission.arrival, std::move(buffer)});
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
        // Counted before the write: the packet may reach its reader (and a reply come back)
        // before this thread runs again, and whoever then reads the counters should see it.
        s.packets_out.fetch_add(1, std::memory_order_relaxed);
        s.bytes_out.fetch_add(bytes.size(), std::memory_order_relaxed);
        if (::write(s.tun_fds[pair % n], bytes.data(), bytes.size()) !=
            static_cast<ssize_t>(bytes.size())) {
          s.packets_out.fetch_sub(1, std::memory_order_relaxed);
          s.bytes_out.fetch_sub(bytes.size(), std::memory_order_relaxed);
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
