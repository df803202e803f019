// bench/transport: the TCP transport over the WAN emulator (issue 20), where the kernel's TCP
// sees the real round trip. For each world size n and round trip it starts tessel-wan-emulator's
// namespaces (every directed link `--rate-mbit` with RTT/2 one-way delay), runs every rank on a
// thread inside its own namespace (one process, one clock) and measures, once with one TCP
// stream per link and once with the streams the transport chooses from the link's
// bandwidth-delay product (stream_plan.h), side by side:
// - the ring all-reduce of `--bytes` (busbw = size / time x 2(n-1)/n, the slowest rank's time,
//   every rank starting at once (a thread barrier), median over --iters after --warmup, every
//   element checked: #wrong), each iteration's time, and the CPU the process used (all ranks
//   and the emulator's forwarder) and its busiest thread (the forwarder) used meanwhile;
//   --timeline prints when rank 0 sent each chunk (its arrival schedule, SendTimeline);
// - pipeline-sized messages: rank 0 sends --messages messages of --message-bytes to rank 1,
//   throughput = bytes / (last one received - first one sent).
// `link` is the emulated rate of one directed link (IP bytes; TCP payload is 1448 of every 1500).
// `retrans`: TCP segments the ranks retransmitted during the timed all-reduces (each loss stalls
// its stream, and with it the ring, for at least a round trip); `--queue-ms` sets the emulated
// router queue ahead of every link (the emulator's default otherwise).
// Needs root and /dev/net/tun; without them it says why and exits 77 (skipped). Exits 1 when an
// element came out wrong (ctest's wan_transport_bench_smoke runs a small case).
// Usage: wan_transport_bench [--ranks 2,4] [--rtt-ms 0,50,150,250] [--rate-mbit 1000]
//        [--bytes N] [--iters 3] [--warmup 1] [--message-bytes N] [--messages 16]
//        [--streams N (instead of the chosen)] [--no-slow-start-after-idle] [--queue-ms MS]
//        [--timeline] [--no-single-stream] [--idle-ms MS] [--mtu N] [--offload] [--warm-up-links]
// Recorded results: bench/transport/results.md and docs/benchmarks.md.
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/transport/tcp_communicator.h"
#include "noderuntime/transport/transport_error.h"
#include "tests/support/wan/network_namespace.h"
#include "tests/support/wan/wan_emulator.h"

using namespace tessel::transport;
using Clock = std::chrono::steady_clock;

namespace {

struct BenchOptions {
  std::vector<int> ranks{2};
  std::vector<double> rtt_ms{0, 50, 150, 250};
  double rate_mbit = 1000;
  size_t bytes = 64 << 20;
  int iters = 3;
  int warmup = 1;
  size_t message_bytes = 8 << 20;
  int messages = 16;
  int streams = 0;  // the "chosen" column: 0 = the transport's choice
  bool slow_start_after_idle = true;
  double queue_ms = 0;   // 0: the emulator's default
  int mtu = 1500;        // of the emulated links (the TUN devices)
  bool offload = false;  // the TUN devices' TCP segmentation offload (WanConfig::offload)
  bool timeline = false;
  double idle_ms =
      0;  // the links idle this long before each all-reduce (a training step's compute)
  bool single_stream = true;  // measure 1 stream beside the chosen ones
  // Warm every link before the first all-reduce (link_warmup.h); the transport warms only a
  // pipeline's neighbours, so a data-parallel ring's links are not warmed by default.
  bool warm_up_links = false;
};

struct Measured {
  std::string plan;                 // the streams and buffers of rank 0's link to rank 1
  double allreduce_s = 0;           // median of the slowest rank's time
  std::vector<double> iteration_s;  // the slowest rank's time, per timed iteration
  double busiest_thread_s = 0;      // the CPU time of its busiest thread, per timed iteration
  double cpu_s = 0;  // the process's CPU time (all threads: ranks, forwarder), per timed iteration
  long wrong = 0;
  long retransmitted = 0;  // TCP segments, all ranks, timed all-reduces
  double pipeline_s = 0;
};

float input(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 13) % 41) - 20);
}

// TCP segments retransmitted so far in the calling thread's network namespace (RetransSegs of
// /proc/thread-self/net/snmp: /proc/self would name the process's namespace); -1 if unreadable.
long retransmitted_segments() {
  std::ifstream in("/proc/thread-self/net/snmp");
  std::string names, values;
  while (std::getline(in, names)) {
    if (names.rfind("Tcp:", 0) != 0 || !std::getline(in, values)) continue;
    std::istringstream n(names), v(values);
    std::string name, value;
    while (n >> name && v >> value) {
      if (name == "RetransSegs") return std::stol(value);
    }
  }
  return -1;
}

std::vector<int> all_ranks(int n) {
  std::vector<int> group(n);
  for (int i = 0; i < n; ++i) group[i] = i;
  return group;
}

// Passes every call on to `inner` and notes when each send is posted. The ring posts chunk k of
// step t + 1 as soon as chunk k of step t has arrived and been reduced, so the send times are
// the arrival times of every step's chunks but the last step's (--timeline).
class SendTimeline final : public Communicator {
 public:
  explicit SendTimeline(Communicator& inner) : inner_(inner), start_(Clock::now()) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  Request isend(int peer, const TensorInfo& info, std::span<const std::byte> payload) override {
    sent_ms_.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start_).count());
    return inner_.isend(peer, info, payload);
  }
  Request irecv(int peer, const TensorInfo& expected, std::span<std::byte> buffer) override {
    return inner_.irecv(peer, expected, buffer);
  }
  Request iall_reduce(void* data, size_t count, DType dtype, const std::vector<int>& group,
                      ReduceOp op) override {
    return inner_.iall_reduce(data, count, dtype, group, op);
  }
  void close() override { inner_.close(); }
  const std::vector<double>& sent_ms() const { return sent_ms_; }

 private:
  Communicator& inner_;
  Clock::time_point start_;
  std::vector<double> sent_ms_;
};

// CPU seconds of every thread of this process, by thread id.
std::map<int, double> thread_cpu_s() {
  std::map<int, double> out;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const size_t end = stat.rfind(')');  // fields 14 and 15 (utime, stime) follow the name
    if (end == std::string::npos) continue;
    std::istringstream fields(stat.substr(end + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::stod(field);
      if (i == 15) stime = std::stod(field);
    }
    out[std::stoi(task.path().filename())] = (utime + stime) / tick;
  }
  return out;
}

// The most CPU seconds any one thread used between two thread_cpu_s() readings: during an
// all-reduce, the emulator's forwarder (it reads and writes every packet, and the write runs the
// receiving namespace's TCP input).
double busiest_thread_s(const std::map<int, double>& before, const std::map<int, double>& after) {
  double most = 0;
  for (const auto& [tid, seconds] : after) {
    const auto it = before.find(tid);
    if (it != before.end()) most = std::max(most, seconds - it->second);
  }
  return most;
}

double process_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

void barrier(Communicator& comm) {
  float token = 0;
  comm.all_reduce(&token, 1, DType::kF32, all_ranks(comm.size()));
}

// Rank 0's send times of one all-reduce, one line per ring step (see SendTimeline).
void print_timeline(int iteration, double seconds, const std::vector<double>& sent_ms, int n) {
  const size_t steps = 2 * static_cast<size_t>(n - 1);
  const size_t chunks = sent_ms.size() / steps;
  std::fprintf(stderr, "# timeline, iteration %d (%.1f ms), rank 0's sends in ms, %zu a step:\n",
               iteration, seconds * 1e3, chunks);
  for (size_t t = 0; t < steps; ++t) {
    std::fprintf(stderr, "#   step %zu:", t);
    for (size_t k = 0; k < chunks; ++k) std::fprintf(stderr, " %.0f", sent_ms[t * chunks + k]);
    std::fprintf(stderr, "\n");
  }
}

// Runs one configuration: every rank on a thread in its namespace.
Measured run(const tessel::wan::WanEmulator& wan, int n, int streams, const BenchOptions& o) {
  std::vector<TcpListener> listeners;
  std::vector<PeerAddress> peers;
  for (int r = 0; r < n; ++r) {
    wan.call_in(r, [&] { listeners.push_back(TcpListener::bind(wan.address(r), 0)); });
    peers.push_back({wan.address(r), listeners.back().port(), "ns " + std::to_string(r)});
  }
  Measured out;
  std::mutex mu;
  std::vector<std::vector<double>> times(n);
  std::vector<std::string> errors(n);
  Clock::time_point first_send, last_recv;
  // Every timed all-reduce starts on all ranks at once: the ranks are threads of this process,
  // so a thread barrier lines them up within microseconds, as a LAN barrier would. A barrier
  // over the emulated links releases its members up to a one-way delay apart, and the rank
  // released first would count the wait for the others as its all-reduce's time.
  std::barrier start_line(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        wan.call_in(r, [&] {
          TcpOptions tcp;
          tcp.job_id = 0x3a5;
          tcp.rank = r;
          tcp.peers = peers;
          tcp.io_timeout = std::chrono::seconds(120);
          tcp.streams_per_link = streams;
          tcp.link_capacity.assign(n, o.rate_mbit * 1e6 / 8);
          if (o.warm_up_links) {
            for (int q = 0; q < n; ++q) {
              if (q != r) tcp.warm_up_peers.push_back(q);
            }
          }
          tcp.log = [&](const std::string& line) {
            std::lock_guard lock(mu);
            std::fprintf(stderr, "%s\n", line.c_str());
          };
          TcpCommunicator comm(tcp, listeners[r]);
          if (r == 0) out.plan = std::to_string(comm.streams_to(1));
          const size_t count = o.bytes / sizeof(float);
          std::vector<float> data(count);
          for (int it = 0; it < o.warmup + o.iters; ++it) {
            for (size_t i = 0; i < count; ++i) data[i] = input(r, i);
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.idle_ms));
            barrier(comm);
            start_line.arrive_and_wait();
            const long retransmitted_before = retransmitted_segments();
            const double cpu_before = process_cpu_s();
            const auto threads_before = thread_cpu_s();
            const auto start = Clock::now();
            std::vector<double> sent_ms;
            if (o.timeline) {
              // The ring itself on this thread (the same schedule as comm's collective thread),
              // under sequence numbers that the barriers' all-reduces never use.
              SendTimeline timeline(comm);
              ring_all_reduce(timeline, data, all_ranks(n), (uint64_t{1} << 40) + it, tcp.ring);
              sent_ms = timeline.sent_ms();
            } else {
              comm.all_reduce(data.data(), count, DType::kF32, all_ranks(n));
            }
            const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
            const double cpu = process_cpu_s() - cpu_before;
            const double busiest = busiest_thread_s(threads_before, thread_cpu_s());
            const long retransmitted = retransmitted_segments() - retransmitted_before;
            long wrong = 0;
            for (size_t i = 0; i < count; ++i) {
              float expected = 0;
              for (int q = 0; q < n; ++q) expected += input(q, i);
              wrong += data[i] != expected;
            }
            std::lock_guard lock(mu);
            out.wrong += wrong;
            if (it >= o.warmup) {
              times[r].push_back(seconds);
              out.retransmitted += retransmitted;
              if (r == 0) out.cpu_s += cpu / o.iters;
              if (r == 0) out.busiest_thread_s += busiest / o.iters;
              if (r == 0 && o.timeline) print_timeline(it - o.warmup, seconds, sent_ms, n);
            }
          }
          // Pipeline-sized messages, rank 0 to rank 1 (one warm-up message first).
          std::vector<std::byte> message(o.message_bytes, std::byte{7});
          const auto info = [&](int i) {
            return TensorInfo{Tag::kActivation,
                              static_cast<uint64_t>(i),
                              0,
                              0,
                              DType::kI32,
                              {static_cast<int64_t>(o.message_bytes / 4)}};
          };
          barrier(comm);
          if (r == 0) {
            comm.send(1, info(0), message);
            barrier(comm);
            first_send = Clock::now();
            std::vector<Request> sends;
            for (int i = 1; i <= o.messages; ++i) sends.push_back(comm.isend(1, info(i), message));
            for (auto& s : sends) s.wait();
          } else if (r == 1) {
            comm.recv(0, info(0), message);
            barrier(comm);
            for (int i = 1; i <= o.messages; ++i) comm.recv(0, info(i), message);
            last_recv = Clock::now();
          } else {
            barrier(comm);
          }
          barrier(comm);
        });
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    if (!errors[r].empty()) throw TransportError("rank " + std::to_string(r) + ": " + errors[r]);
  }
  for (int it = 0; it < o.iters; ++it) {
    double slowest = 0;
    for (int r = 0; r < n; ++r) slowest = std::max(slowest, times[r][it]);
    out.iteration_s.push_back(slowest);
  }
  std::vector<double> sorted = out.iteration_s;
  std::sort(sorted.begin(), sorted.end());
  const size_t middle = sorted.size() / 2;
  out.allreduce_s =
      sorted.size() % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
  out.pipeline_s = std::chrono::duration<double>(last_recv - first_send).count();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions o;
  CLI::App app("TCP transport over the WAN emulator: 1 stream vs the chosen streams");
  app.add_option("--ranks", o.ranks)->delimiter(',');
  app.add_option("--rtt-ms", o.rtt_ms)->delimiter(',');
  app.add_option("--rate-mbit", o.rate_mbit);
  app.add_option("--bytes", o.bytes);
  app.add_option("--iters", o.iters)->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup)->check(CLI::NonNegativeNumber);
  app.add_option("--message-bytes", o.message_bytes);
  app.add_option("--messages", o.messages)->check(CLI::PositiveNumber);
  app.add_option("--streams", o.streams, "streams of the second column (0: the transport's choice)")
      ->check(CLI::Range(0, kMaxStreamsPerLink));
  bool no_slow_start = false;
  app.add_option("--mtu", o.mtu,
                 "of the emulated links: a larger one means fewer packets for the emulator's one "
                 "thread to forward (and a larger TCP segment)")
      ->check(CLI::Range(576, 65535));
  app.add_flag("--offload", o.offload,
               "TCP segmentation offload on the emulated links: the emulator forwards 64 KB "
               "super-packets, not MTU-sized ones (segments stay MTU-sized)");
  app.add_option("--queue-ms", o.queue_ms, "the emulated router queue of every link (0: default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--idle-ms", o.idle_ms,
                 "idle time before each all-reduce, as a training step's compute leaves it")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--timeline", o.timeline,
               "print rank 0's send times of every timed all-reduce (stderr)");
  app.add_flag("--no-slow-start-after-idle", no_slow_start,
               "set net.ipv4.tcp_slow_start_after_idle=0 in the namespaces");
  bool no_single_stream = false;
  app.add_flag("--no-single-stream", no_single_stream, "skip the 1-stream row");
  app.add_flag("--warm-up-links", o.warm_up_links,
               "warm every link's streams before the first all-reduce, as the transport warms a "
               "pipeline's neighbours (link_warmup.h)");
  CLI11_PARSE(app, argc, argv);
  o.single_stream = !no_single_stream;
  o.slow_start_after_idle = !no_slow_start;

  const double link = o.rate_mbit * 1e6 / 8;  // bytes/s
  const SocketBufferLimits limits = read_socket_buffer_limits();
  std::printf("# net.core.wmem_max %llu, rmem_max %llu; all-reduce %zu B, pipeline %d x %zu B\n",
              static_cast<unsigned long long>(limits.wmem_max),
              static_cast<unsigned long long>(limits.rmem_max), o.bytes, o.messages,
              o.message_bytes);
  bool any_wrong = false;
  for (int n : o.ranks) {
    std::printf(
        "\n# n = %d, links %.0f Mbit/s (%.1f MB/s), MTU %d%s, queue %s%s\n#  rtt(ms)  streams  "
        "allreduce(ms)  busbw(MB/s)  bus/link  retrans  pipeline(MB/s)  pipe/link  #wrong\n",
        n, o.rate_mbit, link / 1e6, o.mtu, o.offload ? " (offload)" : "",
        o.queue_ms > 0 ? (std::to_string(static_cast<int>(o.queue_ms)) + " ms").c_str() : "default",
        o.slow_start_after_idle ? "" : ", no slow start after idle");
    for (double rtt : o.rtt_ms) {
      tessel::wan::WanConfig config;
      config.namespaces = static_cast<size_t>(n);
      config.default_link.delay_ms = rtt / 2;
      config.default_link.rate_mbit = o.rate_mbit;
      if (o.queue_ms > 0) config.default_link.queue_ms = o.queue_ms;
      config.mtu = o.mtu;
      config.offload = o.offload;
      std::unique_ptr<tessel::wan::WanEmulator> wan;
      try {
        wan = tessel::wan::WanEmulator::start(config);
      } catch (const tessel::wan::WanUnavailable& e) {
        std::printf("SKIPPED: the WAN emulator cannot run here: %s\n", e.what());
        return 77;
      }
      if (!o.slow_start_after_idle) {
        for (int r = 0; r < n; ++r) {
          std::string output;
          wan->run_in(r, "sysctl -qw net.ipv4.tcp_slow_start_after_idle=0", output);
        }
      }
      std::string congestion_control;
      wan->run_in(0, "sysctl -n net.ipv4.tcp_congestion_control", congestion_control);
      congestion_control.erase(congestion_control.find_last_not_of(" \n") + 1);
      std::vector<int> columns{o.streams};
      if (o.single_stream) columns.insert(columns.begin(), 1);
      for (int streams : columns) {
        const Measured m = run(*wan, n, streams, o);
        any_wrong = any_wrong || m.wrong != 0;
        const double busbw = o.bytes / m.allreduce_s * 2.0 * (n - 1) / n;
        const double pipe = static_cast<double>(o.messages) * o.message_bytes / m.pipeline_s;
        std::printf("%10.0f  %7s  %13.1f  %11.1f  %7.1f%%  %7ld  %14.1f  %8.1f%%  %6ld\n", rtt,
                    (m.plan + (streams == 0 ? " (chosen)" : "")).c_str(), m.allreduce_s * 1e3,
                    busbw / 1e6, 100 * busbw / link, m.retransmitted, pipe / 1e6, 100 * pipe / link,
                    m.wrong);
        std::printf("#   %s, forwarder at %s priority; all-reduces (ms):",
                    congestion_control.c_str(), wan->stats().realtime ? "real-time" : "normal");
        for (double t : m.iteration_s) std::printf(" %.0f", t * 1e3);
        std::printf("; process CPU %.2f s each (%.2f cores), busiest thread %.0f%% of the time\n",
                    m.cpu_s, m.cpu_s / m.allreduce_s, 100 * m.busiest_thread_s / m.allreduce_s);
        std::fflush(stdout);
      }
      const auto stats = wan->stats();
      std::fprintf(stderr,
                   "# forwarder: %llu packets out (%.0f link bytes each), %llu dropped at a full "
                   "queue\n",
                   static_cast<unsigned long long>(stats.packets_out),
                   static_cast<double>(stats.bytes_out) /
                       static_cast<double>(std::max<std::uint64_t>(1, stats.packets_out)),
                   static_cast<unsigned long long>(stats.dropped_queue));
    }
  }
  if (any_wrong) {
    std::fprintf(stderr, "wan_transport_bench: an all-reduce came out wrong (#wrong above)\n");
    return 1;
  }
  return 0;
}
