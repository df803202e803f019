// Test helpers: a mesh of TcpCommunicators inside one test process, one per rank, connected
// over real sockets on 127.0.0.1 with kernel-chosen ports, each constructed on its own thread
// as separate processes would.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/transport/tcp_communicator.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport::testing {

constexpr uint64_t kJob = 0x7e55e1;

// Rank `rank`'s input of `count` small integers: every partial sum is exact in fp32, so a sum in
// any order equals the serial sum bit for bit.
inline std::vector<float> integer_input(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = static_cast<float>(static_cast<int>((i * 7 + rank * 13) % 41) - 20);
  return v;
}

// Rank `rank`'s input of `count` standard normal values (a fixed seed per rank).
inline std::vector<float> random_input(int rank, size_t count) {
  std::mt19937 rng(1000 + rank);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(count);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct LocalAddresses {
  std::vector<TcpListener> listeners;
  std::vector<PeerAddress> peers;
};

inline LocalAddresses bind_local(int ranks) {
  LocalAddresses out;
  for (int r = 0; r < ranks; ++r) {
    out.listeners.push_back(TcpListener::bind("127.0.0.1", 0));
    out.peers.push_back(
        {"127.0.0.1", out.listeners.back().port(), "test rank " + std::to_string(r)});
  }
  return out;
}

inline TcpOptions local_options(const std::vector<PeerAddress>& peers, int rank) {
  TcpOptions options;
  options.job_id = kJob;
  options.rank = rank;
  options.peers = peers;
  options.connect_timeout = std::chrono::seconds(10);
  options.io_timeout = std::chrono::seconds(10);
  return options;
}

using Comms = std::vector<std::unique_ptr<TcpCommunicator>>;

// Throws TransportError with every rank's error when any rank fails to connect.
inline Comms connect_local(int ranks, const std::function<void(TcpOptions&)>& customize = {}) {
  LocalAddresses addresses = bind_local(ranks);
  Comms comms(ranks);
  std::vector<std::string> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      TcpOptions options = local_options(addresses.peers, r);
      if (customize) customize(options);
      try {
        comms[r] = std::make_unique<TcpCommunicator>(std::move(options), addresses.listeners[r]);
      } catch (const TransportError& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::string all;
  for (const auto& e : errors) all += e.empty() ? "" : e + "\n";
  if (!all.empty()) throw TransportError(all);
  return comms;
}

// Runs body(rank) on one thread per rank and waits for all.
inline void on_every_rank(int ranks, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { body(r); });
  for (auto& t : threads) t.join();
}

// Values that differ along a message (i % 1000 steps), offset by `seed`.
inline std::vector<float> pattern(size_t n, float seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = seed + static_cast<float>(i % 1000) * 0.5f;
  return v;
}
inline std::span<const std::byte> bytes(const std::vector<float>& v) {
  return std::as_bytes(std::span(v));
}
inline std::span<std::byte> bytes(std::vector<float>& v) {
  return std::as_writable_bytes(std::span(v));
}

inline TensorInfo f32_info(Tag tag, uint64_t step, uint32_t micro_batch, size_t elems) {
  return TensorInfo{tag, step, micro_batch, 0, DType::kF32, {static_cast<int64_t>(elems)}};
}

inline ::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// The TransportError message of `request`'s wait(), or "" when it succeeded.
inline std::string wait_error(Request request) {
  try {
    request.wait();
  } catch (const TransportError& e) {
    return e.what();
  }
  return "";
}

// The group {0, 1, ..., n - 1}.
inline std::vector<int> iota_group(int n) {
  std::vector<int> g(n);
  for (int i = 0; i < n; ++i) g[i] = i;
  return g;
}

// The same floats bit for bit (what the all-reduces promise every member).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace tessel::transport::testing
