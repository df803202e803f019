// The mesh's handshake on each new connection (mesh.h): the connecting rank's hello and the
// listener's answer, encoded field by field, little-endian (never a memcpy of a struct).
//
// Hello, kHelloBytes bytes: 0 magic u32 "TSLH"   4 version u16   6 reserved u16
//   8 job id u64   16 from rank u32   20 to rank u32   24 world size u32   28 stream u16
//   30 streams u16   32 socket buffer bytes u32   36 crc32c u32 (of 0..35)
// Answer: 0 magic u32 "TSLA"   4 status u32 (0 accepted, else rejected)   8 reason bytes u32,
//   then the reason (at most kMaxReasonBytes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "noderuntime/transport/mesh.h"

namespace tessel::transport {

inline constexpr size_t kHelloBytes = 40;
inline constexpr size_t kAnswerHeadBytes = 12;
inline constexpr size_t kMaxReasonBytes = 1024;
// The largest socket buffer a hello may ask the listener to set.
inline constexpr uint64_t kMaxBufferBytes = 1u << 30;

struct Hello {
  uint64_t job_id = 0;
  uint32_t from_rank = 0;
  uint32_t to_rank = 0;
  uint32_t world_size = 0;
  uint16_t stream = 0;
  uint16_t streams = 1;
  uint32_t buffer_bytes = 0;

  bool operator==(const Hello&) const = default;
};

std::array<std::byte, kHelloBytes> encode_hello(const Hello& hello);
// Throws TransportError on a bad magic, another version or a checksum mismatch.
Hello decode_hello(std::span<const std::byte, kHelloBytes> bytes);

// Why a hello does not belong on this listener (rank options.rank, whose links to the higher
// ranks are `links`, one per rank), or nullopt when it does.
std::optional<std::string> hello_problem(const Hello& hello, const MeshOptions& options,
                                         const std::vector<MeshLink>& links);

// The answer to a hello: accepted (no rejection) or the rejection's reason, cut to
// kMaxReasonBytes.
std::vector<std::byte> encode_answer(const std::optional<std::string>& rejection);

struct AnswerHead {
  bool rejected = false;
  size_t reason_bytes = 0;  // that follow the head
};
// Throws TransportError on a bad magic or a reason longer than kMaxReasonBytes.
AnswerHead decode_answer_head(std::span<const std::byte, kAnswerHeadBytes> bytes);

}  // namespace tessel::transport
