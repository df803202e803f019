// Point-to-point messages between TcpCommunicators in one process (real sockets): payloads of
// every size, FIFO order within a key, matching by key across tags, asynchronous overlap,
// receives that do not match, silence, closing, invalid arguments, and corrupted streams
// written by a raw peer.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include "local_mesh.h"
#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/mesh.h"
#include "raw_peer.h"

namespace tessel::transport {
namespace {

using namespace std::chrono_literals;
using testing::bytes;
using testing::Comms;
using testing::connect_local;
using testing::Contains;
using testing::f32_info;
using testing::kJob;
using testing::make_raw_mesh;
using testing::pattern;
using testing::RawMesh;
using testing::wait_error;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(PointToPoint, DeliversPayloadsOfEverySize) {
  Comms comms = connect_local(2);
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{16384}, size_t{3 << 20}}) {
    const std::vector<float> sent = pattern(n, static_cast<float>(n));
    std::vector<float> got(n, -1);
    const TensorInfo info = f32_info(Tag::kActivation, 1, 2, n);
    Request r = comms[1]->irecv(0, info, bytes(got));
    comms[0]->send(1, info, bytes(sent));
    r.wait();
    EXPECT_EQ(got, sent) << n << " floats";
  }
  // A multi-dimensional bf16 tensor in the other direction.
  std::vector<uint16_t> sent(2 * 3 * 5), got(sent.size());
  std::iota(sent.begin(), sent.end(), 100);
  const TensorInfo info{Tag::kGradient, 9, 4, 1, DType::kBF16, {2, 3, 5}};
  Request r = comms[0]->irecv(1, info, std::as_writable_bytes(std::span(got)));
  comms[1]->send(0, info, std::as_bytes(std::span(sent)));
  r.wait();
  EXPECT_EQ(got, sent);
}

TEST(PointToPoint, SameKeyMessagesAreReceivedInSendOrder) {
  Comms comms = connect_local(2);
  constexpr int kMessages = 50;
  std::vector<std::vector<float>> sent;
  for (int i = 0; i < kMessages; ++i) sent.push_back(pattern(100, static_cast<float>(i)));
  const TensorInfo info = f32_info(Tag::kActivation, 3, 0, 100);
  std::vector<Request> sends;
  for (const auto& s : sent) sends.push_back(comms[0]->isend(1, info, bytes(s)));
  for (int i = 0; i < kMessages; ++i) {
    std::vector<float> got(100);
    comms[1]->recv(0, info, bytes(got));
    ASSERT_EQ(got, sent[i]) << "message " << i;
  }
  for (auto& s : sends) s.wait();
}

TEST(PointToPoint, DifferentKeysMatchInAnyOrder) {
  Comms comms = connect_local(2);
  // Sent: gradient then activation, then micro-batches 0..9; received: activation first and
  // micro-batches backwards. Nothing may block.
  const auto gradient = pattern(1000, 1), activation = pattern(1000, 2);
  comms[0]->send(1, f32_info(Tag::kGradient, 0, 0, 1000), bytes(gradient));
  comms[0]->send(1, f32_info(Tag::kActivation, 0, 0, 1000), bytes(activation));
  std::vector<std::vector<float>> micro_batches;
  for (uint32_t mb = 0; mb < 10; ++mb) micro_batches.push_back(pattern(10, static_cast<float>(mb)));
  for (uint32_t mb = 0; mb < 10; ++mb) {
    comms[0]->send(1, f32_info(Tag::kActivation, 1, mb, 10), bytes(micro_batches[mb]));
  }
  std::vector<float> got(1000);
  comms[1]->recv(0, f32_info(Tag::kActivation, 0, 0, 1000), bytes(got));
  EXPECT_EQ(got, activation);
  comms[1]->recv(0, f32_info(Tag::kGradient, 0, 0, 1000), bytes(got));
  EXPECT_EQ(got, gradient);
  for (int mb = 9; mb >= 0; --mb) {
    std::vector<float> small(10);
    comms[1]->recv(0, f32_info(Tag::kActivation, 1, static_cast<uint32_t>(mb), 10), bytes(small));
    EXPECT_EQ(small, micro_batches[mb]) << mb;
  }
}

TEST(PointToPoint, AsynchronousOperationsOverlapWithWorkAndEachOther) {
  Comms comms = connect_local(2);
  std::vector<float> got(1 << 20);
  const TensorInfo info = f32_info(Tag::kActivation, 0, 0, got.size());
  Request pending = comms[1]->irecv(0, info, bytes(got));
  EXPECT_FALSE(pending.test());  // nothing sent yet: the caller goes on with its work
  const auto sent = pattern(got.size(), 5);
  Request send = comms[0]->isend(1, info, bytes(sent));
  pending.wait();
  send.wait();
  EXPECT_TRUE(pending.test());
  EXPECT_EQ(got, sent);

  // Both ranks send 16 MiB to each other at once before either receives: full duplex.
  const auto a = pattern(4 << 20, 1), b = pattern(4 << 20, 2);
  std::vector<float> at0(a.size()), at1(a.size());
  const TensorInfo big = f32_info(Tag::kGradient, 1, 0, a.size());
  Request s0 = comms[0]->isend(1, big, bytes(a));
  Request s1 = comms[1]->isend(0, big, bytes(b));
  Request r0 = comms[0]->irecv(1, big, bytes(at0));
  Request r1 = comms[1]->irecv(0, big, bytes(at1));
  for (Request* r : {&s0, &s1, &r0, &r1}) r->wait();
  EXPECT_EQ(at0, b);
  EXPECT_EQ(at1, a);
}

TEST(PointToPoint, AMismatchedMessageFailsOnlyItsReceiveNamingPeerAndField) {
  Comms comms = connect_local(2);
  const auto sent = pattern(6, 0);
  const TensorInfo as_sent{Tag::kActivation, 2, 1, 0, DType::kF32, {2, 3}};
  TensorInfo expected = as_sent;
  expected.shape = {3, 2};
  std::vector<float> got(6);
  // Posted before the message arrives, and after it has arrived.
  Request early = comms[1]->irecv(0, expected, bytes(got));
  comms[0]->send(1, as_sent, bytes(sent));
  const std::string error = wait_error(early);
  EXPECT_TRUE(Contains(error, "rank 0 (127.0.0.1:"));
  EXPECT_TRUE(Contains(error,
                       "test rank 0): activation step 2 micro-batch 1 chunk 0: shape "
                       "[2, 3] does not match the expected [3, 2]"));
  comms[0]->send(1, as_sent, bytes(sent));
  TensorInfo wrong_dtype = as_sent;
  wrong_dtype.dtype = DType::kI32;
  EXPECT_TRUE(Contains(wait_error(comms[1]->irecv(0, wrong_dtype, bytes(got))),
                       "dtype f32 does not match the expected i32"));
  // The connection is still good.
  comms[0]->send(1, as_sent, bytes(sent));
  comms[1]->recv(0, as_sent, bytes(got));
  EXPECT_EQ(got, sent);
}

TEST(PointToPoint, AReceiveOnASilentPeerTimesOutNamingIt) {
  Comms comms = connect_local(2, [](TcpOptions& o) { o.io_timeout = 300ms; });
  std::vector<float> got(4);
  const auto start = std::chrono::steady_clock::now();
  const std::string error =
      wait_error(comms[1]->irecv(0, f32_info(Tag::kActivation, 0, 0, 4), bytes(got)));
  const double waited = seconds_since(start);
  EXPECT_TRUE(Contains(error, "rank 0 (127.0.0.1:"));
  EXPECT_TRUE(Contains(error, ", test rank 0): no data for 0.3 s"));
  EXPECT_GE(waited, 0.29);  // not before the timeout (a slow machine only waits longer)
  // The peer is failed from now on; later operations say so at once.
  EXPECT_TRUE(
      Contains(wait_error(comms[1]->irecv(0, f32_info(Tag::kActivation, 1, 0, 4), bytes(got))),
               "no data for 0.3 s"));
}

TEST(PointToPoint, SilenceWithNobodyWaitingIsNotAnError) {
  Comms comms = connect_local(2, [](TcpOptions& o) { o.io_timeout = 100ms; });
  // Idle for several timeouts with no receive posted: what is measured here is that time
  // passes, so this test waits on the clock.
  std::this_thread::sleep_for(350ms);
  const auto sent = pattern(8, 3);
  std::vector<float> got(8);
  comms[0]->send(1, f32_info(Tag::kControl, 0, 0, 8), bytes(sent));
  comms[1]->recv(0, f32_info(Tag::kControl, 0, 0, 8), bytes(got));
  EXPECT_EQ(got, sent);
}

TEST(PointToPoint, ClosingCancelsPendingOperations) {
  Comms comms = connect_local(2, [](TcpOptions& o) {
    o.links = LinkEmulator::uniform(2, {1e6, 0});  // a send that takes seconds
  });
  std::vector<float> got(4);
  const auto big = pattern(1 << 20, 0);
  Request recv = comms[1]->irecv(0, f32_info(Tag::kActivation, 0, 0, 4), bytes(got));
  Request send = comms[1]->isend(0, f32_info(Tag::kActivation, 0, 0, big.size()), bytes(big));
  comms[1]->close();
  // Cancelled, not waited for: the send, 4 s long on this link, fails instead of completing.
  EXPECT_TRUE(Contains(wait_error(recv), "rank 0 (127.0.0.1:"));
  EXPECT_TRUE(Contains(wait_error(recv), "test rank 0): communicator closed"));
  EXPECT_TRUE(Contains(wait_error(send), "communicator closed"));
  EXPECT_TRUE(
      Contains(wait_error(comms[1]->irecv(0, f32_info(Tag::kActivation, 0, 0, 4), bytes(got))),
               "communicator closed"));
  // The other side sees the connection go.
  EXPECT_TRUE(
      Contains(wait_error(comms[0]->irecv(1, f32_info(Tag::kActivation, 0, 0, 4), bytes(got))),
               "test rank 1): connection closed"));
}

TEST(PointToPoint, MessagesThatArrivedBeforeThePeerLeftCanStillBeReceived) {
  Comms comms = connect_local(2);
  const auto sent = pattern(100, 7);
  comms[0]->send(1, f32_info(Tag::kActivation, 5, 0, 100), bytes(sent));
  // Rank 1 learns of the message (a later one from the same stream arrives), then rank 0 goes.
  comms[0]->send(1, f32_info(Tag::kControl, 5, 0, 100), bytes(sent));
  std::vector<float> got(100);
  comms[1]->recv(0, f32_info(Tag::kControl, 5, 0, 100), bytes(got));
  comms[0].reset();
  comms[1]->recv(0, f32_info(Tag::kActivation, 5, 0, 100), bytes(got));
  EXPECT_EQ(got, sent);
  EXPECT_TRUE(
      Contains(wait_error(comms[1]->irecv(0, f32_info(Tag::kActivation, 6, 0, 100), bytes(got))),
               "connection closed"));
}

TEST(PointToPoint, InvalidArgumentsThrowAtOnce) {
  Comms comms = connect_local(2);
  std::vector<float> buffer(4);
  const auto error = [&](const std::function<void()>& call) -> std::string {
    try {
      call();
    } catch (const TransportError& e) {
      return e.what();
    }
    return "";
  };
  const TensorInfo info = f32_info(Tag::kActivation, 0, 0, 4);
  EXPECT_TRUE(Contains(error([&] { comms[0]->isend(2, info, bytes(buffer)); }),
                       "isend: peer 2 out of range [0, 2)"));
  EXPECT_TRUE(Contains(error([&] { comms[0]->irecv(0, info, bytes(buffer)); }),
                       "irecv: peer 0 is this rank"));
  EXPECT_TRUE(Contains(
      error([&] { comms[0]->isend(1, f32_info(Tag::kActivation, 0, 0, 3), bytes(buffer)); }),
      "isend to rank 1 (127.0.0.1:"));
  EXPECT_TRUE(Contains(
      error([&] { comms[0]->isend(1, f32_info(Tag::kActivation, 0, 0, 3), bytes(buffer)); }),
      "payload is 16 bytes, f32 [3] is 12"));
  EXPECT_TRUE(Contains(
      error([&] { comms[0]->irecv(1, f32_info(Tag::kActivation, 0, 0, 5), bytes(buffer)); }),
      "buffer is 16 bytes, f32 [5] is 20"));
  TensorInfo negative = info;
  negative.shape = {-4};
  EXPECT_TRUE(Contains(error([&] { comms[0]->irecv(1, negative, bytes(buffer)); }),
                       "shape[0]: negative dim -4"));
}

// The frame of a whole message (one piece); write_message numbers it.
MessageHeader header_for(const std::vector<float>& payload, uint64_t step) {
  MessageHeader header{kJob, f32_info(Tag::kActivation, step, 0, payload.size()),
                       payload.size() * sizeof(float)};
  header.piece_bytes = header.payload_bytes;
  header.piece_crc32c = crc32c(bytes(payload));
  return header;
}

TEST(RawPeer, APayloadChecksumMismatchFailsThatReceive) {
  RawMesh mesh = make_raw_mesh();
  const auto payload = pattern(256, 1);
  MessageHeader bad = header_for(payload, 0);
  bad.piece_crc32c ^= 1;
  std::vector<float> got(256);
  Request early = mesh.comm->irecv(1, bad.info, bytes(got));
  mesh.write_message(bad, payload);
  const std::string error = wait_error(early);
  EXPECT_TRUE(Contains(error,
                       "test rank 1): activation step 0 micro-batch 0 chunk 0: payload "
                       "checksum mismatch (header says 0x"));
  // Arrived before the receive was posted: the same verdict.
  mesh.write_message(bad, payload);
  mesh.write_message(header_for(payload, 1), payload);
  mesh.comm->recv(1, header_for(payload, 1).info, bytes(got));
  EXPECT_EQ(got, payload);
  EXPECT_TRUE(
      Contains(wait_error(mesh.comm->irecv(1, bad.info, bytes(got))), "payload checksum mismatch"));
}

TEST(RawPeer, ABadHeaderFailsThePeer) {
  RawMesh mesh = make_raw_mesh();
  std::vector<float> got(4);
  Request pending = mesh.comm->irecv(1, f32_info(Tag::kActivation, 0, 0, 4), bytes(got));
  EncodedHeader garbage = encode_header(header_for(pattern(4, 0), 0));
  garbage[0] = std::byte{'X'};
  mesh.write(garbage);
  const std::string error = wait_error(pending);
  EXPECT_TRUE(Contains(error, "rank 1 (127.0.0.1:"));
  EXPECT_TRUE(Contains(error, "test rank 1): bad message header: bad magic 0x4d4c5358"));
}

TEST(RawPeer, AMessageOfAnotherJobFailsThePeer) {
  RawMesh mesh = make_raw_mesh();
  std::vector<float> got(4);
  Request pending = mesh.comm->irecv(1, f32_info(Tag::kActivation, 0, 0, 4), bytes(got));
  MessageHeader other = header_for(pattern(4, 0), 0);
  other.job_id = 99;
  mesh.write_message(other, pattern(4, 0));
  EXPECT_TRUE(Contains(wait_error(pending),
                       "test rank 1): message for job 99, this job is " + std::to_string(kJob)));
}

TEST(RawPeer, APeerThatStopsMidMessageTimesOut) {
  RawMesh mesh = make_raw_mesh([](TcpOptions& o) { o.io_timeout = 300ms; });
  const auto payload = pattern(1000, 0);
  std::vector<float> got(1000);
  Request pending = mesh.comm->irecv(1, header_for(payload, 0).info, bytes(got));
  mesh.write(encode_header(header_for(payload, 0)));
  mesh.write(bytes(payload).first(1000));  // a quarter of the payload, then silence
  EXPECT_TRUE(Contains(wait_error(pending), "test rank 1): no data for 0.3 s"));
}

TEST(RawPeer, ASendToAPeerThatReadsNothingTimesOut) {
  RawMesh mesh = make_raw_mesh([](TcpOptions& o) { o.io_timeout = 300ms; });
  const auto big = pattern(16 << 20, 0);  // 64 MiB: more than the socket buffers hold
  const std::string error =
      wait_error(mesh.comm->isend(1, f32_info(Tag::kGradient, 0, 0, big.size()), bytes(big)));
  EXPECT_TRUE(Contains(error, "rank 1 (127.0.0.1:"));
  EXPECT_TRUE(
      Contains(error, "test rank 1): no progress sending for 0.3 s (the peer reads nothing)"));
}

}  // namespace
}  // namespace tessel::transport
