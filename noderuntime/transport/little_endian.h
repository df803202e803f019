// Explicit little-endian encoding of wire fields, byte by byte, independent of the host's
// byte order and of struct layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tessel::transport {

class LittleEndianWriter {
 public:
  explicit LittleEndianWriter(std::span<std::byte> out) : out_(out) {}
  // Appends the low `bytes` bytes of value.
  void put(uint64_t value, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i) out_[pos_++] = static_cast<std::byte>(value >> (8 * i));
  }

 private:
  std::span<std::byte> out_;
  size_t pos_ = 0;
};

class LittleEndianReader {
 public:
  explicit LittleEndianReader(std::span<const std::byte> in, size_t pos = 0) : in_(in), pos_(pos) {}
  uint64_t get(size_t bytes) {
    uint64_t value = 0;
    for (size_t i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in_[pos_++]) << (8 * i);
    return value;
  }

 private:
  std::span<const std::byte> in_;
  size_t pos_;
};

}  // namespace tessel::transport
