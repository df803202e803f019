// Where a rank listens, and how errors name it.
#pragma once

#include <cstdint>
#include <string>

namespace tessel::transport {

struct PeerAddress {
  std::string host;
  uint16_t port = 0;
  std::string label;  // what the rank is, for people: "stage 1 replica 0"; may be empty

  bool operator==(const PeerAddress&) const = default;
};

// "rank 3 (127.0.0.1:40123, stage 1 replica 0)"
inline std::string describe_peer(int rank, const PeerAddress& address) {
  std::string out =
      "rank " + std::to_string(rank) + " (" + address.host + ":" + std::to_string(address.port);
  if (!address.label.empty()) out += ", " + address.label;
  return out + ")";
}

}  // namespace tessel::transport
