// The header in front of every tensor message between stage processes
// (noderuntime/transport/message_header.h), as a peer's socket delivers it: decode_header on the
// first kHeaderBytes bytes, then check_expected against what a receive posted. Each input is
// tried twice: as sent, and with its header CRC32C made right (a sender that checksums a header
// whose fields are bad), so that the fields behind the checksum are reached. A TransportError is
// the refusal; a decoded header must encode and decode back equal.
#include <algorithm>
#include <array>
#include <cstddef>

#include "noderuntime/transport/crc32c.h"
#include "noderuntime/transport/message_header.h"
#include "noderuntime/transport/transport_error.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace tessel::transport;

void decode(const EncodedHeader& raw) {
  MessageHeader header;
  try {
    header = decode_header(raw);
  } catch (const TransportError&) {
    return;
  }
  try {
    if (!(decode_header(encode_header(header)) == header)) {
      tessel::fuzz::finding("encode_header does not decode back equal");
    }
  } catch (const TransportError& e) {
    tessel::fuzz::finding(std::string("a decoded header does not encode: ") + e.what());
  }
  const TensorInfo expected{Tag::kActivation, 3, 1, 0, DType::kF32, {4, 64, 128}};
  try {
    check_expected(7, expected, header);
  } catch (const TransportError&) {
  }
  to_string(key_of(header.info));
  shape_to_string(header.info.shape);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  EncodedHeader raw{};
  std::copy_n(reinterpret_cast<const std::byte*>(data), std::min(size, kHeaderBytes), raw.begin());
  decode(raw);
  const uint32_t crc = crc32c(std::span<const std::byte>(raw).first(kHeaderBytes - 4));
  for (size_t i = 0; i < 4; ++i) raw[kHeaderBytes - 4 + i] = std::byte(crc >> (8 * i));
  decode(raw);
  return 0;
}
