// The topology: devices (GPUs) and the latency/bandwidth between every pair of them.
// One C++ type, one YAML form (the format of examples/topologies/, see docs/placement.md),
// one parser that rejects bad input naming the field.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::placement {

// Raised for any malformed topology; what() names the source, the field and the reason,
// e.g. "topo.yaml: devices[3].site: unknown site 'Tokio'".
class TopologyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct GpuType {
  std::string name;
  double peak_tflops = 0;  // dense 16-bit tensor-core peak, TFLOP/s
  double peak_tflops_fp32 = 0;
  double memory_gib = 0;

  bool operator==(const GpuType&) const = default;
};

struct Site {
  std::string name;
  std::string kind;  // free text: aws_region, host, university...
  int gpus = 0;
  std::optional<double> latitude;  // degrees; present in generated topologies
  std::optional<double> longitude;

  bool operator==(const Site&) const = default;
};

struct Device {
  int id = 0;  // 0..N-1, equal to the index in Topology::devices
  std::string site;
  std::string gpu;         // key into Topology::gpu_types
  double peak_tflops = 0;  // this device's peak (may differ from its type's)
  double memory_gib = 0;   // from its GPU type unless given per device

  bool operator==(const Device&) const = default;
};

struct Link {
  double latency_ms = 0;
  double bandwidth_gbps = 0;  // Gbit/s

  bool operator==(const Link&) const = default;
};

struct SitePair {
  std::string a, b;
  Link link;

  bool operator==(const SitePair&) const = default;
};

// Measured link between two devices; overrides the site rules (what the prober reports).
struct DevicePair {
  int a = 0, b = 0;
  Link link;

  bool operator==(const DevicePair&) const = default;
};

// How TCP uses the links (issue 20; placement/tcp_link_rate.h): a link carries
// min(capacity, streams x window_bytes / RTT), RTT = 2 x its latency (latency is one way).
struct TcpWindow {
  // The usable window of one TCP stream: what the socket buffer limit allows (a buffer request
  // of net.core.wmem_max gives about that much), or the prober's per-stream throughput x RTT.
  double window_bytes = 0;
  // 0: each link gets the streams that fill it (up to 16), as the transport chooses them; N:
  // every link has N.
  int streams_per_link = 0;

  bool operator==(const TcpWindow&) const = default;
};

class Topology {
 public:
  std::string id;
  std::string name;
  std::vector<GpuType> gpu_types;
  std::vector<Site> sites;
  std::vector<Device> devices;
  Link intra_site;
  std::optional<Link> inter_site_default;
  std::vector<SitePair> site_pairs;
  std::vector<DevicePair> device_pairs;
  Link diagonal;                 // what a device has with itself; never read by the cost models
  std::optional<TcpWindow> tcp;  // absent: every link carries its capacity

  // Checks every cross reference and value, then builds the N x N matrices by the
  // expansion rule: device pair override, else same site -> intra_site, else the listed
  // site pair, else inter_site_default; with `tcp`, each bandwidth is then bound by its
  // streams' windows. Throws TopologyError naming the field at fault
  // (source is prefixed to every message). Must be called before the accessors below.
  void finalize(const std::string& source = "topology");

  int size() const { return static_cast<int>(devices.size()); }
  double latency_ms(int a, int b) const { return latency_ms_[index(a, b)]; }
  // The rate the cost models use: the link's capacity, bound by `tcp` when it is set.
  double bandwidth_gbps(int a, int b) const { return bandwidth_gbps_[index(a, b)]; }
  const GpuType* gpu_type(const std::string& name) const;
  int site_index(const std::string& name) const;  // -1 when unknown

  // Field by field, the expanded matrices included.
  bool operator==(const Topology&) const = default;

 private:
  size_t index(int a, int b) const { return static_cast<size_t>(a) * devices.size() + b; }
  std::vector<double> latency_ms_;
  std::vector<double> bandwidth_gbps_;
};

// Parses the YAML form. source names the file in error messages.
Topology parse_topology_yaml(const std::string& text, const std::string& source);
Topology load_topology_file(const std::string& path);
// Writes the YAML form (format_version 1); parse_topology_yaml(to_yaml(t)) == t.
std::string topology_to_yaml(const Topology& topology);

}  // namespace tessel::placement
