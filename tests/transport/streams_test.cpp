// Links of several TCP streams (tcp_peer.h): messages cut into pieces across the streams arrive
// whole and in per-key order, collectives run over them unchanged, and a stream that vanishes
// or misbehaves fails the link with an error naming the peer and the stream.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/mesh.h"
#include "noderuntime/transport/tcp_communicator.h"
#include "tests/transport/local_mesh.h"

namespace tessel::transport {
namespace {

using namespace std::chrono_literals;
using testing::bytes;
using testing::Comms;
using testing::connect_local;
using testing::Contains;
using testing::f32_info;
using testing::kJob;
using testing::pattern;
using testing::wait_error;

// Pieces of at least 1 KiB, so that small test messages are cut too.
auto streams(int n) {
  return [n](TcpOptions& o) {
    o.streams_per_link = n;
    o.min_piece_bytes = 1024;
  };
}

TEST(Streams, BothEndsOfALinkUseTheConfiguredStreams) {
  std::vector<std::string> lines;
  std::mutex mu;
  Comms comms = connect_local(3, [&](TcpOptions& o) {
    streams(4)(o);
    o.log = [&](const std::string& line) {
      std::lock_guard lock(mu);
      lines.push_back(line);
    };
  });
  for (int r = 0; r < 3; ++r) {
    for (int p = 0; p < 3; ++p) EXPECT_EQ(comms[r]->streams_to(p), p == r ? 0 : 4) << r << p;
  }
  ASSERT_EQ(lines.size(), 6u);  // every rank, every link
  bool chosen_here = false, chosen_by_peer = false;
  for (const auto& line : lines) {
    EXPECT_TRUE(Contains(line, "4 streams, kernel-tuned buffers")) << line;
    chosen_here |= line.find("measured RTT") != std::string::npos;
    chosen_by_peer |= line.find("(chosen by the peer)") != std::string::npos;
  }
  EXPECT_TRUE(chosen_here);
  EXPECT_TRUE(chosen_by_peer);
}

TEST(Streams, ALinkLineSaysWhenSlowStartAfterIdleWouldEmptyItsWindow) {
  // A capacity so high that even loopback's round trip of microseconds makes a BDP beyond the
  // kernel's autotuning (buffers sized from it), and caps that one stream covers: the line's
  // only news is slow start after idle, so without it there is no line.
  for (const bool on : {true, false}) {
    std::vector<std::string> lines;
    std::mutex mu;
    Comms comms = connect_local(2, [&](TcpOptions& o) {
      o.link_capacity = {1e13, 1e13};
      o.buffer_limits = SocketBufferLimits{uint64_t{1} << 40, uint64_t{1} << 40};
      o.slow_start_after_idle = on;
      o.log = [&](const std::string& line) {
        std::lock_guard lock(mu);
        lines.push_back(line);
      };
    });
    ASSERT_EQ(comms[1]->streams_to(0), 1);
    if (!on) {
      EXPECT_TRUE(lines.empty()) << lines.front();
      continue;
    }
    ASSERT_EQ(lines.size(), 2u);  // both ends
    for (const auto& line : lines) {
      EXPECT_TRUE(Contains(line, "1 stream, buffers ")) << line;
      EXPECT_TRUE(Contains(line,
                           "; net.ipv4.tcp_slow_start_after_idle is 1: after an idle spell "
                           "longer than about one RTT every stream restarts from 10 "
                           "segments (set it to 0 in this network namespace)"))
          << line;
    }
  }
}

TEST(Streams, AnUnconfiguredLoopbackLinkHasOneStream) {
  // 1 Gbit/s over a loopback round trip of microseconds: the BDP fits one stream.
  Comms comms = connect_local(2, [](TcpOptions& o) { o.link_capacity = {125e6, 125e6}; });
  EXPECT_EQ(comms[0]->streams_to(1), 1);
  EXPECT_EQ(comms[1]->streams_to(0), 1);
}

TEST(Streams, StripedMessagesArriveWholeForEverySize) {
  for (int n : {2, 3, 5}) {
    Comms comms = connect_local(2, streams(n));
    // Sizes around the piece boundaries: whole, two pieces, one per stream, uneven splits.
    for (size_t elems : {0, 1, 255, 256, 511, 512, 513, 1000, 4099, 65536, 262147}) {
      const auto sent = pattern(elems, static_cast<float>(elems));
      std::vector<float> got(elems, -1.f);
      const TensorInfo info = f32_info(Tag::kActivation, elems, 0, elems);
      Request r = comms[1]->irecv(0, info, bytes(got));
      comms[0]->send(1, info, bytes(sent));
      r.wait();
      ASSERT_EQ(got, sent) << n << " streams, " << elems << " elements";
    }
  }
}

TEST(Streams, MessagesWithOneKeyKeepTheirOrderAcrossStreams) {
  Comms comms = connect_local(2, streams(4));
  // Big and small messages alternate, so a small later one could overtake a big earlier one
  // on another stream; half the receives are posted before the sends, half after.
  constexpr int kMessages = 24;
  std::vector<std::vector<float>> sent, got;
  for (int i = 0; i < kMessages; ++i) {
    sent.push_back(pattern(i % 2 ? 300 : 200000, static_cast<float>(i)));
    got.emplace_back(sent.back().size());
  }
  const auto info = [&](int i) {
    return TensorInfo{Tag::kGradient, 7, 1, 0, DType::kF32, {static_cast<int64_t>(sent[i].size())}};
  };
  std::vector<Request> receives;
  for (int i = 0; i < kMessages / 2; ++i)
    receives.push_back(comms[1]->irecv(0, info(i), bytes(got[i])));
  std::vector<Request> sends;
  for (int i = 0; i < kMessages; ++i) sends.push_back(comms[0]->isend(1, info(i), bytes(sent[i])));
  for (int i = kMessages / 2; i < kMessages; ++i) {
    receives.push_back(comms[1]->irecv(0, info(i), bytes(got[i])));
  }
  for (auto& s : sends) s.wait();
  for (int i = 0; i < kMessages; ++i) {
    receives[i].wait();
    ASSERT_EQ(got[i], sent[i]) << "message " << i;
  }
}

TEST(Streams, BothDirectionsAndManyKeysAtOnce) {
  Comms comms = connect_local(2, streams(3));
  constexpr int kMessages = 40;
  testing::on_every_rank(2, [&](int r) {
    const int peer = 1 - r;
    std::vector<std::vector<float>> sent, got;
    std::vector<Request> requests;
    for (int i = 0; i < kMessages; ++i) {
      sent.push_back(pattern(1 + (i * 7919) % 70000, static_cast<float>(r * 1000 + i)));
      got.emplace_back(1 + (i * 7919) % 70000);
    }
    // Receives in reverse key order: matching is by key, not arrival.
    for (int i = kMessages - 1; i >= 0; --i) {
      requests.push_back(
          comms[r]->irecv(peer, f32_info(Tag::kActivation, i, 0, got[i].size()), bytes(got[i])));
    }
    for (int i = 0; i < kMessages; ++i) {
      requests.push_back(
          comms[r]->isend(peer, f32_info(Tag::kActivation, i, 0, sent[i].size()), bytes(sent[i])));
    }
    for (auto& q : requests) q.wait();
    for (int i = 0; i < kMessages; ++i) {
      ASSERT_EQ(got[i], pattern(got[i].size(), static_cast<float>(peer * 1000 + i))) << r << i;
    }
  });
}

TEST(Streams, TheRingAllReduceRunsUnchangedOverStripedLinks) {
  for (int n : {2, 3, 4}) {
    Comms comms = connect_local(n, [](TcpOptions& o) {
      streams(3)(o);
      o.ring.direct_max_bytes = 0;
    });
    const size_t count = 300007;
    std::vector<float> expected(count, 0.f);
    for (int r = 0; r < n; ++r) {
      const auto in = testing::integer_input(r, count);
      for (size_t i = 0; i < count; ++i) expected[i] += in[i];
    }
    std::vector<int> group(n);
    for (int r = 0; r < n; ++r) group[r] = r;
    std::vector<std::vector<float>> data(n);
    testing::on_every_rank(n, [&](int r) {
      data[r] = testing::integer_input(r, count);
      comms[r]->all_reduce(data[r].data(), count, DType::kF32, group);
    });
    for (int r = 0; r < n; ++r) ASSERT_EQ(data[r], expected) << n << " ranks, rank " << r;
  }
}

TEST(Streams, AShapedLinkKeepsItsRateWhateverItsStreams) {
  // The link emulator's rate is the link's: its streams share it.
  const LinkShape shape{20e6, 0};
  const auto sent = pattern(1 << 20, 1);  // 4 MiB
  std::vector<float> got(sent.size());
  Comms comms = connect_local(2, [&](TcpOptions& o) {
    streams(4)(o);
    o.links = LinkEmulator::uniform(2, shape);
  });
  const auto start = std::chrono::steady_clock::now();
  Request r = comms[1]->irecv(0, f32_info(Tag::kGradient, 0, 0, sent.size()), bytes(got));
  comms[0]->send(1, f32_info(Tag::kGradient, 0, 0, sent.size()), bytes(sent));
  r.wait();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(got, sent);
  // 4 MiB at 20 MB/s takes 0.21 s; four streams each at the full rate would take a quarter.
  EXPECT_GE(seconds, 0.9 * (4 << 20) / shape.bytes_per_s);
}

// The test plays rank 1 over raw sockets: a 2-stream link to rank 0, a TcpCommunicator.
struct RawLink {
  std::unique_ptr<TcpCommunicator> comm;
  std::vector<UniqueFd> streams;

  void write(int stream, std::span<const std::byte> data) {
    send_all(streams.at(stream).get(), data, std::chrono::steady_clock::now() + 5s);
  }
  void write_frame(int stream, MessageHeader header, std::span<const std::byte> piece) {
    header.piece_bytes = piece.size();
    header.piece_crc32c = crc32c(piece);
    write(stream, encode_header(header));
    write(stream, piece);
  }
};

RawLink make_raw_link(int streams, std::chrono::milliseconds io_timeout = 10s) {
  testing::LocalAddresses addresses = testing::bind_local(2);
  RawLink link;
  std::thread listener_side([&] {
    TcpOptions options = testing::local_options(addresses.peers, 0);
    options.io_timeout = io_timeout;
    options.log = [](const std::string&) {};
    link.comm = std::make_unique<TcpCommunicator>(options, addresses.listeners[0]);
  });
  MeshOptions mesh;
  mesh.job_id = kJob;
  mesh.rank = 1;
  mesh.peers = addresses.peers;
  mesh.connect_timeout = 10s;
  mesh.streams_per_link = streams;
  std::vector<MeshLink> links = establish_mesh(mesh, addresses.listeners[1]);
  listener_side.join();
  link.streams = std::move(links[0].streams);
  return link;
}

MessageHeader frame_of(const std::vector<float>& payload, uint64_t sequence) {
  MessageHeader header{kJob, f32_info(Tag::kActivation, 0, 0, payload.size()),
                       payload.size() * sizeof(float)};
  header.sequence = sequence;
  return header;
}

TEST(RawStreams, PiecesOnEitherStreamInEitherOrderReassemble) {
  RawLink link = make_raw_link(2);
  const auto payload = pattern(1000, 3);
  std::vector<float> got(1000);
  Request r = link.comm->irecv(1, frame_of(payload, 0).info, bytes(got));
  MessageHeader second = frame_of(payload, 0);
  second.stream = 1;
  second.piece_offset = 1000;
  link.write_frame(1, second, bytes(payload).subspan(1000));  // the tail first, on stream 1
  link.write_frame(0, frame_of(payload, 0), bytes(payload).first(1000));
  r.wait();
  EXPECT_EQ(got, payload);
}

TEST(RawStreams, AStreamClosedAloneFailsAWaitingReceiveAfterTheTimeoutNamingIt) {
  RawLink link = make_raw_link(2, 300ms);
  std::vector<float> got(4);
  Request pending = link.comm->irecv(1, f32_info(Tag::kActivation, 0, 0, 4), bytes(got));
  link.streams[1].reset();
  const std::string error = wait_error(pending);
  EXPECT_TRUE(Contains(error, "test rank 1): no data for 0.3 s, stream 1 of 2 closed by the peer"))
      << error;
  // Later operations fail with the same error.
  EXPECT_EQ(wait_error(link.comm->irecv(1, f32_info(Tag::kActivation, 1, 0, 4), bytes(got))),
            error);
}

TEST(RawStreams, APeerThatClosesItsStreamsOneByOneLosesNoMessage) {
  RawLink link = make_raw_link(2);
  const auto payload = pattern(1000, 5);
  std::vector<float> got(1000);
  Request r = link.comm->irecv(1, frame_of(payload, 0).info, bytes(got));
  link.write_frame(0, frame_of(payload, 0), bytes(payload).first(1000));
  link.streams[0].reset();  // closed before the other stream's piece arrives
  MessageHeader tail = frame_of(payload, 0);
  tail.stream = 1;
  tail.piece_offset = 1000;
  link.write_frame(1, tail, bytes(payload).subspan(1000));
  r.wait();
  EXPECT_EQ(got, payload);
  link.streams[1].reset();  // every stream closed: the link fails at once
  // Naming the stream whose end it saw last: stream 0's end may still be unread in its socket
  // when stream 1's is read (one reader thread per stream), so either may be named.
  const std::string error = wait_error(link.comm->irecv(1, frame_of(payload, 1).info, bytes(got)));
  EXPECT_TRUE(Contains(error, "test rank 1): stream 1 of 2: connection closed") ||
              Contains(error, "test rank 1): stream 0 of 2: connection closed"))
      << error;
}

TEST(RawStreams, AStreamClosedInTheMiddleOfAFrameFailsTheLinkAtOnce) {
  RawLink link = make_raw_link(2);
  const auto payload = pattern(1000, 5);
  std::vector<float> got(1000);
  Request pending = link.comm->irecv(1, frame_of(payload, 0).info, bytes(got));
  MessageHeader whole = frame_of(payload, 0);
  whole.piece_bytes = 4000;
  whole.piece_crc32c = crc32c(bytes(payload));
  link.write(1, encode_header([&] {
               MessageHeader h = whole;
               h.stream = 1;
               return h;
             }()));
  link.write(1, bytes(payload).first(100));
  link.streams[1].reset();
  EXPECT_TRUE(Contains(wait_error(pending), "test rank 1): stream 1 of 2: connection closed"));
}

TEST(RawStreams, AFrameOnTheWrongStreamFailsTheLink) {
  RawLink link = make_raw_link(2);
  const auto payload = pattern(4, 0);
  std::vector<float> got(4);
  Request pending = link.comm->irecv(1, frame_of(payload, 0).info, bytes(got));
  link.write_frame(1, frame_of(payload, 0), bytes(payload));  // says stream 0
  EXPECT_TRUE(Contains(wait_error(pending),
                       "test rank 1): stream 1 of 2: a frame of stream 0 arrived here"));
}

TEST(RawStreams, ASequenceThatGoesBackFailsTheLink) {
  RawLink link = make_raw_link(2);
  const auto payload = pattern(4, 0);
  std::vector<float> got(4);
  link.write_frame(0, frame_of(payload, 0), bytes(payload));
  link.comm->recv(1, frame_of(payload, 0).info, bytes(got));
  Request pending = link.comm->irecv(1, frame_of(payload, 0).info, bytes(got));
  link.write_frame(0, frame_of(payload, 0), bytes(payload));
  EXPECT_TRUE(Contains(wait_error(pending),
                       "stream 0 of 2: message 0 after message 0 (sequence went back)"));
}

TEST(RawStreams, PiecesThatDisagreeWithTheFirstFailTheLink) {
  RawLink link = make_raw_link(2);
  const auto payload = pattern(1000, 0);
  std::vector<float> got(1000);
  Request pending = link.comm->irecv(1, frame_of(payload, 0).info, bytes(got));
  link.write_frame(0, frame_of(payload, 0), bytes(payload).first(1000));
  MessageHeader other = frame_of(payload, 0);
  other.info.step = 5;
  other.stream = 1;
  other.piece_offset = 1000;
  link.write_frame(1, other, bytes(payload).subspan(1000));
  // Whichever stream's reader comes second names the disagreement.
  const std::string error = wait_error(pending);
  EXPECT_TRUE(Contains(error, "test rank 1): stream ")) << error;
  EXPECT_TRUE(Contains(error, "a piece of message 0 (activation step ")) << error;
  EXPECT_TRUE(Contains(error, "disagrees with its first piece (activation step ")) << error;
}

TEST(RawStreams, AMessageNoStreamBeginsFailsTheWaitingPiece) {
  RawLink link = make_raw_link(2, 300ms);
  const auto payload = pattern(4, 0);
  std::vector<float> got(4);
  MessageHeader later = frame_of(payload, 1);  // message 0 never comes
  later.stream = 1;
  link.write_frame(1, later, bytes(payload));
  // No receive waits, so the link's silence timer is off: the waiting piece gives up alone.
  std::this_thread::sleep_for(600ms);
  EXPECT_TRUE(Contains(wait_error(link.comm->irecv(1, frame_of(payload, 0).info, bytes(got))),
                       "stream 1 of 2: message 1 waited 0.3 s for message 0, which no stream "
                       "began"));
}

TEST(RawStreams, APieceWithABadChecksumFailsItsReceiveNamingThePiece) {
  RawLink link = make_raw_link(2);
  const auto payload = pattern(1000, 0);
  std::vector<float> got(1000);
  Request pending = link.comm->irecv(1, frame_of(payload, 0).info, bytes(got));
  link.write_frame(0, frame_of(payload, 0), bytes(payload).first(1000));
  MessageHeader tail = frame_of(payload, 0);
  tail.stream = 1;
  tail.piece_offset = 1000;
  tail.piece_bytes = 3000;
  tail.piece_crc32c = crc32c(bytes(payload).subspan(1000)) ^ 1;
  link.write(1, encode_header(tail));
  link.write(1, bytes(payload).subspan(1000));
  EXPECT_TRUE(Contains(wait_error(pending),
                       "activation step 0 micro-batch 0 chunk 0: piece of 3000 bytes at offset "
                       "1000: payload checksum mismatch"));
  // The link itself is fine.
  link.write_frame(
      1,
      [&] {
        MessageHeader next = frame_of(payload, 1);
        next.stream = 1;
        return next;
      }(),
      bytes(payload));
  link.comm->recv(1, frame_of(payload, 1).info, bytes(got));
  EXPECT_EQ(got, payload);
}

TEST(Streams, RejectsBadStreamOptionsNamingThem) {
  testing::LocalAddresses addresses = testing::bind_local(2);
  const auto error = [&](const std::function<void(TcpOptions&)>& change) -> std::string {
    TcpOptions o = testing::local_options(addresses.peers, 0);
    change(o);
    try {
      TcpCommunicator comm(o, addresses.listeners[0]);
    } catch (const TransportError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(Contains(error([](TcpOptions& o) { o.streams_per_link = 17; }),
                       "streams_per_link 17 outside [0, 16]"));
  EXPECT_TRUE(Contains(error([](TcpOptions& o) { o.link_capacity = {1.0}; }),
                       "link_capacity has 1 entries, peers has 2"));
  EXPECT_TRUE(Contains(error([](TcpOptions& o) {
                         o.link_capacity = {0, -5};
                       }),
                       "link_capacity[1] -5.000000 must be finite and >= 0"));
  EXPECT_TRUE(Contains(error([](TcpOptions& o) { o.min_piece_bytes = 0; }),
                       "min_piece_bytes must be positive"));
}

}  // namespace
}  // namespace tessel::transport
