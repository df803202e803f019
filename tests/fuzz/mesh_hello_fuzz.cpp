// The mesh handshake (noderuntime/transport/mesh_hello.h) as a peer's socket delivers it: the
// first kHelloBytes bytes are a connecting rank's hello, which the listener decodes and judges
// (decode_hello, then hello_problem against a listener of rank 1 in a 4-rank job whose link to
// rank 3 has one of its 2 streams connected); the next kAnswerHeadBytes bytes are a listener's
// answer head as the connecting rank reads it (decode_answer_head), and what follows its reason.
// The hello is tried twice: as sent, and with its CRC32C made right, so that the fields behind
// the checksum are reached. A TransportError is the refusal; a decoded hello must encode and
// decode back equal, and so must an answer.
#include <fcntl.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/mesh_hello.h"
#include "noderuntime/transport/transport_error.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace tessel::transport;

constexpr uint64_t kJob = 0x7e55e1;

struct Listener {
  MeshOptions options;
  std::vector<MeshLink> links;
};

const Listener& listener() {
  static const Listener* const it = [] {
    auto* l = new Listener;
    l->options.job_id = kJob;
    l->options.rank = 1;
    for (int r = 0; r < 4; ++r) l->options.peers.push_back({"127.0.0.1", uint16_t(7000 + r), ""});
    l->links.resize(4);
    l->links[3].streams.resize(2);
    l->links[3].streams[0] = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    return l;
  }();
  return *it;
}

void judge_hello(const std::array<std::byte, kHelloBytes>& raw) {
  Hello hello;
  try {
    hello = decode_hello(raw);
  } catch (const TransportError&) {
    return;
  }
  try {
    if (!(decode_hello(encode_hello(hello)) == hello)) {
      tessel::fuzz::finding("encode_hello does not decode back equal");
    }
  } catch (const TransportError& e) {
    tessel::fuzz::finding(std::string("an encoded hello is refused: ") + e.what());
  }
  const std::optional<std::string> problem =
      hello_problem(hello, listener().options, listener().links);
  // What the listener answers (a rejection with its reason, cut to kMaxReasonBytes) must read
  // back as what it says.
  const std::vector<std::byte> answer = encode_answer(problem);
  const AnswerHead head = decode_answer_head(std::span(answer).first<kAnswerHeadBytes>());
  if (head.rejected != problem.has_value() ||
      head.reason_bytes != answer.size() - kAnswerHeadBytes) {
    tessel::fuzz::finding("an encoded answer does not decode back equal");
  }
}

void read_answer(const uint8_t* data, size_t size) {
  std::array<std::byte, kAnswerHeadBytes> raw{};
  std::copy_n(reinterpret_cast<const std::byte*>(data), std::min(size, kAnswerHeadBytes),
              raw.begin());
  AnswerHead head;
  try {
    head = decode_answer_head(raw);
  } catch (const TransportError&) {
    return;
  }
  if (head.reason_bytes > kMaxReasonBytes) tessel::fuzz::finding("a reason over the limit");
  if (!head.rejected) return;
  const size_t have = size > kAnswerHeadBytes ? size - kAnswerHeadBytes : 0;
  const std::string reason(reinterpret_cast<const char*>(data) + std::min(size, kAnswerHeadBytes),
                           std::min(have, head.reason_bytes));
  const std::vector<std::byte> again = encode_answer(reason);
  const AnswerHead back = decode_answer_head(std::span(again).first<kAnswerHeadBytes>());
  if (!back.rejected || back.reason_bytes != reason.size()) {
    tessel::fuzz::finding("a rejection does not encode back equal");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::array<std::byte, kHelloBytes> raw{};
  std::copy_n(reinterpret_cast<const std::byte*>(data), std::min(size, kHelloBytes), raw.begin());
  judge_hello(raw);
  const uint32_t crc = crc32c(std::span<const std::byte>(raw).first(kHelloBytes - 4));
  for (size_t i = 0; i < 4; ++i) raw[kHelloBytes - 4 + i] = std::byte(crc >> (8 * i));
  judge_hello(raw);
  if (size > kHelloBytes) read_answer(data + kHelloBytes, size - kHelloBytes);
  return 0;
}
