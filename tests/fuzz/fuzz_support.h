// What the fuzz targets share: the input as text, a finding (a broken promise of the parser under
// test, e.g. a round trip that does not hold) as an abort that libFuzzer and the replay report,
// and the input cut into pieces for targets that feed a parser several messages or chunks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::fuzz {

inline std::string as_text(const uint8_t* data, size_t size) {
  return size == 0 ? std::string() : std::string(reinterpret_cast<const char*>(data), size);
}

// A parser broke a documented promise: print it and abort (libFuzzer saves the input).
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::abort();
}

// The input as pieces, each a 2-byte little-endian length then that many bytes (a last piece
// shorter than its length takes what is left): the messages of a stream, one per piece.
inline std::vector<std::string_view> length_prefixed_pieces(const uint8_t* data, size_t size) {
  std::vector<std::string_view> pieces;
  size_t at = 0;
  while (at + 2 <= size) {
    size_t length = size_t{data[at]} | size_t{data[at + 1]} << 8;
    at += 2;
    if (length > size - at) length = size - at;
    pieces.emplace_back(reinterpret_cast<const char*>(data + at), length);
    at += length;
  }
  return pieces;
}

}  // namespace tessel::fuzz
