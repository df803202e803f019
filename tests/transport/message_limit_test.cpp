// The receiver's bound on a message's size (TcpOptions::max_message_bytes, tcp_peer.h): a frame
// whose header announces more fails the link, naming the peer, the announced size and the limit,
// before anything is allocated for it; a message of exactly the limit still arrives. The
// announcing peer is played by the test over a real socket (rank 1 of a two-rank mesh).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "local_mesh.h"
#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/mesh.h"
#include "raw_peer.h"

namespace tessel::transport {
namespace {

using namespace std::chrono_literals;
using testing::bytes;
using testing::Contains;
using testing::f32_info;
using testing::kJob;
using testing::make_raw_mesh;
using testing::pattern;
using testing::RawMesh;
using testing::wait_error;

// Rank 0 accepts messages of at most `max_message_bytes`; rank 1 is the test's raw peer.
RawMesh make_limited_mesh(uint64_t max_message_bytes) {
  return make_raw_mesh([&](TcpOptions& options) { options.max_message_bytes = max_message_bytes; });
}

// The header of a whole f32 message of `elems` values, the link's first (sequence 0).
MessageHeader announcing(uint64_t elems) {
  MessageHeader header{kJob, f32_info(Tag::kActivation, 0, 0, elems), elems * sizeof(float)};
  header.piece_bytes = header.payload_bytes;
  return header;
}

TEST(MessageLimit, AMessageOverTheLimitFailsTheLinkNamingPeerSizeAndLimit) {
  constexpr uint64_t kLimit = 1 << 20;
  RawMesh mesh = make_limited_mesh(kLimit);
  std::vector<float> got(4);
  // A receive of another message: it learns of the link's failure.
  Request pending = mesh.comm->irecv(1, f32_info(Tag::kGradient, 0, 0, 4), bytes(got));
  mesh.write(encode_header(announcing(kLimit / sizeof(float) + 1)));
  const std::string error = wait_error(pending);
  EXPECT_TRUE(Contains(error,
                       "test rank 1): a message of 1048580 bytes (activation step 0 "
                       "micro-batch 0 chunk 0) is larger than the limit of 1048576 bytes "
                       "(max_message_bytes)"));
  // The link stays failed; the process goes on.
  EXPECT_TRUE(
      Contains(wait_error(mesh.comm->irecv(1, f32_info(Tag::kActivation, 1, 0, 4), bytes(got))),
               "larger than the limit"));
}

TEST(MessageLimit, AHugeAnnouncedLengthIsRefusedByTheDefaultLimitWithoutAllocating) {
  RawMesh mesh = make_limited_mesh(kDefaultMaxMessageBytes);
  std::vector<float> got(4);
  Request pending = mesh.comm->irecv(1, f32_info(Tag::kGradient, 0, 0, 4), bytes(got));
  // 2^63 bytes: no receive is posted for it, so without the limit the receiver would try to
  // hold it.
  mesh.write(encode_header(announcing(uint64_t{1} << 61)));
  EXPECT_TRUE(Contains(wait_error(pending), "a message of 9223372036854775808 bytes"));
  EXPECT_TRUE(Contains(wait_error(pending),
                       "the limit of " + std::to_string(kDefaultMaxMessageBytes) + " bytes"));
}

TEST(MessageLimit, AMessageOfExactlyTheLimitArrives) {
  constexpr size_t kElems = 4096;
  RawMesh mesh = make_limited_mesh(kElems * sizeof(float));
  const std::vector<float> sent = pattern(kElems, 3);
  MessageHeader header = announcing(kElems);
  header.piece_crc32c = crc32c(bytes(sent));
  mesh.write(encode_header(header));
  mesh.write(bytes(sent));
  std::vector<float> got(kElems);
  mesh.comm->recv(1, header.info, bytes(got));
  EXPECT_EQ(got, sent);
}

TEST(MessageLimit, ALimitOfZeroIsRefused) {
  testing::LocalAddresses addresses = testing::bind_local(1);
  TcpOptions options = testing::local_options(addresses.peers, 0);
  options.max_message_bytes = 0;
  try {
    TcpCommunicator comm(options, addresses.listeners[0]);
    FAIL() << "a zero max_message_bytes was accepted";
  } catch (const TransportError& e) {
    EXPECT_TRUE(Contains(e.what(), "max_message_bytes must be positive"));
  }
}

}  // namespace
}  // namespace tessel::transport
