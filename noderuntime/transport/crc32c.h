// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every tensor message's
// payload and header. On x86-64 with SSE4.2 (checked at run time) the crc32 instruction, eight
// bytes at a time; elsewhere software slicing-by-8 (eight 256-entry tables, eight bytes per
// step), a few GB/s per core. Between processes of one machine the links are fast enough for the
// checksum to show: the instruction is several times faster.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tessel::transport {

// Extends `crc` (the value returned for the bytes before `data`; 0 to start) over `data`:
// crc32c_extend(crc32c_extend(0, a), b) == crc32c(a followed by b).
uint32_t crc32c_extend(uint32_t crc, std::span<const std::byte> data);

inline uint32_t crc32c(std::span<const std::byte> data) { return crc32c_extend(0, data); }

// The software path alone, on every machine (what crc32c_extend does without SSE4.2).
uint32_t crc32c_extend_portable(uint32_t crc, std::span<const std::byte> data);

}  // namespace tessel::transport
