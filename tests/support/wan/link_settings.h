// The WAN emulator's configuration: what one directed link between two namespaces does to the
// packets it carries (delay, rate, queue, loss), and the whole emulated network (how many
// namespaces, their addresses, a default link and per-pair overrides).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel::wan {

// One directed link. Limits (checked by validate_link_settings): delay_ms in [0, 10000],
// rate_mbit in [0, 100000] with 0 meaning unlimited, loss in [0, 1] with 1 a black hole (every
// packet dropped, no reset sent: a partition of the link), queue_ms in [1, 10000].
struct LinkSettings {
  double delay_ms = 0;    // one-way delay every packet is held for
  double rate_mbit = 0;   // the link's rate in Mbit/s (10^6 bits); 0: no rate limit, no queue
  double loss = 0;        // probability that a packet is dropped on the wire
  double queue_ms = 100;  // the router's queue ahead of the link, in milliseconds of its rate
                          // (at least kMinQueueBytes); a packet that finds it full is dropped
};

// An override of some of the default link's settings for the link from `from` to `to` (and,
// when both_ways, from `to` to `from`).
struct LinkOverride {
  std::size_t from = 0;
  std::size_t to = 0;
  bool both_ways = true;
  std::optional<double> delay_ms, rate_mbit, loss, queue_ms;
};

inline constexpr std::size_t kMaxNamespaces = 64;
inline constexpr int kMinMtu = 576;
inline constexpr int kMaxMtu = 65535;

struct WanConfig {
  // Namespaces to create ("<name_prefix><i>"), or, when `netns` is not empty, the existing
  // namespaces to use (the emulator then adds only its TUN device to each and deletes none).
  std::size_t namespaces = 2;
  std::vector<std::string> netns;
  std::string name_prefix;  // empty: "twan<pid>-"
  // Namespace i's TUN device gets address <subnet base>.(i+1)/24.
  std::string subnet = "10.250.0.0";
  std::string tun_name = "twan0";
  int mtu = 1500;
  // TCP segmentation offload on the TUN devices (IFF_VNET_HDR, TUNSETOFFLOAD): the kernels hand
  // the forwarder TCP super-packets of up to 64 KB (GSO) instead of MTU-sized ones and take them
  // whole at the far end, so the forwarder moves a fraction of the packets (a 1 Gbit/s link then
  // costs it a few percent of a core, not most of one). Each is shaped by the bytes its segments
  // take on the wire. It is lost or dropped whole, so links with offload take loss 0 or 1 only.
  bool offload = false;
  LinkSettings default_link;
  std::vector<LinkOverride> links;
  std::uint64_t seed = 1;  // the loss draws'

  std::size_t size() const { return netns.empty() ? namespaces : netns.size(); }
};

// Throws std::invalid_argument naming `where` (a flag or a field), the value and the limit.
void validate_link_settings(const LinkSettings& link, const std::string& where);
// Checks the whole configuration (counts, names, subnet, MTU, every link and override).
void validate_wan_config(const WanConfig& config);
// With offload a super-packet is lost whole, which no loss probability of single packets
// describes: throws std::invalid_argument naming `where` unless the link's loss is 0 or 1.
void validate_offload_loss(const LinkSettings& link, const std::string& where);

// The settings of every directed link, row-major: [from * size + to] (the diagonal is unused).
std::vector<LinkSettings> link_matrix(const WanConfig& config);

// "<from>-<to>[:key=value,...]" (both ways) or "<from>><to>[:key=value,...]" (one way), keys
// delay_ms, rate_mbit, loss, queue_ms: the --link flag's form.
LinkOverride parse_link_override(const std::string& text);

// A YAML configuration file:
//   namespaces: 3                       # or  netns: [ns-a, ns-b, ns-c]
//   subnet: 10.250.0.0                  # optional, as are tun_name, mtu, offload, seed
//   default: {delay_ms: 25, rate_mbit: 1000, loss: 0, queue_ms: 100}
//   links:
//     - {between: [0, 1], delay_ms: 75}
//     - {from: 2, to: 0, rate_mbit: 100}
// Errors name the file and the field.
WanConfig load_wan_config(const std::string& path);

// The subnet's base as a host-order IPv4 address; throws naming the value when it is not a
// dotted quad ending in .0.
std::uint32_t subnet_base(const std::string& subnet);
std::string ipv4_text(std::uint32_t host_order);

}  // namespace tessel::wan
