// The topology model: the five paper scenarios, the expansion rule, the YAML round trip, one
// test per class of bad input, and the synthetic geo generator.
#include "placement/topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "placement/topology_generate.h"

namespace tessel::placement {
namespace {

Topology load_example(const std::string& file) {
  return load_topology_file(std::string(TESSEL_SOURCE_DIR) + "/examples/topologies/" + file);
}

const std::vector<std::string> kExamples = {"1-datacenter-on-demand.yaml", "2-datacenter-spot.yaml",
                                            "3-multi-datacenter.yaml", "4-regional-geo.yaml",
                                            "5-worldwide-geo.yaml"};

testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

void expect_symmetric(const Topology& t) {
  for (int i = 0; i < t.size(); ++i) {
    for (int j = 0; j < t.size(); ++j) {
      ASSERT_EQ(t.latency_ms(i, j), t.latency_ms(j, i)) << i << "," << j;
      ASSERT_EQ(t.bandwidth_gbps(i, j), t.bandwidth_gbps(j, i)) << i << "," << j;
    }
  }
}

void expect_same_topology(const Topology& a, const Topology& b) {
  ASSERT_EQ(a.size(), b.size());
  for (int i = 0; i < a.size(); ++i) {
    for (int j = 0; j < a.size(); ++j) {
      ASSERT_EQ(a.latency_ms(i, j), b.latency_ms(i, j)) << i << "," << j;
      ASSERT_EQ(a.bandwidth_gbps(i, j), b.bandwidth_gbps(i, j)) << i << "," << j;
    }
  }
  EXPECT_TRUE(a.devices == b.devices);
  EXPECT_TRUE(a == b);
}

Topology round_trip(const Topology& t) { return parse_topology_yaml(topology_to_yaml(t), "rt"); }

// ---------------------------------------------------------------- the five scenarios

TEST(TopologyExamples, AllFiveLoadWith64DevicesAndSymmetricMatrices) {
  for (const std::string& file : kExamples) {
    SCOPED_TRACE(file);
    const Topology t = load_example(file);
    EXPECT_EQ(t.size(), 64);
    for (int i = 0; i < t.size(); ++i) {
      EXPECT_EQ(t.devices[i].id, i);
      EXPECT_GE(t.site_index(t.devices[i].site), 0);
      EXPECT_EQ(t.devices[i].memory_gib, 16);  // from the V100 type
    }
    expect_symmetric(t);
  }
}

TEST(TopologyExamples, WorldwideExpandsSitePairsAndIntraSite) {
  const Topology t = load_example("5-worldwide-geo.yaml");
  EXPECT_EQ(t.latency_ms(0, 8), 67.0);  // Oregon - Virginia
  EXPECT_EQ(t.bandwidth_gbps(0, 8), 0.79);
  EXPECT_EQ(t.latency_ms(8, 0), 67.0);
  EXPECT_EQ(t.latency_ms(32, 40), 238.0);  // Seoul - London
  EXPECT_EQ(t.bandwidth_gbps(32, 40), 0.342);
  EXPECT_EQ(t.latency_ms(0, 1), 5.0);  // inside Oregon
  EXPECT_EQ(t.bandwidth_gbps(0, 1), 2.0);
  EXPECT_EQ(t.site_index("Tokyo"), 3);
  EXPECT_EQ(t.site_index("Tokio"), -1);
  ASSERT_NE(t.gpu_type("V100-SXM2-16GB"), nullptr);
  EXPECT_EQ(t.gpu_type("V100-SXM2-16GB")->peak_tflops, 125.0);
  EXPECT_EQ(t.gpu_type("H100"), nullptr);
}

TEST(TopologyExamples, DatacenterCasesUseTheInterSiteDefault) {
  const Topology on_demand = load_example("1-datacenter-on-demand.yaml");
  EXPECT_EQ(on_demand.bandwidth_gbps(0, 8), 3.125);
  EXPECT_EQ(on_demand.bandwidth_gbps(0, 7), 100.0);
  EXPECT_EQ(on_demand.latency_ms(0, 8), 0.0);

  const Topology spot = load_example("2-datacenter-spot.yaml");
  EXPECT_EQ(spot.bandwidth_gbps(32, 33), 1.25);  // two single-GPU hosts
  EXPECT_EQ(spot.bandwidth_gbps(0, 32), 1.25);
  EXPECT_EQ(spot.bandwidth_gbps(0, 4), 1.25);  // two 4-GPU hosts
  EXPECT_EQ(spot.bandwidth_gbps(0, 3), 100.0);
  EXPECT_EQ(spot.bandwidth_gbps(40, 40), 100.0);  // the diagonal
}

TEST(TopologyExamples, MultiDatacenterAndRegional) {
  const Topology multi = load_example("3-multi-datacenter.yaml");
  EXPECT_EQ(multi.latency_ms(0, 32), 11.0);
  EXPECT_EQ(multi.bandwidth_gbps(0, 32), 1.12);
  EXPECT_EQ(multi.latency_ms(0, 31), 1.0);
  EXPECT_EQ(multi.bandwidth_gbps(0, 31), 5.0);

  const Topology regional = load_example("4-regional-geo.yaml");
  EXPECT_EQ(regional.latency_ms(0, 16), 67.0);  // Virginia - Oregon
  EXPECT_EQ(regional.bandwidth_gbps(0, 16), 1.15);
  EXPECT_EQ(regional.latency_ms(63, 32), 52.0);  // Ohio - California, listed the other way
}

TEST(TopologyExamples, RoundTripThroughYamlIsExact) {
  for (const std::string& file : kExamples) {
    SCOPED_TRACE(file);
    const Topology t = load_example(file);
    const Topology back = round_trip(t);
    expect_same_topology(t, back);
    EXPECT_EQ(topology_to_yaml(back), topology_to_yaml(t));
  }
}

TEST(TopologyYaml, WriterStartsWithACommentAndUsesFlowStyle) {
  const std::string yaml = topology_to_yaml(load_example("5-worldwide-geo.yaml"));
  EXPECT_EQ(yaml.rfind("# tessel topology", 0), 0u);
  EXPECT_TRUE(Contains(yaml, "  - {id: 0, site: Oregon, gpu: V100-SXM2-16GB, peak_tflops: 125.0}"));
  EXPECT_TRUE(
      Contains(yaml, "- {sites: [Oregon, Virginia], latency_ms: 67.0, bandwidth_gbps: 0.79}"));
}

// ---------------------------------------------------------------- a small hand-made topology

// Three sites, per-device peak and memory, a measured device pair, no diagonal.
const std::string kTiny = R"(format_version: 1
id: tiny
name: Tiny
paper_case: 0
workload: {anything: [goes, here]}
units: {latency: ms, bandwidth: Gbit/s, compute: TFLOP/s}
gpu_types:
  V100: {peak_tflops_fp16_tensor: 125.0, peak_tflops_fp32: 15.7, memory_gib: 16}
  A100: {peak_tflops_fp16_tensor: 312.0, memory_gib: 80}
sites:
  - {name: Ohio, kind: region, gpus: 2}
  - {name: Tokyo, kind: region, gpus: 1, latitude: 35.7, longitude: 139.7}
  - {name: Seoul, kind: "a \"quoted\" kind, with: specials"}
devices:
  - {id: 0, site: Ohio, gpu: V100, peak_tflops: 125.0}
  - {id: 1, site: Ohio, gpu: V100, peak_tflops: 100.0}
  - {id: 2, site: Tokyo, gpu: A100}
  - {id: 3, site: Seoul, gpu: A100, peak_tflops: 300, memory_gib: 40}
network:
  symmetric: true
  intra_site: {latency_ms: 1.0, bandwidth_gbps: 50.0}
  inter_site_default: null
  site_pairs:
    - {sites: [Ohio, Tokyo], latency_ms: 130.0, bandwidth_gbps: 0.694}
    - {sites: [Tokyo, Seoul], latency_ms: 34.0, bandwidth_gbps: 1.1}
    - {sites: [Seoul, Ohio], latency_ms: 159.0, bandwidth_gbps: 0.529}
  device_pairs:
    - {devices: [1, 2], latency_ms: 120.5, bandwidth_gbps: 0.8}
  note: informational
)";

// text with `from` (which must occur in it) replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "no '" << from << "' in the text";
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string tiny_with(const std::string& from, const std::string& to) {
  return replaced(kTiny, from, to);
}

const std::string kSeoulOhioLine =
    "    - {sites: [Seoul, Ohio], latency_ms: 159.0, bandwidth_gbps: 0.529}\n";

// The message parse_topology_yaml throws for text, or "" when it accepts it.
std::string parse_error(const std::string& text) {
  try {
    parse_topology_yaml(text, "bad.yaml");
  } catch (const TopologyError& e) {
    return e.what();
  }
  return "";
}

TEST(TopologyTiny, ExpandsDevicePairsSitesAndTypeDefaults) {
  const Topology t = parse_topology_yaml(kTiny, "tiny.yaml");
  ASSERT_EQ(t.size(), 4);
  EXPECT_EQ(t.devices[1].peak_tflops, 100.0);  // per device
  EXPECT_EQ(t.devices[2].peak_tflops, 312.0);  // from its type
  EXPECT_EQ(t.devices[0].memory_gib, 16.0);
  EXPECT_EQ(t.devices[3].memory_gib, 40.0);
  EXPECT_EQ(t.latency_ms(0, 1), 1.0);  // same site
  EXPECT_EQ(t.latency_ms(0, 2), 130.0);
  EXPECT_EQ(t.latency_ms(1, 2), 120.5);  // the device pair overrides Ohio - Tokyo
  EXPECT_EQ(t.bandwidth_gbps(2, 1), 0.8);
  EXPECT_EQ(t.latency_ms(3, 0), 159.0);  // pair listed as [Seoul, Ohio]
  EXPECT_EQ(t.latency_ms(2, 2), 1.0);    // diagonal defaults to intra_site
  EXPECT_FALSE(t.inter_site_default.has_value());
  EXPECT_EQ(t.sites[1].latitude, 35.7);
  EXPECT_EQ(t.sites[2].kind, "a \"quoted\" kind, with: specials");
  expect_symmetric(t);
  expect_same_topology(t, round_trip(t));
}

TEST(TopologyTiny, DevicePairsCanOverrideInsideASite) {
  const Topology t =
      parse_topology_yaml(tiny_with("devices: [1, 2]", "devices: [1, 0]"), "tiny.yaml");
  EXPECT_EQ(t.latency_ms(0, 1), 120.5);
  EXPECT_EQ(t.latency_ms(1, 2), 130.0);
}

TEST(TopologyTiny, MissingPairFallsBackToInterSiteDefault) {
  const Topology t =
      parse_topology_yaml(replaced(tiny_with(kSeoulOhioLine, ""), "inter_site_default: null",
                                   "inter_site_default: {latency_ms: 200, bandwidth_gbps: 0.3}"),
                          "tiny.yaml");
  EXPECT_EQ(t.latency_ms(0, 3), 200.0);
  EXPECT_EQ(t.bandwidth_gbps(3, 1), 0.3);
  EXPECT_EQ(t.latency_ms(0, 2), 130.0);
}

TEST(TopologyTiny, FinalizeWorksOnTopologiesBuiltInCode) {
  Topology t;
  t.gpu_types = {{.name = "V100", .peak_tflops = 125, .memory_gib = 16}};
  t.sites.resize(2);
  t.sites[0].name = "a";
  t.sites[1].name = "b";
  t.devices = {{.id = 0, .site = "a", .gpu = "V100"}, {.id = 1, .site = "b", .gpu = "V100"}};
  t.intra_site = {.latency_ms = 1, .bandwidth_gbps = 10};
  t.inter_site_default = Link{.latency_ms = 20, .bandwidth_gbps = 1};
  t.finalize();
  EXPECT_EQ(t.devices[1].peak_tflops, 125.0);
  EXPECT_EQ(t.latency_ms(0, 1), 20.0);
  t.devices[1].site = "c";
  try {
    t.finalize("built");
    FAIL() << "expected a TopologyError";
  } catch (const TopologyError& e) {
    EXPECT_TRUE(Contains(e.what(), "built: devices[1].site: unknown site 'c'"));
  }
}

// ---------------------------------------------------------------- bad input, one class each

TEST(TopologyErrors, YamlSyntaxErrorGivesLineAndColumn) {
  const std::string message = parse_error(tiny_with("name: Tiny", "name: Tiny: x"));
  EXPECT_TRUE(Contains(message, "bad.yaml: line 3, column 11: YAML syntax error"));
}

TEST(TopologyErrors, UnknownSite) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("site: Seoul", "site: Tokio")),
                       "bad.yaml: devices[3].site: unknown site 'Tokio'"));
}

TEST(TopologyErrors, DuplicateDeviceId) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("{id: 2,", "{id: 1,")),
                       "bad.yaml: devices[2].id: duplicate id 1 (also devices[1])"));
}

TEST(TopologyErrors, DeviceIdGap) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("{id: 3,", "{id: 4,")),
                       "bad.yaml: devices[3].id: must equal its index 3"));
}

TEST(TopologyErrors, UnknownGpuType) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("site: Tokyo, gpu: A100", "site: Tokyo, gpu: H100")),
                       "bad.yaml: devices[2].gpu: unknown gpu type 'H100'"));
}

TEST(TopologyErrors, NegativeBandwidth) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("bandwidth_gbps: 1.1}", "bandwidth_gbps: -1}")),
                       "bad.yaml: network.site_pairs[1].bandwidth_gbps: must be > 0, got -1"));
}

TEST(TopologyErrors, ZeroBandwidth) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("bandwidth_gbps: 50.0", "bandwidth_gbps: 0")),
                       "bad.yaml: network.intra_site.bandwidth_gbps: must be > 0, got 0"));
}

TEST(TopologyErrors, NegativeLatency) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("latency_ms: 120.5", "latency_ms: -3")),
                       "bad.yaml: network.device_pairs[0].latency_ms: must be >= 0, got -3"));
}

TEST(TopologyErrors, MissingNetwork) {
  std::string text = kTiny;
  text.erase(text.find("network:"));
  EXPECT_TRUE(Contains(parse_error(text), "bad.yaml: network: required field missing"));
}

TEST(TopologyErrors, MissingRequiredDeviceField) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("site: Tokyo, gpu: A100", "site: Tokyo")),
                       "bad.yaml: devices[2].gpu: required field missing"));
}

TEST(TopologyErrors, MissingSitePairWithoutDefault) {
  EXPECT_TRUE(Contains(parse_error(tiny_with(kSeoulOhioLine, "")),
                       "bad.yaml: network.site_pairs: no link between sites 'Ohio' and "
                       "'Seoul'"));
}

TEST(TopologyErrors, SitePairNamesUnknownSite) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("[Tokyo, Seoul]", "[Tokyo, Busan]")),
                       "bad.yaml: network.site_pairs[1].sites[1]: unknown site 'Busan'"));
}

TEST(TopologyErrors, SitePairWithItself) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("[Tokyo, Seoul]", "[Tokyo, Tokyo]")),
                       "bad.yaml: network.site_pairs[1].sites: a site cannot pair with itself"));
}

TEST(TopologyErrors, DuplicateSitePairInEitherOrder) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("[Seoul, Ohio]", "[Tokyo, Ohio]")),
                       "bad.yaml: network.site_pairs[2].sites: pair 'Tokyo'-'Ohio' already given "
                       "at network.site_pairs[0]"));
}

TEST(TopologyErrors, DevicePairOutOfRange) {
  EXPECT_TRUE(
      Contains(parse_error(tiny_with("devices: [1, 2]", "devices: [1, 64]")),
               "bad.yaml: network.device_pairs[0].devices[1]: device 64 out of range 0..3"));
}

TEST(TopologyErrors, DuplicateDevicePair) {
  const std::string text =
      tiny_with("    - {devices: [1, 2], latency_ms: 120.5, bandwidth_gbps: 0.8}\n",
                "    - {devices: [1, 2], latency_ms: 120.5, bandwidth_gbps: 0.8}\n"
                "    - {devices: [2, 1], latency_ms: 99, bandwidth_gbps: 0.8}\n");
  EXPECT_TRUE(Contains(parse_error(text),
                       "bad.yaml: network.device_pairs[1].devices: pair 2-1 "
                       "already given at network.device_pairs[0]"));
}

TEST(TopologyErrors, StringWhereANumberIsExpected) {
  EXPECT_TRUE(
      Contains(parse_error(tiny_with("latency_ms: 34.0", "latency_ms: fast")),
               "bad.yaml: network.site_pairs[1].latency_ms: expected a number, got 'fast'"));
}

TEST(TopologyErrors, MapWhereAListIsExpected) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("devices: [1, 2]", "devices: {a: 1}")),
                       "bad.yaml: network.device_pairs[0].devices: expected a list, got a map"));
}

TEST(TopologyErrors, FractionalDeviceId) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("{id: 3,", "{id: 3.5,")),
                       "bad.yaml: devices[3].id: expected an integer, got '3.5'"));
}

TEST(TopologyErrors, UnknownTopLevelKey) {
  EXPECT_TRUE(Contains(parse_error(kTiny + "netwrk: {}\n"), "bad.yaml: netwrk: unknown key"));
}

TEST(TopologyErrors, UnknownKeyInADevice) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("memory_gib: 40", "memory_gb: 40")),
                       "bad.yaml: devices[3].memory_gb: unknown key"));
}

TEST(TopologyErrors, WrongUnits) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("bandwidth: Gbit/s", "bandwidth: GB/s")),
                       "bad.yaml: units.bandwidth: must be 'Gbit/s', got 'GB/s'"));
}

TEST(TopologyErrors, FormatVersion2) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("format_version: 1", "format_version: 2")),
                       "bad.yaml: format_version: unsupported version 2"));
}

TEST(TopologyErrors, AsymmetricNetwork) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("symmetric: true", "symmetric: false")),
                       "bad.yaml: network.symmetric: must be true"));
}

TEST(TopologyErrors, SiteGpuCountDisagreesWithDevices) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("gpus: 2", "gpus: 3")),
                       "bad.yaml: sites[0].gpus: says 3 but 2 devices are on site 'Ohio'"));
}

TEST(TopologyErrors, DuplicateSiteName) {
  EXPECT_TRUE(Contains(parse_error(tiny_with("{name: Tokyo,", "{name: Ohio,")),
                       "bad.yaml: sites[1].name: duplicate site 'Ohio'"));
}

TEST(TopologyErrors, MissingFile) {
  try {
    load_topology_file("/nonexistent/topology.yaml");
    FAIL() << "expected a TopologyError";
  } catch (const TopologyError& e) {
    EXPECT_TRUE(Contains(e.what(), "/nonexistent/topology.yaml: cannot open"));
  }
}

// ---------------------------------------------------------------- the generator

double great_circle_km(const Site& a, const Site& b) {
  constexpr double kRadians = std::numbers::pi / 180;
  const double lat1 = *a.latitude * kRadians, lat2 = *b.latitude * kRadians;
  const double h = std::pow(std::sin((lat2 - lat1) / 2), 2) +
                   std::cos(lat1) * std::cos(lat2) *
                       std::pow(std::sin((*b.longitude - *a.longitude) * kRadians / 2), 2);
  return 2 * 6371 * std::asin(std::sqrt(h));
}

TEST(GeoGenerator, SameSeedSameTopologyOtherSeedAnother) {
  const GeoTopologySpec spec{.devices = 96, .sites = 12, .seed = 42};
  GeoTopologySpec other = spec;
  other.seed = 43;
  EXPECT_EQ(topology_to_yaml(generate_geo_topology(spec)),
            topology_to_yaml(generate_geo_topology(spec)));
  EXPECT_NE(topology_to_yaml(generate_geo_topology(spec)),
            topology_to_yaml(generate_geo_topology(other)));
}

// Its speed is measured in bench/placement (placement_kernels_bench).
TEST(GeoGenerator, LargeTopologyIsComplete) {
  const Topology t = generate_geo_topology({.devices = 1024, .sites = 32, .seed = 3});
  EXPECT_EQ(t.size(), 1024);
  EXPECT_EQ(t.sites.size(), 32u);
  EXPECT_EQ(t.site_pairs.size(), 32u * 31 / 2);
  EXPECT_FALSE(t.inter_site_default.has_value());
  for (const Site& site : t.sites) EXPECT_EQ(site.gpus, 32);
}

TEST(GeoGenerator, MoreSitesThanNamedRegionsGetSyntheticNames) {
  const Topology t = generate_geo_topology({.devices = 2000, .sites = 100, .seed = 9});
  std::set<std::string> names;
  for (const Site& site : t.sites) {
    names.insert(site.name);
    ASSERT_TRUE(site.latitude && site.longitude);
    EXPECT_LE(std::abs(*site.latitude), 90.0);
  }
  EXPECT_EQ(names.size(), 100u);
  EXPECT_TRUE(names.count("site-099"));
  expect_same_topology(t, round_trip(t));
}

TEST(GeoGenerator, LatencyGrowsWithDistanceAndBandwidthStaysInRange) {
  const GeoTopologySpec spec{
      .devices = 64, .sites = 16, .seed = 5, .min_bandwidth_gbps = 0.5, .max_bandwidth_gbps = 4};
  const Topology t = generate_geo_topology(spec);
  std::vector<std::pair<double, double>> km_and_latency;
  for (const SitePair& pair : t.site_pairs) {
    const Site& a = t.sites[t.site_index(pair.a)];
    const Site& b = t.sites[t.site_index(pair.b)];
    km_and_latency.emplace_back(great_circle_km(a, b), pair.link.latency_ms);
    EXPECT_GE(pair.link.bandwidth_gbps, spec.min_bandwidth_gbps);
    EXPECT_LE(pair.link.bandwidth_gbps, spec.max_bandwidth_gbps);
    EXPECT_GE(pair.link.latency_ms, 2.0);
  }
  std::sort(km_and_latency.begin(), km_and_latency.end());
  for (size_t k = 1; k < km_and_latency.size(); ++k) {
    EXPECT_LE(km_and_latency[k - 1].second, km_and_latency[k].second)
        << km_and_latency[k - 1].first << " km vs " << km_and_latency[k].first << " km";
  }
  // Far pairs get less bandwidth than near ones on average (noise is per pair).
  double near = 0, far = 0;
  int near_count = 0, far_count = 0;
  for (const SitePair& pair : t.site_pairs) {
    const double km = great_circle_km(t.sites[t.site_index(pair.a)], t.sites[t.site_index(pair.b)]);
    if (km < 3000) {
      near += pair.link.bandwidth_gbps;
      ++near_count;
    } else if (km > 9000) {
      far += pair.link.bandwidth_gbps;
      ++far_count;
    }
  }
  ASSERT_GT(near_count, 0);
  ASSERT_GT(far_count, 0);
  EXPECT_GT(near / near_count, far / far_count);
}

TEST(GeoGenerator, SpreadsDevicesEvenlyWithOneGpuModelPerSite) {
  const Topology t = generate_geo_topology({.devices = 50, .sites = 8, .seed = 11});
  int total = 0;
  for (const Site& site : t.sites) {
    EXPECT_TRUE(site.gpus == 6 || site.gpus == 7) << site.name << " " << site.gpus;
    total += site.gpus;
    std::set<std::string> models;
    for (const Device& device : t.devices) {
      if (device.site == site.name) models.insert(device.gpu);
    }
    EXPECT_EQ(models.size(), 1u) << site.name;
  }
  EXPECT_EQ(total, 50);
  EXPECT_GT(t.gpu_types.size(), 1u);
  EXPECT_EQ(t.latency_ms(0, 1), 0.5);  // intra-site values of the spec
  EXPECT_EQ(t.bandwidth_gbps(0, 1), 100.0);

  const Topology uniform =
      generate_geo_topology({.devices = 50, .sites = 8, .seed = 11, .mixed_gpus = false});
  EXPECT_EQ(uniform.gpu_types.size(), 1u);
}

TEST(GeoGenerator, RejectsBadSpecsNamingTheField) {
  const auto message = [](const GeoTopologySpec& spec) -> std::string {
    try {
      generate_geo_topology(spec);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_TRUE(Contains(message({.devices = 0, .sites = 1}), "devices"));
  EXPECT_TRUE(Contains(message({.devices = 4, .sites = 5}), "sites"));
  EXPECT_TRUE(Contains(message({.devices = 4, .sites = 0}), "sites"));
  EXPECT_TRUE(
      Contains(message({.min_bandwidth_gbps = 5, .max_bandwidth_gbps = 1}), "min_bandwidth_gbps"));
  EXPECT_TRUE(Contains(message({.intra_site_bandwidth_gbps = -1}), "intra_site_bandwidth_gbps"));
}

}  // namespace
}  // namespace tessel::placement
