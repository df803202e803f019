// The YAML form of a topology (format_version 1, the format of examples/topologies/):
// a strict reader that names the field at fault, and a writer it reads back exactly.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <span>
#include <sstream>
#include <string_view>
#include <utility>

#include "placement/limits.h"
#include "placement/topology.h"

namespace tessel::placement {
namespace {

// Keys of the scenario files that document where the numbers come from; read by nobody.
constexpr std::string_view kInformationalTopLevelKeys[] = {
    "paper_case", "dtfm_config", "controlled_by_tc_in_paper_runs", "workload"};
constexpr std::string_view kInformationalNetworkKeys[] = {"paper_stated",
                                                          "dtfm_tc_emulation",
                                                          "discrepancy",
                                                          "note",
                                                          "measured_pairs_not_in_this_scenario",
                                                          "run_layout_note"};

constexpr std::pair<std::string_view, std::string_view> kUnits[] = {
    {"latency", "ms"}, {"bandwidth", "Gbit/s"}, {"compute", "TFLOP/s"}};

std::string child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string item(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

// Reads typed values out of YAML nodes; every failure names the source and the field path.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& reason) const {
    throw TopologyError(source_ + ": " + path + ": " + reason);
  }

  void expect_map(const YAML::Node& node, const std::string& path) const {
    if (!node.IsMap()) fail(path, "expected a map, got " + describe(node));
  }
  void expect_list(const YAML::Node& node, const std::string& path) const {
    if (!node.IsSequence()) fail(path, "expected a list, got " + describe(node));
  }

  // Rejects keys given twice and keys that are neither fields nor informational, so that a
  // misspelt field does not silently fall back to its default.
  void check_keys(const YAML::Node& map, const std::string& path,
                  std::initializer_list<std::string_view> fields,
                  std::span<const std::string_view> informational = {}) const {
    expect_map(map, path);
    std::set<std::string> seen;
    for (const auto& entry : map) {
      if (!entry.first.IsScalar()) fail(path, "keys must be names, got " + describe(entry.first));
      const std::string& key = entry.first.Scalar();
      if (!seen.insert(key).second) fail(child(path, key), "given twice");
      const auto is_key = [&](std::string_view k) { return k == key; };
      if (std::none_of(fields.begin(), fields.end(), is_key) &&
          std::none_of(informational.begin(), informational.end(), is_key)) {
        std::string expected;
        for (std::string_view field : fields) {
          expected += (expected.empty() ? "" : ", ") + std::string(field);
        }
        fail(child(path, key), "unknown key (expected one of: " + expected + ")");
      }
    }
  }

  YAML::Node required(const YAML::Node& map, std::string_view key, const std::string& path) const {
    YAML::Node value = map[std::string(key)];
    if (!value.IsDefined()) fail(child(path, key), "required field missing");
    return value;
  }

  std::string text(const YAML::Node& node, const std::string& path) const {
    if (!node.IsScalar()) fail(path, "expected a name, got " + describe(node));
    return node.Scalar();
  }
  double number(const YAML::Node& node, const std::string& path) const {
    return convert<double>(node, path, "a number");
  }
  int integer(const YAML::Node& node, const std::string& path) const {
    return convert<int>(node, path, "an integer");
  }
  bool boolean(const YAML::Node& node, const std::string& path) const {
    return convert<bool>(node, path, "true or false");
  }

 private:
  template <typename T>
  T convert(const YAML::Node& node, const std::string& path, const char* expected) const {
    T value{};
    if (!node.IsScalar() || !YAML::convert<T>::decode(node, value)) {
      fail(path, std::string("expected ") + expected + ", got " + describe(node));
    }
    return value;
  }

  std::string source_;
};

void read_units(const Reader& in, const YAML::Node& units) {
  in.check_keys(units, "units", {"latency", "bandwidth", "compute"});
  for (const auto& [key, unit] : kUnits) {
    const std::string path = child("units", key);
    const std::string given = in.text(in.required(units, key, "units"), path);
    if (given != unit) in.fail(path, "must be '" + std::string(unit) + "', got '" + given + "'");
  }
}

std::vector<GpuType> read_gpu_types(const Reader& in, const YAML::Node& types) {
  in.expect_map(types, "gpu_types");
  std::vector<GpuType> result;
  for (const auto& entry : types) {
    GpuType type;
    type.name = in.text(entry.first, "gpu_types");
    const std::string path = child("gpu_types", type.name);
    const YAML::Node& fields = entry.second;
    in.check_keys(fields, path, {"peak_tflops_fp16_tensor", "peak_tflops_fp32", "memory_gib"});
    type.peak_tflops = in.number(in.required(fields, "peak_tflops_fp16_tensor", path),
                                 child(path, "peak_tflops_fp16_tensor"));
    if (const YAML::Node fp32 = fields["peak_tflops_fp32"]) {
      type.peak_tflops_fp32 = in.number(fp32, child(path, "peak_tflops_fp32"));
    }
    type.memory_gib = in.number(in.required(fields, "memory_gib", path), child(path, "memory_gib"));
    result.push_back(std::move(type));
  }
  return result;
}

std::vector<Site> read_sites(const Reader& in, const YAML::Node& sites) {
  in.expect_list(sites, "sites");
  if (sites.size() > static_cast<size_t>(kMaxSites)) {
    in.fail("sites", "lists " + std::to_string(sites.size()) + " sites, more than the limit of " +
                         std::to_string(kMaxSites));
  }
  std::vector<Site> result;
  for (size_t i = 0; i < sites.size(); ++i) {
    const YAML::Node& fields = sites[i];
    const std::string path = item("sites", i);
    in.check_keys(fields, path, {"name", "kind", "gpus", "latitude", "longitude"});
    Site site;
    site.name = in.text(in.required(fields, "name", path), child(path, "name"));
    if (const YAML::Node kind = fields["kind"]) site.kind = in.text(kind, child(path, "kind"));
    if (const YAML::Node gpus = fields["gpus"]) site.gpus = in.integer(gpus, child(path, "gpus"));
    if (const YAML::Node lat = fields["latitude"]) {
      site.latitude = in.number(lat, child(path, "latitude"));
    }
    if (const YAML::Node lon = fields["longitude"]) {
      site.longitude = in.number(lon, child(path, "longitude"));
    }
    result.push_back(std::move(site));
  }
  return result;
}

std::vector<Device> read_devices(const Reader& in, const YAML::Node& devices) {
  in.expect_list(devices, "devices");
  if (devices.size() > static_cast<size_t>(kMaxDevices)) {
    in.fail("devices", "lists " + std::to_string(devices.size()) +
                           " devices, more than the limit of " + std::to_string(kMaxDevices));
  }
  std::vector<Device> result;
  result.reserve(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    const YAML::Node& fields = devices[i];
    const std::string path = item("devices", i);
    in.check_keys(fields, path, {"id", "site", "gpu", "peak_tflops", "memory_gib"});
    Device device;
    device.id = in.integer(in.required(fields, "id", path), child(path, "id"));
    device.site = in.text(in.required(fields, "site", path), child(path, "site"));
    device.gpu = in.text(in.required(fields, "gpu", path), child(path, "gpu"));
    if (const YAML::Node peak = fields["peak_tflops"]) {
      device.peak_tflops = in.number(peak, child(path, "peak_tflops"));
    }
    if (const YAML::Node memory = fields["memory_gib"]) {
      device.memory_gib = in.number(memory, child(path, "memory_gib"));
    }
    result.push_back(std::move(device));
  }
  return result;
}

// The two link fields of a map whose keys the caller has checked.
Link read_link_fields(const Reader& in, const YAML::Node& fields, const std::string& path) {
  return Link{
      .latency_ms = in.number(in.required(fields, "latency_ms", path), child(path, "latency_ms")),
      .bandwidth_gbps =
          in.number(in.required(fields, "bandwidth_gbps", path), child(path, "bandwidth_gbps"))};
}

Link read_link(const Reader& in, const YAML::Node& fields, const std::string& path) {
  in.check_keys(fields, path, {"latency_ms", "bandwidth_gbps"});
  return read_link_fields(in, fields, path);
}

// The two ends of a pair: "sites: [A, B]" or "devices: [a, b]".
YAML::Node read_ends(const Reader& in, const YAML::Node& fields, std::string_view key,
                     const std::string& path) {
  const std::string ends_path = child(path, key);
  const YAML::Node ends = in.required(fields, key, path);
  in.expect_list(ends, ends_path);
  if (ends.size() != 2) {
    in.fail(ends_path, "expected two entries, got " + std::to_string(ends.size()));
  }
  return ends;
}

std::vector<SitePair> read_site_pairs(const Reader& in, const YAML::Node& pairs) {
  const std::string list_path = "network.site_pairs";
  in.expect_list(pairs, list_path);
  std::vector<SitePair> result;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const std::string path = item(list_path, k);
    in.check_keys(pairs[k], path, {"sites", "latency_ms", "bandwidth_gbps"});
    const YAML::Node ends = read_ends(in, pairs[k], "sites", path);
    result.push_back(SitePair{.a = in.text(ends[0], item(path + ".sites", 0)),
                              .b = in.text(ends[1], item(path + ".sites", 1)),
                              .link = read_link_fields(in, pairs[k], path)});
  }
  return result;
}

std::vector<DevicePair> read_device_pairs(const Reader& in, const YAML::Node& pairs) {
  const std::string list_path = "network.device_pairs";
  in.expect_list(pairs, list_path);
  std::vector<DevicePair> result;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const std::string path = item(list_path, k);
    in.check_keys(pairs[k], path, {"devices", "latency_ms", "bandwidth_gbps"});
    const YAML::Node ends = read_ends(in, pairs[k], "devices", path);
    result.push_back(DevicePair{.a = in.integer(ends[0], item(path + ".devices", 0)),
                                .b = in.integer(ends[1], item(path + ".devices", 1)),
                                .link = read_link_fields(in, pairs[k], path)});
  }
  return result;
}

void read_network(const Reader& in, const YAML::Node& network, Topology& topology) {
  const std::string path = "network";
  in.check_keys(network, path,
                {"symmetric", "intra_site", "inter_site_default", "site_pairs", "device_pairs",
                 "diagonal", "tcp"},
                kInformationalNetworkKeys);
  if (const YAML::Node symmetric = network["symmetric"]) {
    if (!in.boolean(symmetric, "network.symmetric")) {
      in.fail("network.symmetric", "must be true (asymmetric links are not supported)");
    }
  }
  topology.intra_site =
      read_link(in, in.required(network, "intra_site", path), "network.intra_site");
  if (const YAML::Node fallback = network["inter_site_default"]; fallback && !fallback.IsNull()) {
    topology.inter_site_default = read_link(in, fallback, "network.inter_site_default");
  }
  if (const YAML::Node pairs = network["site_pairs"]) {
    topology.site_pairs = read_site_pairs(in, pairs);
  }
  if (const YAML::Node pairs = network["device_pairs"]) {
    topology.device_pairs = read_device_pairs(in, pairs);
  }
  if (const YAML::Node tcp = network["tcp"]; tcp && !tcp.IsNull()) {
    in.check_keys(tcp, "network.tcp", {"window_bytes", "streams_per_link"});
    TcpWindow window;
    window.window_bytes =
        in.number(in.required(tcp, "window_bytes", "network.tcp"), "network.tcp.window_bytes");
    if (const YAML::Node streams = tcp["streams_per_link"]) {
      window.streams_per_link = in.integer(streams, "network.tcp.streams_per_link");
    }
    topology.tcp = window;
  }
  // DT-FM stores the intra-site value on the diagonal; it is never read.
  const YAML::Node diagonal = network["diagonal"];
  topology.diagonal = diagonal ? read_link(in, diagonal, "network.diagonal") : topology.intra_site;
}

YAML::Node load_document(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    std::string where = "document";
    if (!e.mark.is_null()) {
      where = "line " + std::to_string(e.mark.line + 1) + ", column " +
              std::to_string(e.mark.column + 1);
    }
    throw TopologyError(source + ": " + where + ": YAML syntax error: " + e.msg);
  }
}

// --- writing ---

std::string format_number(double value) {
  char buffer[32];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, value).ptr;
  std::string text(buffer, end);
  // Shortest round-trip form; "125" gets a ".0" so the file reads like the scenario files.
  if (text.find_first_not_of("-0123456789") == std::string::npos) text += ".0";
  return text;
}

bool is_plain_scalar(const std::string& s) {
  if (s.empty() || !(std::isalnum(static_cast<unsigned char>(s.front())) || s.front() == '_')) {
    return false;
  }
  if (s.back() == ' ' || s == "null" || s == "Null" || s == "NULL") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-./+() ", c) != nullptr;
  });
}

std::string format_text(const std::string& s) {
  if (is_plain_scalar(s)) return s;
  std::string quoted = "\"";
  for (const char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      constexpr char kHex[] = "0123456789abcdef";
      quoted += "\\x";
      quoted += kHex[byte >> 4];
      quoted += kHex[byte & 0xf];
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

std::string format_link(const Link& link) {
  return "latency_ms: " + format_number(link.latency_ms) +
         ", bandwidth_gbps: " + format_number(link.bandwidth_gbps);
}

void write_sites(std::ostream& out, const std::vector<Site>& sites) {
  out << "sites:" << (sites.empty() ? " []\n" : "\n");
  for (const Site& site : sites) {
    out << "  - {name: " << format_text(site.name) << ", kind: " << format_text(site.kind);
    if (site.gpus > 0) out << ", gpus: " << site.gpus;
    if (site.latitude) out << ", latitude: " << format_number(*site.latitude);
    if (site.longitude) out << ", longitude: " << format_number(*site.longitude);
    out << "}\n";
  }
}

void write_devices(std::ostream& out, const Topology& topology) {
  out << "devices:" << (topology.devices.empty() ? " []\n" : "\n");
  for (const Device& device : topology.devices) {
    out << "  - {id: " << device.id << ", site: " << format_text(device.site)
        << ", gpu: " << format_text(device.gpu)
        << ", peak_tflops: " << format_number(device.peak_tflops);
    const GpuType* type = topology.gpu_type(device.gpu);
    if (type == nullptr || device.memory_gib != type->memory_gib) {
      out << ", memory_gib: " << format_number(device.memory_gib);
    }
    out << "}\n";
  }
}

void write_network(std::ostream& out, const Topology& topology) {
  out << "network:\n"
      << "  symmetric: true\n"
      << "  intra_site: {" << format_link(topology.intra_site) << "}\n"
      << "  inter_site_default: "
      << (topology.inter_site_default ? "{" + format_link(*topology.inter_site_default) + "}"
                                      : std::string("null"))
      << "\n";
  out << "  site_pairs:" << (topology.site_pairs.empty() ? " []\n" : "\n");
  for (const SitePair& pair : topology.site_pairs) {
    out << "    - {sites: [" << format_text(pair.a) << ", " << format_text(pair.b) << "], "
        << format_link(pair.link) << "}\n";
  }
  if (!topology.device_pairs.empty()) out << "  device_pairs:\n";
  for (const DevicePair& pair : topology.device_pairs) {
    out << "    - {devices: [" << pair.a << ", " << pair.b << "], " << format_link(pair.link)
        << "}\n";
  }
  out << "  diagonal: {" << format_link(topology.diagonal) << "}\n";
  if (topology.tcp) {
    out << "  tcp: {window_bytes: " << format_number(topology.tcp->window_bytes)
        << ", streams_per_link: " << topology.tcp->streams_per_link << "}\n";
  }
}

}  // namespace

Topology parse_topology_yaml(const std::string& text, const std::string& source) {
  const Reader in(source);
  const YAML::Node root = load_document(text, source);
  if (!root.IsMap()) {
    in.fail("document", "expected a map of topology fields, got " + describe(root));
  }
  in.check_keys(
      root, "",
      {"format_version", "id", "name", "units", "gpu_types", "sites", "devices", "network"},
      kInformationalTopLevelKeys);
  if (const YAML::Node version = root["format_version"]) {
    const int number = in.integer(version, "format_version");
    if (number != 1) {
      in.fail("format_version",
              "unsupported version " + std::to_string(number) + " (this reader knows 1)");
    }
  }
  Topology topology;
  topology.id = in.text(in.required(root, "id", ""), "id");
  if (const YAML::Node name = root["name"]) topology.name = in.text(name, "name");
  if (const YAML::Node units = root["units"]) read_units(in, units);
  topology.gpu_types = read_gpu_types(in, in.required(root, "gpu_types", ""));
  topology.sites = read_sites(in, in.required(root, "sites", ""));
  topology.devices = read_devices(in, in.required(root, "devices", ""));
  read_network(in, in.required(root, "network", ""), topology);
  topology.finalize(source);
  return topology;
}

Topology load_topology_file(const std::string& path) {
  std::string error;
  const std::optional<std::string> text = read_file_bounded(path, kMaxTopologyFileBytes, &error);
  if (!text) throw TopologyError(path + ": " + error);
  return parse_topology_yaml(*text, path);
}

std::string topology_to_yaml(const Topology& topology) {
  std::ostringstream out;
  out << "# tessel topology (format_version 1): GPUs, their sites and the links between them.\n"
      << "format_version: 1\n"
      << "id: " << format_text(topology.id) << "\n"
      << "name: " << format_text(topology.name) << "\n"
      << "units: {latency: ms, bandwidth: Gbit/s, compute: TFLOP/s}\n";
  out << "gpu_types:" << (topology.gpu_types.empty() ? " {}\n" : "\n");
  for (const GpuType& type : topology.gpu_types) {
    out << "  " << format_text(type.name)
        << ": {peak_tflops_fp16_tensor: " << format_number(type.peak_tflops)
        << ", peak_tflops_fp32: " << format_number(type.peak_tflops_fp32)
        << ", memory_gib: " << format_number(type.memory_gib) << "}\n";
  }
  write_sites(out, topology.sites);
  write_devices(out, topology);
  write_network(out, topology);
  return out.str();
}

}  // namespace tessel::placement
