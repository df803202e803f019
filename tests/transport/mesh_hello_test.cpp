// The mesh handshake's encoding (mesh_hello.h): a hello encodes and decodes back equal, every
// refusal of decode_hello and decode_answer_head names what is wrong, and hello_problem judges
// a hello against the listener's job, rank and links. (The handshake over sockets is in
// mesh_test.cpp.)
#include "noderuntime/transport/mesh_hello.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>

#include "local_mesh.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

using testing::Contains;

std::string decode_error(std::array<std::byte, kHelloBytes> bytes) {
  try {
    decode_hello(bytes);
  } catch (const TransportError& e) {
    return e.what();
  }
  return "";
}

TEST(MeshHello, EncodesAndDecodesBackEqual) {
  const Hello hello{0x7e55e1, 3, 1, 4, 1, 2, 4 << 20};
  EXPECT_EQ(decode_hello(encode_hello(hello)), hello);
}

TEST(MeshHello, DecodeNamesBadMagicVersionAndChecksum) {
  auto bytes = encode_hello(Hello{1, 2, 1, 4, 0, 1, 0});
  auto bad_magic = bytes;
  bad_magic[0] = std::byte{'X'};
  EXPECT_TRUE(Contains(decode_error(bad_magic), "not a tessel hello (bad magic)"));
  auto version = bytes;
  version[4] = std::byte{1};
  EXPECT_TRUE(Contains(decode_error(version), "hello version 1, expected 2"));
  auto flipped = bytes;
  flipped[9] ^= std::byte{1};
  EXPECT_TRUE(Contains(decode_error(flipped), "hello checksum mismatch"));
}

TEST(MeshHello, AnswersDecodeBackAndALongReasonIsRefused) {
  const std::vector<std::byte> accepted = encode_answer(std::nullopt);
  const AnswerHead head = decode_answer_head(std::span(accepted).first<kAnswerHeadBytes>());
  EXPECT_FALSE(head.rejected);
  EXPECT_EQ(head.reason_bytes, 0u);
  const std::vector<std::byte> rejected = encode_answer(std::string(5000, 'r'));
  const AnswerHead cut = decode_answer_head(std::span(rejected).first<kAnswerHeadBytes>());
  EXPECT_TRUE(cut.rejected);
  EXPECT_EQ(cut.reason_bytes, kMaxReasonBytes);
  std::array<std::byte, kAnswerHeadBytes> too_long{};
  std::copy_n(rejected.begin(), kAnswerHeadBytes, too_long.begin());
  too_long[9] = std::byte{0x10};  // 4096 reason bytes
  try {
    decode_answer_head(too_long);
    FAIL() << "a reason over kMaxReasonBytes was accepted";
  } catch (const TransportError& e) {
    EXPECT_TRUE(Contains(e.what(), "handshake answer reason of 4096 bytes"));
  }
}

TEST(MeshHello, ProblemsNameTheFieldAtFault) {
  MeshOptions options;
  options.job_id = 7;
  options.rank = 1;
  options.peers.resize(4);
  std::vector<MeshLink> links(4);
  links[3].streams.resize(2);
  links[3].streams[0] = UniqueFd(eventfd(0, EFD_CLOEXEC));  // stream 0 of rank 3 is connected
  const auto problem = [&](Hello hello) {
    return hello_problem(hello, options, links).value_or("");
  };
  EXPECT_EQ(problem(Hello{7, 2, 1, 4, 0, 1, 0}), "");
  EXPECT_EQ(problem(Hello{7, 3, 1, 4, 1, 2, 0}), "");
  EXPECT_TRUE(Contains(problem(Hello{8, 2, 1, 4, 0, 1, 0}), "job id 8 is not this job's 7"));
  EXPECT_TRUE(Contains(problem(Hello{7, 2, 1, 5, 0, 1, 0}), "world size 5 is not this job's 4"));
  EXPECT_TRUE(Contains(problem(Hello{7, 2, 0, 4, 0, 1, 0}), "addressed to rank 0, this is rank 1"));
  EXPECT_TRUE(Contains(problem(Hello{7, 0, 1, 4, 0, 1, 0}), "rank 0 may not connect to rank 1"));
  EXPECT_TRUE(Contains(problem(Hello{7, 4, 1, 4, 0, 1, 0}), "rank 4 may not connect to rank 1"));
  EXPECT_TRUE(Contains(problem(Hello{7, 2, 1, 4, 0, 0, 0}), "rank 2 announced 0 streams"));
  EXPECT_TRUE(Contains(problem(Hello{7, 2, 1, 4, 2, 2, 0}), "rank 2 sent stream 2 of a 2-stream"));
  EXPECT_TRUE(Contains(problem(Hello{7, 2, 1, 4, 0, 1, 0xFFFFFFFF}),
                       "rank 2 asked for socket buffers of 4294967295 bytes, at most 1073741824"));
  EXPECT_TRUE(
      Contains(problem(Hello{7, 3, 1, 4, 0, 3, 0}), "rank 3 announced 3 streams, earlier 2"));
  EXPECT_TRUE(
      Contains(problem(Hello{7, 3, 1, 4, 0, 2, 0}), "rank 3 stream 0 is already connected"));
}

}  // namespace
}  // namespace tessel::transport
