// bench/transport: the TCP ring all-reduce, nccl-tests style. For each world size n it forks
// n - 1 rank processes (the driver is rank 0), connects them over 127.0.0.1 with every link
// shaped by the link emulator (and once more unshaped), and sweeps the message size. Each
// timed iteration starts from fresh data after a barrier; its time is the slowest rank's.
// Columns as in nccl-tests doc/PERFORMANCE.md: algbw = size / time, busbw = algbw * 2(n-1)/n
// (comparable with one link's rate), #wrong = elements differing from the exact expected sum
// (inputs are small integers, so every order of summation is exact).
// Usage: allreduce_bench [--ranks 2,3,4] [--rate-mbps 100] [--latency-ms 0] [--min-bytes N]
//        [--max-bytes N] [--factor 4] [--iters 3] [--warmup 1] [--chunk-bytes N] [--min-chunks 4]
//        [--no-unshaped]
// Recorded results: bench/transport/results.md.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "noderuntime/transport/tcp_communicator.h"
#include "noderuntime/transport/transport_error.h"

using namespace tessel::transport;

namespace {

struct BenchOptions {
  std::vector<int> ranks{2, 3, 4};
  double rate_mbps = 100;  // MB/s (1e6 bytes) per directional link; 0 = unshaped
  double latency_ms = 0;
  size_t min_bytes = 1 << 20;
  size_t max_bytes = 64 << 20;
  size_t factor = 4;
  int iters = 3;
  int warmup = 1;
  size_t chunk_bytes = RingOptions{}.chunk_bytes;
  int min_chunks = RingOptions{}.min_chunks;
  bool unshaped = true;
};

struct Row {
  size_t bytes = 0;
  double seconds = 0;  // mean over iterations of the slowest rank's time
  long wrong = 0;
};

float input(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 13) % 41) - 20);
}

std::vector<int> all_ranks(int n) {
  std::vector<int> group(n);
  for (int i = 0; i < n; ++i) group[i] = i;
  return group;
}

void barrier(Communicator& comm) {
  float token = 0;
  comm.all_reduce(&token, 1, DType::kF32, all_ranks(comm.size()));
}

struct RankResult {
  double seconds = 0;
  long wrong = 0;
};

// Gathers every rank's result at rank 0 (microseconds and #wrong as two i32); returns them
// at rank 0.
std::vector<RankResult> gather_at_root(Communicator& comm, const RankResult& mine, uint64_t step) {
  const TensorInfo info{Tag::kControl, step, 0, 0, DType::kI32, {2}};
  std::vector<RankResult> results(comm.size(), mine);
  if (comm.rank() != 0) {
    const int32_t fields[2] = {static_cast<int32_t>(mine.seconds * 1e6),
                               static_cast<int32_t>(mine.wrong)};
    comm.send(0, info, std::as_bytes(std::span(fields)));
    return results;
  }
  for (int r = 1; r < comm.size(); ++r) {
    int32_t fields[2];
    comm.recv(r, info, std::as_writable_bytes(std::span(fields)));
    results[r] = {fields[0] / 1e6, fields[1]};
  }
  return results;
}

// The sweep on one rank; rank 0's return value holds the rows.
std::vector<Row> sweep(Communicator& comm, const BenchOptions& options) {
  const int n = comm.size(), rank = comm.rank();
  std::vector<Row> rows;
  for (size_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= options.factor) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> data(count);
    Row row{count * sizeof(float), 0, 0};
    for (int it = 0; it < options.warmup + options.iters; ++it) {
      for (size_t i = 0; i < count; ++i) data[i] = input(rank, i);
      barrier(comm);
      const auto start = std::chrono::steady_clock::now();
      comm.all_reduce(data.data(), count, DType::kF32, all_ranks(n));
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      long wrong = 0;
      for (size_t i = 0; i < count; ++i) {
        float expected = 0;
        for (int r = 0; r < n; ++r) expected += input(r, i);
        wrong += data[i] != expected;
      }
      const auto results = gather_at_root(comm, {seconds, wrong}, it);
      if (it < options.warmup) continue;
      double slowest = 0;
      for (const RankResult& r : results) {
        slowest = std::max(slowest, r.seconds);
        row.wrong += r.wrong;
      }
      row.seconds += slowest / options.iters;
    }
    rows.push_back(row);
    if (options.factor < 2) break;
  }
  return rows;
}

std::vector<Row> run_rank(int rank, const std::vector<PeerAddress>& peers,
                          const TcpListener& listener, const std::optional<LinkShape>& shape,
                          const BenchOptions& options) {
  TcpOptions tcp;
  tcp.job_id = 0xbe4c4;
  tcp.rank = rank;
  tcp.peers = peers;
  tcp.ring.chunk_bytes = options.chunk_bytes;
  tcp.ring.min_chunks = options.min_chunks;
  tcp.io_timeout = std::chrono::seconds(60);
  if (shape) tcp.links = LinkEmulator::uniform(static_cast<int>(peers.size()), *shape);
  TcpCommunicator comm(tcp, listener);
  return sweep(comm, options);
}

// Runs the sweep on n processes; returns rank 0's rows, or an empty list when a rank failed.
std::vector<Row> run_world(int n, const std::optional<LinkShape>& shape,
                           const BenchOptions& options) {
  std::vector<TcpListener> listeners;
  std::vector<PeerAddress> peers;
  for (int r = 0; r < n; ++r) {
    listeners.push_back(TcpListener::bind("127.0.0.1", 0));
    peers.push_back({"127.0.0.1", listeners.back().port(), "bench rank " + std::to_string(r)});
  }
  std::vector<pid_t> children;
  for (int r = 1; r < n; ++r) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        run_rank(r, peers, listeners[r], shape, options);
      } catch (const TransportError& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = 1;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  std::vector<Row> rows;
  bool ok = true;
  try {
    rows = run_rank(0, peers, listeners[0], shape, options);
  } catch (const TransportError& e) {
    std::fprintf(stderr, "rank 0: %s\n", e.what());
    ok = false;
    for (pid_t pid : children) kill(pid, SIGTERM);
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok ? rows : std::vector<Row>{};
}

void print_table(int n, const std::optional<LinkShape>& shape, const std::vector<Row>& rows,
                 const BenchOptions& options) {
  if (shape) {
    std::printf("\n# ring all-reduce, n = %d processes, links %.0f MB/s + %.1f ms, chunk %zu B\n",
                n, shape->bytes_per_s / 1e6, shape->latency_s * 1e3, options.chunk_bytes);
  } else {
    std::printf("\n# ring all-reduce, n = %d processes, unshaped loopback, chunk %zu B\n", n,
                options.chunk_bytes);
  }
  std::printf("#%11s %10s %5s %5s %10s %12s %12s %9s %7s\n", "size(B)", "count", "type", "redop",
              "time(ms)", "algbw(MB/s)", "busbw(MB/s)", "bus/link", "#wrong");
  for (const Row& row : rows) {
    const double algbw = static_cast<double>(row.bytes) / row.seconds / 1e6;
    const double busbw = algbw * 2.0 * (n - 1) / n;
    char link_share[16] = "-";
    if (shape && shape->bytes_per_s > 0) {
      std::snprintf(link_share, sizeof link_share, "%.1f%%",
                    100 * busbw * 1e6 / shape->bytes_per_s);
    }
    std::printf("%12zu %10zu %5s %5s %10.2f %12.2f %12.2f %9s %7ld\n", row.bytes,
                row.bytes / sizeof(float), "f32", "sum", row.seconds * 1e3, algbw, busbw,
                link_share, row.wrong);
  }
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions options;
  CLI::App app{"TCP ring all-reduce benchmark (nccl-tests style)"};
  app.add_option("--ranks", options.ranks, "world sizes to run")->delimiter(',');
  app.add_option("--rate-mbps", options.rate_mbps, "shaped link rate, MB/s (0: unshaped only)");
  app.add_option("--latency-ms", options.latency_ms, "shaped link latency, ms");
  app.add_option("--min-bytes", options.min_bytes, "smallest message");
  app.add_option("--max-bytes", options.max_bytes, "largest message");
  app.add_option("--factor", options.factor, "size multiplier between rows");
  app.add_option("--iters", options.iters, "timed iterations per size")->check(CLI::PositiveNumber);
  app.add_option("--warmup", options.warmup, "untimed iterations per size")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--chunk-bytes", options.chunk_bytes, "ring chunk size");
  app.add_option("--min-chunks", options.min_chunks, "ring chunks per segment at least")
      ->check(CLI::PositiveNumber);
  app.add_flag("!--no-unshaped", options.unshaped, "skip the unshaped loopback runs");
  CLI11_PARSE(app, argc, argv);

  int failures = 0;
  std::vector<std::optional<LinkShape>> shapes;
  if (options.rate_mbps > 0)
    shapes.push_back(LinkShape{options.rate_mbps * 1e6, options.latency_ms / 1e3});
  if (options.unshaped) shapes.push_back(std::nullopt);
  for (const auto& shape : shapes) {
    for (int n : options.ranks) {
      const std::vector<Row> rows = run_world(n, shape, options);
      if (rows.empty()) {
        std::printf("\n# n = %d: a rank failed (see stderr)\n", n);
        ++failures;
        continue;
      }
      print_table(n, shape, rows, options);
      for (const Row& row : rows) failures += row.wrong > 0;
    }
  }
  std::printf("\n# %s\n", failures ? "FAILED" : "all results correct");
  return failures ? 1 : 0;
}
