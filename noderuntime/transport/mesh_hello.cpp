#include "noderuntime/transport/mesh_hello.h"

#include <algorithm>

#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/little_endian.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

constexpr uint32_t kHelloMagic = 0x484C5354u;   // "TSLH"
constexpr uint32_t kAnswerMagic = 0x414C5354u;  // "TSLA"
constexpr uint16_t kHelloVersion = 2;           // 2 added stream, streams and buffer bytes

}  // namespace

std::array<std::byte, kHelloBytes> encode_hello(const Hello& hello) {
  std::array<std::byte, kHelloBytes> out{};
  LittleEndianWriter w(out);
  w.put(kHelloMagic, 4);
  w.put(kHelloVersion, 2);
  w.put(0, 2);
  w.put(hello.job_id, 8);
  w.put(hello.from_rank, 4);
  w.put(hello.to_rank, 4);
  w.put(hello.world_size, 4);
  w.put(hello.stream, 2);
  w.put(hello.streams, 2);
  w.put(hello.buffer_bytes, 4);
  w.put(crc32c(std::span(out).first(kHelloBytes - 4)), 4);
  return out;
}

Hello decode_hello(std::span<const std::byte, kHelloBytes> bytes) {
  LittleEndianReader r(bytes);
  if (r.get(4) != kHelloMagic) throw TransportError("not a tessel hello (bad magic)");
  const uint64_t version = r.get(2);
  if (version != kHelloVersion) {
    throw TransportError("hello version " + std::to_string(version) + ", expected " +
                         std::to_string(kHelloVersion));
  }
  r.get(2);
  Hello hello;
  hello.job_id = r.get(8);
  hello.from_rank = static_cast<uint32_t>(r.get(4));
  hello.to_rank = static_cast<uint32_t>(r.get(4));
  hello.world_size = static_cast<uint32_t>(r.get(4));
  hello.stream = static_cast<uint16_t>(r.get(2));
  hello.streams = static_cast<uint16_t>(r.get(2));
  hello.buffer_bytes = static_cast<uint32_t>(r.get(4));
  if (r.get(4) != crc32c(bytes.first(kHelloBytes - 4))) {
    throw TransportError("hello checksum mismatch");
  }
  return hello;
}

std::optional<std::string> hello_problem(const Hello& hello, const MeshOptions& options,
                                         const std::vector<MeshLink>& links) {
  const auto world = static_cast<uint32_t>(options.peers.size());
  if (hello.job_id != options.job_id) {
    return "job id " + std::to_string(hello.job_id) + " is not this job's " +
           std::to_string(options.job_id);
  }
  if (hello.world_size != world) {
    return "world size " + std::to_string(hello.world_size) + " is not this job's " +
           std::to_string(world);
  }
  if (hello.to_rank != static_cast<uint32_t>(options.rank)) {
    return "addressed to rank " + std::to_string(hello.to_rank) + ", this is rank " +
           std::to_string(options.rank);
  }
  if (hello.from_rank <= static_cast<uint32_t>(options.rank) || hello.from_rank >= world) {
    return "rank " + std::to_string(hello.from_rank) + " may not connect to rank " +
           std::to_string(options.rank) + " (the lower rank of a pair listens)";
  }
  const std::string from = "rank " + std::to_string(hello.from_rank);
  if (hello.streams < 1 || hello.streams > kMaxStreamsPerLink) {
    return from + " announced " + std::to_string(hello.streams) + " streams, outside [1, " +
           std::to_string(kMaxStreamsPerLink) + "]";
  }
  if (hello.stream >= hello.streams) {
    return from + " sent stream " + std::to_string(hello.stream) + " of a " +
           std::to_string(hello.streams) + "-stream link";
  }
  if (hello.buffer_bytes > kMaxBufferBytes) {
    return from + " asked for socket buffers of " + std::to_string(hello.buffer_bytes) +
           " bytes, at most " + std::to_string(kMaxBufferBytes);
  }
  const std::vector<UniqueFd>& streams = links[hello.from_rank].streams;
  if (!streams.empty() && streams.size() != hello.streams) {
    return from + " announced " + std::to_string(hello.streams) + " streams, earlier " +
           std::to_string(streams.size());
  }
  if (!streams.empty() && streams[hello.stream].valid()) {
    return from + " stream " + std::to_string(hello.stream) + " is already connected";
  }
  return std::nullopt;
}

std::vector<std::byte> encode_answer(const std::optional<std::string>& rejection) {
  const std::string reason = rejection.value_or("").substr(0, kMaxReasonBytes);
  std::vector<std::byte> out(kAnswerHeadBytes + reason.size());
  LittleEndianWriter w(out);
  w.put(kAnswerMagic, 4);
  w.put(rejection ? 1 : 0, 4);
  w.put(reason.size(), 4);
  std::transform(reason.begin(), reason.end(), out.begin() + kAnswerHeadBytes,
                 [](char c) { return static_cast<std::byte>(c); });
  return out;
}

AnswerHead decode_answer_head(std::span<const std::byte, kAnswerHeadBytes> bytes) {
  LittleEndianReader r(bytes);
  if (r.get(4) != kAnswerMagic) throw TransportError("handshake answer has a bad magic");
  AnswerHead head;
  head.rejected = r.get(4) != 0;
  const uint64_t length = r.get(4);
  if (length > kMaxReasonBytes) {
    throw TransportError("handshake answer reason of " + std::to_string(length) + " bytes");
  }
  head.reason_bytes = static_cast<size_t>(length);
  return head;
}

}  // namespace tessel::transport
