// Topology::finalize: validation of every value and cross reference, then the expansion of
// the site rules into the N x N latency and bandwidth matrices.
#include "placement/topology.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "placement/limits.h"
#include "placement/tcp_link_rate.h"

namespace tessel::placement {
namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string number(double value) { return number_text(value); }

std::string indexed(const std::string& list, size_t i) {
  return list + "[" + std::to_string(i) + "]";
}

// Names the source in every message: "<source>: <field path>: <reason>".
class Checker {
 public:
  explicit Checker(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& reason) const {
    throw TopologyError(source_ + ": " + path + ": " + reason);
  }

  void positive(double value, const std::string& path) const {
    if (!std::isfinite(value) || value <= 0) fail(path, "must be > 0, got " + number(value));
  }
  void non_negative(double value, const std::string& path) const {
    if (!std::isfinite(value) || value < 0) fail(path, "must be >= 0, got " + number(value));
  }
  void in_range(double value, double bound, const std::string& path) const {
    if (!std::isfinite(value) || std::abs(value) > bound) {
      fail(path,
           "must be within [-" + number(bound) + ", " + number(bound) + "], got " + number(value));
    }
  }
  // A finite value in [min, max], the unit and what the bounds mean named.
  void within(double value, double min, double max, const std::string& path,
              const std::string& unit) const {
    if (!std::isfinite(value) || value < min || value > max) {
      fail(path, "must be in [" + number(min) + ", " + number(max) + "] " + unit + ", got " +
                     number(value));
    }
  }
  // A link the cost models read: latency in [0, 1 min], bandwidth in [1 kbit/s, 100 Tbit/s].
  void link(const Link& l, const std::string& path) const {
    non_negative(l.latency_ms, path + ".latency_ms");
    positive(l.bandwidth_gbps, path + ".bandwidth_gbps");
    within(l.latency_ms, 0, kMaxLatencyMs, path + ".latency_ms", "ms (0 to one minute)");
    within(l.bandwidth_gbps, kMinBandwidthGbps, kMaxBandwidthGbps, path + ".bandwidth_gbps",
           "Gbit/s (1 kbit/s to 100 Tbit/s)");
  }

 private:
  std::string source_;
};

void check_gpu_types(const std::vector<GpuType>& types, const Checker& check) {
  std::unordered_set<std::string> seen;
  for (size_t i = 0; i < types.size(); ++i) {
    const GpuType& type = types[i];
    if (type.name.empty()) check.fail(indexed("gpu_types", i), "name must not be empty");
    const std::string path = "gpu_types." + type.name;
    if (!seen.insert(type.name).second) check.fail(path, "defined twice");
    check.positive(type.peak_tflops, path + ".peak_tflops_fp16_tensor");
    check.within(type.peak_tflops, 0, kMaxPeakTflops, path + ".peak_tflops_fp16_tensor", "TFLOP/s");
    check.within(type.peak_tflops_fp32, 0, kMaxPeakTflops, path + ".peak_tflops_fp32", "TFLOP/s");
    check.positive(type.memory_gib, path + ".memory_gib");
    check.within(type.memory_gib, 0, kMaxDeviceMemoryGib, path + ".memory_gib", "GiB");
  }
}

// Returns the index of each site by name.
std::unordered_map<std::string, int> check_sites(const std::vector<Site>& sites,
                                                 const Checker& check) {
  std::unordered_map<std::string, int> index;
  for (size_t i = 0; i < sites.size(); ++i) {
    const Site& site = sites[i];
    const std::string path = indexed("sites", i);
    if (site.name.empty()) check.fail(path + ".name", "must not be empty");
    if (!index.emplace(site.name, static_cast<int>(i)).second) {
      check.fail(path + ".name", "duplicate site " + quoted(site.name));
    }
    if (site.gpus < 0 || site.gpus > kMaxDevices) {
      check.fail(path + ".gpus", "must be in [0, " + std::to_string(kMaxDevices) + "], got " +
                                     std::to_string(site.gpus));
    }
    if (site.latitude) check.in_range(*site.latitude, 90, path + ".latitude");
    if (site.longitude) check.in_range(*site.longitude, 180, path + ".longitude");
  }
  return index;
}

// Checks ids and references, fills peak and memory from the GPU type where not given, and
// returns each device's site index.
std::vector<int> check_devices(std::vector<Device>& devices, const Topology& topology,
                               const std::unordered_map<std::string, int>& site_of_name,
                               const Checker& check) {
  if (devices.empty()) check.fail("devices", "must list at least one device");
  std::unordered_map<int, size_t> first_with_id;
  std::vector<int> site_of_device;
  site_of_device.reserve(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    Device& device = devices[i];
    const std::string path = indexed("devices", i);
    const auto [previous, is_new] = first_with_id.emplace(device.id, i);
    if (!is_new) {
      check.fail(path + ".id", "duplicate id " + std::to_string(device.id) + " (also " +
                                   indexed("devices", previous->second) + ")");
    }
    if (device.id != static_cast<int>(i)) {
      check.fail(path + ".id", "must equal its index " + std::to_string(i) +
                                   " (ids are 0..N-1 in order), got " + std::to_string(device.id));
    }
    const auto site = site_of_name.find(device.site);
    if (site == site_of_name.end()) {
      check.fail(path + ".site", "unknown site " + quoted(device.site));
    }
    site_of_device.push_back(site->second);

    const GpuType* type = topology.gpu_type(device.gpu);
    if (type == nullptr) check.fail(path + ".gpu", "unknown gpu type " + quoted(device.gpu));
    // 0 means "not given": the device has its type's values.
    check.within(device.peak_tflops, 0, kMaxPeakTflops, path + ".peak_tflops", "TFLOP/s");
    if (device.peak_tflops == 0) device.peak_tflops = type->peak_tflops;
    check.within(device.memory_gib, 0, kMaxDeviceMemoryGib, path + ".memory_gib", "GiB");
    if (device.memory_gib == 0) device.memory_gib = type->memory_gib;
  }
  return site_of_device;
}

void check_site_gpu_counts(const std::vector<Site>& sites, const std::vector<int>& site_of_device,
                           const Checker& check) {
  std::vector<int> count(sites.size(), 0);
  for (int site : site_of_device) ++count[site];
  for (size_t i = 0; i < sites.size(); ++i) {
    if (sites[i].gpus > 0 && sites[i].gpus != count[i]) {
      check.fail(indexed("sites", i) + ".gpus",
                 "says " + std::to_string(sites[i].gpus) + " but " + std::to_string(count[i]) +
                     " devices are on site " + quoted(sites[i].name));
    }
  }
}

// Returns the listed link of every ordered site pair (row-major, sites x sites).
std::vector<std::optional<Link>> check_site_pairs(
    const std::vector<SitePair>& pairs, size_t site_count,
    const std::unordered_map<std::string, int>& site_of_name, const Checker& check) {
  std::vector<std::optional<Link>> link_of(site_count * site_count);
  std::map<std::pair<int, int>, size_t> first_listing;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const SitePair& pair = pairs[k];
    const std::string path = indexed("network.site_pairs", k);
    int ends[2];
    const std::string* names[2] = {&pair.a, &pair.b};
    for (int e = 0; e < 2; ++e) {
      const auto site = site_of_name.find(*names[e]);
      if (site == site_of_name.end()) {
        check.fail(indexed(path + ".sites", e), "unknown site " + quoted(*names[e]));
      }
      ends[e] = site->second;
    }
    if (ends[0] == ends[1]) {
      check.fail(path + ".sites", "a site cannot pair with itself (" + quoted(pair.a) + ")");
    }
    const std::pair<int, int> key = std::minmax(ends[0], ends[1]);
    const auto [previous, is_new] = first_listing.emplace(key, k);
    if (!is_new) {
      check.fail(path + ".sites", "pair " + quoted(pair.a) + "-" + quoted(pair.b) +
                                      " already given at " +
                                      indexed("network.site_pairs", previous->second));
    }
    check.link(pair.link, path);
    link_of[ends[0] * site_count + ends[1]] = pair.link;
    link_of[ends[1] * site_count + ends[0]] = pair.link;
  }
  return link_of;
}

void check_device_pairs(const std::vector<DevicePair>& pairs, int device_count,
                        const Checker& check) {
  std::map<std::pair<int, int>, size_t> first_listing;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const DevicePair& pair = pairs[k];
    const std::string path = indexed("network.device_pairs", k);
    const int ends[2] = {pair.a, pair.b};
    for (int e = 0; e < 2; ++e) {
      if (ends[e] < 0 || ends[e] >= device_count) {
        check.fail(indexed(path + ".devices", e), "device " + std::to_string(ends[e]) +
                                                      " out of range 0.." +
                                                      std::to_string(device_count - 1));
      }
    }
    if (pair.a == pair.b) {
      check.fail(path + ".devices",
                 "a device cannot pair with itself (" + std::to_string(pair.a) + ")");
    }
    const std::pair<int, int> key = std::minmax(pair.a, pair.b);
    const auto [previous, is_new] = first_listing.emplace(key, k);
    if (!is_new) {
      check.fail(path + ".devices", "pair " + std::to_string(pair.a) + "-" +
                                        std::to_string(pair.b) + " already given at " +
                                        indexed("network.device_pairs", previous->second));
    }
    check.link(pair.link, path);
  }
}

}  // namespace

void Topology::finalize(const std::string& source) {
  const Checker check(source);
  // Counts first: everything below is sized by them.
  if (devices.size() > static_cast<size_t>(kMaxDevices)) {
    check.fail("devices", "lists " + std::to_string(devices.size()) + " devices, more than the " +
                              "limit of " + std::to_string(kMaxDevices));
  }
  if (sites.size() > static_cast<size_t>(kMaxSites)) {
    check.fail("sites", "lists " + std::to_string(sites.size()) +
                            " sites, more than the limit of " + std::to_string(kMaxSites));
  }
  if (device_pairs.size() > static_cast<size_t>(kMaxDevicePairs)) {
    check.fail("network.device_pairs", "lists " + std::to_string(device_pairs.size()) +
                                           " pairs, more than the limit of " +
                                           std::to_string(kMaxDevicePairs));
  }
  // The two N x N matrices of doubles, and the sites x sites table of links.
  const double matrix_bytes =
      2.0 * sizeof(double) * double(devices.size()) * double(devices.size()) +
      sizeof(std::optional<Link>) * double(sites.size()) * double(sites.size());
  if (const std::string shortfall = memory_shortfall(matrix_bytes); !shortfall.empty()) {
    check.fail("devices", std::to_string(devices.size()) + " devices: the latency and bandwidth " +
                              "matrices " + shortfall);
  }
  check_gpu_types(gpu_types, check);
  const auto site_of_name = check_sites(sites, check);
  const std::vector<int> site_of_device = check_devices(devices, *this, site_of_name, check);
  check_site_gpu_counts(sites, site_of_device, check);

  check.link(intra_site, "network.intra_site");
  if (inter_site_default) check.link(*inter_site_default, "network.inter_site_default");
  // The diagonal is never read, so any finite non-negative value is accepted.
  check.non_negative(diagonal.latency_ms, "network.diagonal.latency_ms");
  check.non_negative(diagonal.bandwidth_gbps, "network.diagonal.bandwidth_gbps");
  const size_t site_count = sites.size();
  const auto site_link = check_site_pairs(site_pairs, site_count, site_of_name, check);
  check_device_pairs(device_pairs, size(), check);
  if (tcp) {
    check.positive(tcp->window_bytes, "network.tcp.window_bytes");
    check.within(tcp->streams_per_link, 0, kMaxTcpStreamsPerLink, "network.tcp.streams_per_link",
                 "streams (0: as many as fill each link)");
  }

  // Expansion; NaN marks a pair of devices no rule covers yet.
  const size_t n = devices.size();
  constexpr double kUnresolved = std::numeric_limits<double>::quiet_NaN();
  latency_ms_.assign(n * n, kUnresolved);
  bandwidth_gbps_.assign(n * n, kUnresolved);
  const auto rule_for = [&](size_t i, size_t j) -> const Link* {
    if (i == j) return &diagonal;
    const int si = site_of_device[i], sj = site_of_device[j];
    if (si == sj) return &intra_site;
    if (const auto& listed = site_link[si * site_count + sj]) return &*listed;
    return inter_site_default ? &*inter_site_default : nullptr;
  };
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (const Link* link = rule_for(i, j)) {
        latency_ms_[i * n + j] = link->latency_ms;
        bandwidth_gbps_[i * n + j] = link->bandwidth_gbps;
      }
    }
  }
  for (const DevicePair& pair : device_pairs) {
    for (const size_t k : {index(pair.a, pair.b), index(pair.b, pair.a)}) {
      latency_ms_[k] = pair.link.latency_ms;
      bandwidth_gbps_[k] = pair.link.bandwidth_gbps;
    }
  }
  for (size_t k = 0; k < n * n; ++k) {
    if (std::isnan(latency_ms_[k])) {
      const std::string& a = devices[k / n].site;
      const std::string& b = devices[k % n].site;
      check.fail("network.site_pairs", "no link between sites " + quoted(a) + " and " + quoted(b) +
                                           ": list the pair or set " +
                                           "network.inter_site_default");
    }
  }
  if (tcp) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        if (i == j) continue;
        const size_t k = i * n + j;
        const double capacity = bandwidth_gbps_[k] * 1e9 / 8;
        const double rtt_s = 2 * latency_ms_[k] / 1000;
        const int streams = tcp->streams_per_link > 0
                                ? tcp->streams_per_link
                                : streams_to_fill(capacity * rtt_s, tcp->window_bytes);
        bandwidth_gbps_[k] =
            usable_rate_bytes_per_s(capacity, rtt_s, streams, tcp->window_bytes) * 8 / 1e9;
      }
    }
  }
}

const GpuType* Topology::gpu_type(const std::string& name) const {
  for (const GpuType& type : gpu_types) {
    if (type.name == name) return &type;
  }
  return nullptr;
}

int Topology::site_index(const std::string& name) const {
  for (size_t i = 0; i < sites.size(); ++i) {
    if (sites[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace tessel::placement
