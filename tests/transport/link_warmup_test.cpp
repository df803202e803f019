// link_warmup.h: both ends of a long fat link send kWarmupWindows x its buffers on every stream
// and read exactly the other end's, so that the first message after it starts on a frame
// boundary; a link whose buffers are the kernel's (a short link) sends nothing; a peer that
// hangs up mid-warm-up is named with its stream; only the listed peers' links are warmed.
#include "noderuntime/transport/link_warmup.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

using Clock = std::chrono::steady_clock;

// Two ranks' views of one link of `streams` connected loopback streams with `buffer_bytes`.
struct LinkPair {
  std::vector<MeshLink> low{2}, high{2};  // rank 0's links (to 1 at index 1), rank 1's (index 0)
};

LinkPair connected_link(int streams, uint64_t buffer_bytes) {
  const TcpListener listener = TcpListener::bind("127.0.0.1", 0);
  LinkPair pair;
  for (int k = 0; k < streams; ++k) {
    UniqueFd out = connect_until("127.0.0.1", listener.port(), Clock::now() + std::chrono::seconds(5));
    UniqueFd in = accept_until(listener, Clock::now() + std::chrono::seconds(5));
    pair.high[0].streams.push_back(std::move(out));
    pair.low[1].streams.push_back(std::move(in));
  }
  for (MeshLink* link : {&pair.low[1], &pair.high[0]}) {
    link->plan.streams = streams;
    link->plan.buffer_bytes = buffer_bytes;
  }
  return pair;
}

const std::vector<std::string> kNames = {"rank 0 (test)", "rank 1 (test)"};

// Both ranks warm up at once; each then sends one marker byte per stream, which must be the
// next byte the other reads.
void warm_up_both_and_check_markers(LinkPair& pair) {
  std::string error;
  std::thread high([&] {
    try {
      warm_up_links(pair.high, {0}, kNames, Clock::now() + std::chrono::seconds(30));
    } catch (const TransportError& e) {
      error = e.what();
    }
  });
  warm_up_links(pair.low, {1}, kNames, Clock::now() + std::chrono::seconds(30));
  high.join();
  ASSERT_EQ(error, "");
  for (size_t k = 0; k < pair.low[1].streams.size(); ++k) {
    const std::array<std::byte, 1> marker{std::byte{0x7e}};
    send_all(pair.low[1].streams[k].get(), marker, Clock::now() + std::chrono::seconds(5));
    std::array<std::byte, 1> got{};
    recv_all(pair.high[0].streams[k].get(), got, Clock::now() + std::chrono::seconds(5));
    EXPECT_EQ(got, marker) << "stream " << k;
  }
}

TEST(LinkWarmup, ALongFatLinksStreamsExchangeTheirWindowsExactly) {
  LinkPair pair = connected_link(3, 300'000);
  EXPECT_EQ(warmup_bytes_per_stream(pair.low[1]), kWarmupWindows * 300'000);
  warm_up_both_and_check_markers(pair);
}

TEST(LinkWarmup, AShortLinkSendsNothing) {
  LinkPair pair = connected_link(1, 0);
  EXPECT_EQ(warmup_bytes_per_stream(pair.low[1]), 0u);
  warm_up_both_and_check_markers(pair);
}

TEST(LinkWarmup, APeerThatHangsUpIsNamedWithItsStream) {
  LinkPair pair = connected_link(2, 1'000'000);
  pair.high[0].streams[1].reset();  // rank 1 is gone from stream 1
  std::string error;
  try {
    warm_up_links(pair.low, {1}, kNames, Clock::now() + std::chrono::seconds(30));
  } catch (const TransportError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("rank 1 (test) stream 1 of 2: link warm-up: "), std::string::npos)
      << error;
}

TEST(LinkWarmup, OnlyTheListedPeersAreWarmedAndAnUnknownOneIsRefused) {
  LinkPair pair = connected_link(2, 1'000'000);
  // Neither end lists the other: nothing is sent, the markers come first.
  std::thread high([&] { warm_up_links(pair.high, {}, kNames, Clock::now()); });
  warm_up_links(pair.low, {}, kNames, Clock::now());
  high.join();
  const std::array<std::byte, 1> marker{std::byte{0x7e}};
  send_all(pair.low[1].streams[0].get(), marker, Clock::now() + std::chrono::seconds(5));
  std::array<std::byte, 1> got{};
  recv_all(pair.high[0].streams[0].get(), got, Clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(got, marker);
  for (const std::vector<int>& peers : {std::vector<int>{0}, std::vector<int>{2}}) {
    std::string error;
    try {
      warm_up_links(pair.low, peers, kNames, Clock::now());
    } catch (const TransportError& e) {
      error = e.what();
    }
    EXPECT_EQ(error, "link warm-up: rank " + std::to_string(peers[0]) +
                         " is not a peer with a link");
  }
}

}  // namespace
}  // namespace tessel::transport
