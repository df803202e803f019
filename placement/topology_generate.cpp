// Seeded synthetic geo-distributed topologies. Only std::mt19937_64 (whose output the standard
// fixes) is used for randomness, with our own distributions, so that a seed gives the same
// topology with every standard library.
#include "placement/topology_generate.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "placement/gpu_models.h"
#include "placement/limits.h"

namespace tessel::placement {
namespace {

// Cloud-region-like places with their real coordinates (degrees).
struct Place {
  const char* name;
  double latitude, longitude;
};
constexpr Place kRegions[] = {
    {"Virginia", 38.9, -77.4},    {"Ohio", 40.0, -83.0},         {"Oregon", 45.6, -121.2},
    {"California", 37.4, -122.0}, {"Texas", 32.8, -96.8},        {"Iowa", 41.3, -95.9},
    {"Montreal", 45.5, -73.6},    {"Toronto", 43.7, -79.4},      {"Queretaro", 20.6, -100.4},
    {"Sao-Paulo", -23.5, -46.6},  {"Santiago", -33.4, -70.6},    {"Ireland", 53.3, -6.3},
    {"London", 51.5, -0.1},       {"Paris", 48.9, 2.4},          {"Frankfurt", 50.1, 8.7},
    {"Amsterdam", 52.4, 4.9},     {"Stockholm", 59.3, 18.1},     {"Milan", 45.5, 9.2},
    {"Madrid", 40.4, -3.7},       {"Warsaw", 52.2, 21.0},        {"Zurich", 47.4, 8.5},
    {"Tel-Aviv", 32.1, 34.8},     {"Bahrain", 26.1, 50.6},       {"Dubai", 25.2, 55.3},
    {"Cape-Town", -33.9, 18.4},   {"Johannesburg", -26.2, 28.0}, {"Mumbai", 19.1, 72.9},
    {"Hyderabad", 17.4, 78.5},    {"Singapore", 1.35, 103.8},    {"Jakarta", -6.2, 106.8},
    {"Hong-Kong", 22.3, 114.2},   {"Taiwan", 24.1, 120.5},       {"Tokyo", 35.7, 139.7},
    {"Osaka", 34.7, 135.5},       {"Seoul", 37.6, 127.0},        {"Sydney", -33.9, 151.2},
    {"Melbourne", -37.8, 145.0},  {"Auckland", -36.8, 174.8},
};

// Boxes (latitude and longitude ranges) over populated land, where sites beyond the named
// regions are drawn.
struct LandBox {
  double lat_min, lat_max, lon_min, lon_max;
};
constexpr LandBox kLand[] = {
    {28, 50, -123, -72},   // North America
    {-34, -5, -70, -38},   // South America
    {37, 60, -8, 30},      // Europe
    {-30, 12, 8, 38},      // Africa
    {10, 30, 70, 88},      // India
    {22, 45, 100, 140},    // East Asia
    {-38, -20, 115, 153},  // Australia
};

constexpr double kEarthRadiusKm = 6371.0;
constexpr double kFiberKmPerMs = 200.0;  // light in fiber, about 2/3 c
constexpr double kRouteInflation = 1.5;  // real routes are longer than the great circle
constexpr double kLatencyOverheadMs = 2.0;
constexpr double kBandwidthHalfDistanceKm = 2500.0;  // distance where the fraction is 1/2
constexpr double kBandwidthNoise = 0.15;             // +-15% on the fraction

class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  size_t below(size_t n) { return std::min(n - 1, static_cast<size_t>(uniform() * n)); }
  // Fisher-Yates; std::shuffle's order is implementation-defined.
  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

// Rounds to a number of decimals; dividing by the power of ten gives the double nearest the
// decimal value, so the file shows "59.12" and not "59.120000000000005".
double round_to(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

double great_circle_km(const Site& a, const Site& b) {
  constexpr double kRadians = std::numbers::pi / 180.0;
  const double lat1 = *a.latitude * kRadians, lat2 = *b.latitude * kRadians;
  const double dlat = lat2 - lat1, dlon = (*b.longitude - *a.longitude) * kRadians;
  const double h = std::pow(std::sin(dlat / 2), 2) +
                   std::cos(lat1) * std::cos(lat2) * std::pow(std::sin(dlon / 2), 2);
  return 2 * kEarthRadiusKm * std::asin(std::min(1.0, std::sqrt(h)));
}

void require(bool ok, const char* field, const std::string& reason) {
  if (!ok) throw std::invalid_argument(std::string("GeoTopologySpec.") + field + ": " + reason);
}

void validate(const GeoTopologySpec& spec) {
  require(
      spec.devices >= 1 && spec.devices <= kMaxDevices, "devices",
      "must be in [1, " + std::to_string(kMaxDevices) + "], got " + std::to_string(spec.devices));
  require(spec.sites >= 1 && spec.sites <= std::min(spec.devices, kMaxSites), "sites",
          "must be in [1, " + std::to_string(std::min(spec.devices, kMaxSites)) + "] (at most " +
              "devices and at most " + std::to_string(kMaxSites) + "), got " +
              std::to_string(spec.sites));
  const auto within = [](double value, double min, double max, const char* field,
                         const char* unit) {
    require(std::isfinite(value) && value >= min && value <= max, field,
            "must be in [" + number_text(min) + ", " + number_text(max) + "] " + unit + ", got " +
                number_text(value));
  };
  within(spec.intra_site_latency_ms, 0, kMaxLatencyMs, "intra_site_latency_ms",
         "ms (0 to one minute)");
  constexpr const char* kBandwidthUnit = "Gbit/s (1 kbit/s to 100 Tbit/s)";
  within(spec.intra_site_bandwidth_gbps, kMinBandwidthGbps, kMaxBandwidthGbps,
         "intra_site_bandwidth_gbps", kBandwidthUnit);
  within(spec.min_bandwidth_gbps, kMinBandwidthGbps, kMaxBandwidthGbps, "min_bandwidth_gbps",
         kBandwidthUnit);
  within(spec.max_bandwidth_gbps, kMinBandwidthGbps, kMaxBandwidthGbps, "max_bandwidth_gbps",
         kBandwidthUnit);
  require(spec.min_bandwidth_gbps <= spec.max_bandwidth_gbps, "min_bandwidth_gbps",
          "must be <= max_bandwidth_gbps (" + number_text(spec.max_bandwidth_gbps) + "), got " +
              number_text(spec.min_bandwidth_gbps));
}

// A seeded choice of the named regions first, then "site-NNN" drawn on land.
std::vector<Site> place_sites(int count, Random& random) {
  std::vector<const Place*> regions;
  for (const Place& place : kRegions) regions.push_back(&place);
  random.shuffle(regions);

  std::vector<Site> sites;
  for (int i = 0; i < count; ++i) {
    Site site;
    if (static_cast<size_t>(i) < regions.size()) {
      site = {.name = regions[i]->name,
              .kind = "cloud_region",
              .latitude = regions[i]->latitude,
              .longitude = regions[i]->longitude};
    } else {
      std::string number = std::to_string(i);
      number.insert(0, number.size() < 3 ? 3 - number.size() : 0, '0');
      const LandBox& box = kLand[random.below(std::size(kLand))];
      site = {.name = "site-" + number,
              .kind = "synthetic_region",
              .latitude = round_to(random.uniform(box.lat_min, box.lat_max), 2),
              .longitude = round_to(random.uniform(box.lon_min, box.lon_max), 2)};
    }
    sites.push_back(std::move(site));
  }
  return sites;
}

// One GPU model per site; the topology lists only the models in use.
void equip_sites(Topology& topology, int devices, bool mixed, Random& random) {
  const int site_count = static_cast<int>(topology.sites.size());
  const std::vector<GpuType>& models = known_gpu_types();
  std::vector<size_t> used;
  for (int s = 0; s < site_count; ++s) {
    Site& site = topology.sites[s];
    const size_t model = mixed ? random.below(kGeneratedGpuModels) : 0;
    if (std::find(used.begin(), used.end(), model) == used.end()) used.push_back(model);
    // As even as possible: the first devices % sites sites get one more.
    site.gpus = devices / site_count + (s < devices % site_count ? 1 : 0);
    for (int g = 0; g < site.gpus; ++g) {
      topology.devices.push_back({.id = topology.size(),
                                  .site = site.name,
                                  .gpu = models[model].name,
                                  .peak_tflops = models[model].peak_tflops,
                                  .memory_gib = models[model].memory_gib});
    }
  }
  std::sort(used.begin(), used.end());  // catalogue order
  for (const size_t model : used) topology.gpu_types.push_back(models[model]);
}

Link inter_site_link(const Site& a, const Site& b, const GeoTopologySpec& spec, Random& random) {
  const double km = great_circle_km(a, b);
  const double latency = km / kFiberKmPerMs * kRouteInflation + kLatencyOverheadMs;
  const double fraction = 1.0 / (1.0 + km / kBandwidthHalfDistanceKm) *
                          random.uniform(1 - kBandwidthNoise, 1 + kBandwidthNoise);
  const double span = spec.max_bandwidth_gbps - spec.min_bandwidth_gbps;
  const double bandwidth = spec.min_bandwidth_gbps + span * std::clamp(fraction, 0.0, 1.0);
  // Rounded for a readable file; the clamp keeps rounding inside [min, max].
  return {.latency_ms = round_to(latency, 2),
          .bandwidth_gbps =
              std::clamp(round_to(bandwidth, 3), spec.min_bandwidth_gbps, spec.max_bandwidth_gbps)};
}

}  // namespace

Topology generate_geo_topology(const GeoTopologySpec& spec) {
  validate(spec);
  Random random(spec.seed);
  Topology topology;
  const std::string shape = std::to_string(spec.devices) + "x" + std::to_string(spec.sites);
  topology.id = "geo-" + shape + "-seed" + std::to_string(spec.seed);
  topology.name = "Synthetic geo-distributed topology: " + std::to_string(spec.devices) +
                  " GPUs over " + std::to_string(spec.sites) + " sites (seed " +
                  std::to_string(spec.seed) + ")";
  topology.sites = place_sites(spec.sites, random);
  equip_sites(topology, spec.devices, spec.mixed_gpus, random);

  topology.intra_site = {.latency_ms = spec.intra_site_latency_ms,
                         .bandwidth_gbps = spec.intra_site_bandwidth_gbps};
  topology.diagonal = topology.intra_site;
  const std::vector<Site>& sites = topology.sites;
  for (size_t a = 0; a < sites.size(); ++a) {
    for (size_t b = a + 1; b < sites.size(); ++b) {
      topology.site_pairs.push_back({.a = sites[a].name,
                                     .b = sites[b].name,
                                     .link = inter_site_link(sites[a], sites[b], spec, random)});
    }
  }
  topology.finalize("generated topology " + topology.id);
  return topology;
}

}  // namespace tessel::placement
