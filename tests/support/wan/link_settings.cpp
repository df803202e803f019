#include "tests/support/wan/link_settings.h"

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tessel::wan {
namespace {

std::string number_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

void check_range(double value, double low, double high, const std::string& where,
                 const std::string& limit_text) {
  if (!std::isfinite(value) || value < low || value > high) {
    throw std::invalid_argument(where + ": " + number_text(value) + " is out of range (" +
                                limit_text + ")");
  }
}

void apply(const LinkOverride& override, LinkSettings& link) {
  if (override.delay_ms) link.delay_ms = *override.delay_ms;
  if (override.rate_mbit) link.rate_mbit = *override.rate_mbit;
  if (override.loss) link.loss = *override.loss;
  if (override.queue_ms) link.queue_ms = *override.queue_ms;
}

std::size_t parse_index(const std::string& text, const std::string& where) {
  std::size_t used = 0;
  unsigned long value = 0;
  try {
    value = std::stoul(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || text[0] == '-') {
    throw std::invalid_argument(where + ": \"" + text + "\" is not a namespace index");
  }
  return value;
}

double parse_number(const std::string& text, const std::string& where) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw std::invalid_argument(where + ": \"" + text + "\" is not a number");
  }
  return value;
}

// Sets the field `key` of `override` from `value`; false when there is no such field.
bool set_field(LinkOverride& override, const std::string& key, double value) {
  if (key == "delay_ms") {
    override.delay_ms = value;
  } else if (key == "rate_mbit") {
    override.rate_mbit = value;
  } else if (key == "loss") {
    override.loss = value;
  } else if (key == "queue_ms") {
    override.queue_ms = value;
  } else {
    return false;
  }
  return true;
}

const char* kLinkKeys = "delay_ms, rate_mbit, loss, queue_ms";

}  // namespace

void validate_link_settings(const LinkSettings& link, const std::string& where) {
  check_range(link.delay_ms, 0, 10000, where + " delay_ms", "0 to 10000 ms");
  check_range(link.rate_mbit, 0, 100000, where + " rate_mbit",
              "0 to 100000 Mbit/s, 0 for unlimited");
  check_range(link.loss, 0, 1, where + " loss", "a probability, 0 to 1, 1 for a partition");
  check_range(link.queue_ms, 1, 10000, where + " queue_ms", "1 to 10000 ms");
}

void validate_wan_config(const WanConfig& config) {
  const std::size_t n = config.size();
  if (n < 2 || n > kMaxNamespaces) {
    throw std::invalid_argument((config.netns.empty() ? "namespaces: " : "netns: ") +
                                std::to_string(n) + " namespaces is out of range (2 to " +
                                std::to_string(kMaxNamespaces) +
                                ": one forwarding thread serves them all)");
  }
  std::set<std::string> seen;
  for (const std::string& name : config.netns) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      throw std::invalid_argument("netns: \"" + name + "\" is not a namespace name");
    }
    if (!seen.insert(name).second) {
      throw std::invalid_argument("netns: \"" + name + "\" is named twice");
    }
  }
  if (config.tun_name.empty() || config.tun_name.size() > 15 ||
      config.tun_name.find_first_of("/ :") != std::string::npos) {
    throw std::invalid_argument("tun_name: \"" + config.tun_name +
                                "\" is not a network device name (1 to 15 characters, no '/', "
                                "':' or space)");
  }
  if (config.mtu < kMinMtu || config.mtu > kMaxMtu) {
    throw std::invalid_argument("mtu: " + std::to_string(config.mtu) + " is out of range (" +
                                std::to_string(kMinMtu) + " to " + std::to_string(kMaxMtu) + ")");
  }
  subnet_base(config.subnet);
  validate_link_settings(config.default_link, "default link");
  for (const LinkOverride& link : config.links) {
    const std::string where = "link " + std::to_string(link.from) + (link.both_ways ? "-" : ">") +
                              std::to_string(link.to);
    for (std::size_t index : {link.from, link.to}) {
      if (index >= n) {
        throw std::invalid_argument(where + ": namespace " + std::to_string(index) +
                                    " does not exist (there are " + std::to_string(n) +
                                    ", numbered from 0)");
      }
    }
    if (link.from == link.to) {
      throw std::invalid_argument(where + ": a link joins two different namespaces");
    }
    LinkSettings resolved = config.default_link;
    apply(link, resolved);
    validate_link_settings(resolved, where);
  }
  if (config.offload) {
    const std::vector<LinkSettings> links = link_matrix(config);
    for (std::size_t from = 0; from < n; ++from) {
      for (std::size_t to = 0; to < n; ++to) {
        if (from == to) continue;
        validate_offload_loss(links[from * n + to],
                              "link " + std::to_string(from) + ">" + std::to_string(to));
      }
    }
  }
}

void validate_offload_loss(const LinkSettings& link, const std::string& where) {
  if (link.loss != 0 && link.loss != 1) {
    throw std::invalid_argument(where + ": loss " + number_text(link.loss) +
                                " with offload: a super-packet of up to 64 KB would be lost "
                                "whole (use loss 0 or 1, or turn offload off)");
  }
}

std::vector<LinkSettings> link_matrix(const WanConfig& config) {
  const std::size_t n = config.size();
  std::vector<LinkSettings> matrix(n * n, config.default_link);
  for (const LinkOverride& link : config.links) {  // later overrides win
    apply(link, matrix[link.from * n + link.to]);
    if (link.both_ways) apply(link, matrix[link.to * n + link.from]);
  }
  return matrix;
}

LinkOverride parse_link_override(const std::string& text) {
  const std::string where = "--link " + text;
  const std::size_t colon = text.find(':');
  const std::string pair = text.substr(0, colon);
  const std::size_t separator = pair.find_first_of("->");
  if (separator == std::string::npos) {
    throw std::invalid_argument(where +
                                ": expected <from>-<to> (both ways) or <from>><to> "
                                "(one way), then :key=value,... with keys " +
                                std::string(kLinkKeys));
  }
  LinkOverride link;
  link.both_ways = pair[separator] == '-';
  link.from = parse_index(pair.substr(0, separator), where);
  link.to = parse_index(pair.substr(separator + 1), where);
  if (colon == std::string::npos) return link;
  std::istringstream fields(text.substr(colon + 1));
  std::string field;
  while (std::getline(fields, field, ',')) {
    const std::size_t equals = field.find('=');
    const std::string key = field.substr(0, equals);
    if (equals == std::string::npos) {
      throw std::invalid_argument(where + ": \"" + field + "\" is not key=value");
    }
    if (!set_field(link, key, parse_number(field.substr(equals + 1), where + " " + key))) {
      throw std::invalid_argument(where + ": unknown key \"" + key +
                                  "\" (known: " + std::string(kLinkKeys) + ")");
    }
  }
  return link;
}

namespace {

void check_keys(const YAML::Node& map, const std::set<std::string>& known,
                const std::string& where) {
  for (const auto& entry : map) {
    const std::string key = entry.first.as<std::string>();
    if (!known.count(key)) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw std::invalid_argument(where + ": unknown field \"" + key + "\" (known: " + list + ")");
    }
  }
}

template <typename T>
T scalar(const YAML::Node& node, const std::string& where) {
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw std::invalid_argument(where + ": \"" + YAML::Dump(node) + "\" is not a " +
                                (std::is_same_v<T, std::string> ? "string" : "number"));
  }
}

// The link fields present in `map`, into `link`.
void read_link_fields(const YAML::Node& map, const std::string& where, LinkOverride& link) {
  for (const char* key : {"delay_ms", "rate_mbit", "loss", "queue_ms"}) {
    if (map[key]) set_field(link, key, scalar<double>(map[key], where + "." + key));
  }
}

}  // namespace

WanConfig load_wan_config(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument("WAN emulator config " + path + ": " + e.what());
  }
  const std::string file = "WAN emulator config " + path;
  if (!root.IsMap()) throw std::invalid_argument(file + ": expected a map at the top");
  check_keys(
      root,
      {"namespaces", "netns", "subnet", "tun_name", "mtu", "offload", "seed", "default", "links"},
      file);
  WanConfig config;
  if (root["namespaces"])
    config.namespaces = scalar<std::size_t>(root["namespaces"], file + ": namespaces");
  if (root["netns"]) {
    if (!root["netns"].IsSequence()) throw std::invalid_argument(file + ": netns: expected a list");
    for (const auto& name : root["netns"])
      config.netns.push_back(scalar<std::string>(name, file + ": netns"));
  }
  if (root["subnet"]) config.subnet = scalar<std::string>(root["subnet"], file + ": subnet");
  if (root["tun_name"])
    config.tun_name = scalar<std::string>(root["tun_name"], file + ": tun_name");
  if (root["mtu"]) config.mtu = scalar<int>(root["mtu"], file + ": mtu");
  if (root["offload"]) config.offload = scalar<bool>(root["offload"], file + ": offload");
  if (root["seed"]) config.seed = scalar<std::uint64_t>(root["seed"], file + ": seed");
  if (const YAML::Node d = root["default"]) {
    if (!d.IsMap()) throw std::invalid_argument(file + ": default: expected a map");
    check_keys(d, {"delay_ms", "rate_mbit", "loss", "queue_ms"}, file + ": default");
    LinkOverride fields;
    read_link_fields(d, file + ": default", fields);
    apply(fields, config.default_link);
  }
  if (const YAML::Node links = root["links"]) {
    if (!links.IsSequence()) throw std::invalid_argument(file + ": links: expected a list");
    for (std::size_t i = 0; i < links.size(); ++i) {
      const YAML::Node entry = links[i];
      const std::string where = file + ": links[" + std::to_string(i) + "]";
      if (!entry.IsMap()) throw std::invalid_argument(where + ": expected a map");
      check_keys(entry, {"between", "from", "to", "delay_ms", "rate_mbit", "loss", "queue_ms"},
                 where);
      LinkOverride link;
      if (entry["between"]) {
        if (entry["from"] || entry["to"]) {
          throw std::invalid_argument(where + ": give either between or from and to, not both");
        }
        if (!entry["between"].IsSequence() || entry["between"].size() != 2) {
          throw std::invalid_argument(where + ".between: expected two namespace indices");
        }
        link.from = scalar<std::size_t>(entry["between"][0], where + ".between");
        link.to = scalar<std::size_t>(entry["between"][1], where + ".between");
        link.both_ways = true;
      } else if (entry["from"] && entry["to"]) {
        link.from = scalar<std::size_t>(entry["from"], where + ".from");
        link.to = scalar<std::size_t>(entry["to"], where + ".to");
        link.both_ways = false;
      } else {
        throw std::invalid_argument(where + ": expected between: [a, b] or from and to");
      }
      read_link_fields(entry, where, link);
      config.links.push_back(link);
    }
  }
  validate_wan_config(config);
  return config;
}

std::uint32_t subnet_base(const std::string& subnet) {
  in_addr address{};
  if (::inet_pton(AF_INET, subnet.c_str(), &address) != 1 || (ntohl(address.s_addr) & 255) != 0) {
    throw std::invalid_argument("subnet: \"" + subnet +
                                "\" is not the base of an IPv4 /24 (a dotted quad ending in .0)");
  }
  return ntohl(address.s_addr);
}

std::string ipv4_text(std::uint32_t host_order) {
  in_addr address{};
  address.s_addr = htonl(host_order);
  char text[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &address, text, sizeof text);
  return text;
}

}  // namespace tessel::wan
