#include "kube/base64.h"

#include <array>
#include <cstdint>

namespace tessel::kube {
namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr int kInvalid = -1;
constexpr int kWhitespace = -2;
constexpr int kPad = -3;

constexpr std::array<int, 256> make_decode_table() {
  std::array<int, 256> table{};
  table.fill(kInvalid);
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int>(i);
  }
  for (unsigned char c : {' ', '\t', '\r', '\n'}) table[c] = kWhitespace;
  table['='] = kPad;
  return table;
}

constexpr std::array<int, 256> kDecodeTable = make_decode_table();

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t group =
        static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16 |
        static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8 |
        static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[group >> 18 & 63];
    out += kAlphabet[group >> 12 & 63];
    out += kAlphabet[group >> 6 & 63];
    out += kAlphabet[group & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t group = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (rest == 2)
      group |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out += kAlphabet[group >> 18 & 63];
    out += kAlphabet[group >> 12 & 63];
    out += rest == 2 ? kAlphabet[group >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  std::uint32_t group = 0;  // sextets of the current quantum, most significant first
  int sextets = 0;          // alphabet characters in the current quantum
  int pads = 0;             // '=' seen; once non-zero only more '=' or whitespace may follow
  for (const char c : text) {
    const int value = kDecodeTable[static_cast<unsigned char>(c)];
    if (value == kWhitespace) continue;
    if (value == kInvalid) return std::nullopt;
    if (value == kPad) {
      // Padding completes a quantum holding 2 (then "==") or 3 (then "=") characters.
      if (sextets + pads < 2 || sextets + pads >= 4) return std::nullopt;
      ++pads;
      continue;
    }
    if (pads > 0) return std::nullopt;
    group = group << 6 | static_cast<std::uint32_t>(value);
    if (++sextets == 4) {
      out += static_cast<char>(group >> 16 & 0xff);
      out += static_cast<char>(group >> 8 & 0xff);
      out += static_cast<char>(group & 0xff);
      group = 0;
      sextets = 0;
    }
  }
  if (pads == 0) return sextets == 0 ? std::optional<std::string>(std::move(out)) : std::nullopt;
  if (sextets + pads != 4) return std::nullopt;
  group <<= 6 * pads;
  out += static_cast<char>(group >> 16 & 0xff);
  if (sextets == 3) out += static_cast<char>(group >> 8 & 0xff);
  return out;
}

}  // namespace tessel::kube
