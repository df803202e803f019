// placement::check_placement and read_placement_file: the one check of a placement before it
// runs (`tessel simulate --placement`, `tessel local --placement`, the operator). Every fault
// is refused naming the file and the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "placement/full_cost.h"
#include "placement/paper_cost.h"
#include "placement/placement.h"
#include "test_topologies.h"

namespace tessel::placement {
namespace {

struct Planned {
  Topology topology = testing::scenario("5-worldwide-geo.yaml");
  Workload workload = workload_preset("gpt3-1.3b");
  FullCostModel full{topology, {8, 8}, workload, {}};
  Placement placement;
  nlohmann::json json;
  Planned() {
    SearchOptions options;
    options.evaluations = 200;
    options.seed = 3;
    placement = build_placement(topology, full, full, search_placement(full, options), options);
    json = placement_to_json(placement);
  }
};

const Planned& planned() {
  static const Planned p;
  return p;
}

// In a file of this process's own: ctest runs the cases of this file as parallel processes.
std::string write(const std::string& name, const std::string& text) {
  const std::string path =
      ::testing::TempDir() + "/tessel-placement-" + std::to_string(::getpid()) + "-" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The error of checking this JSON text as file "p.json" against the planned topology, shape
// and model; "" when it is accepted.
std::string error_of_text(const std::string& text, PartitionShape shape = {8, 8},
                          const Topology* topology = nullptr) {
  const std::string path = write("p.json", text);
  try {
    const Placement p = read_placement_file(path);
    check_placement(p, topology ? *topology : planned().topology, shape, planned().workload.layers,
                    path);
  } catch (const PlacementError& e) {
    const std::string what = e.what();
    const std::string prefix = path + ": ";
    EXPECT_EQ(what.rfind(prefix, 0), 0u) << "does not start with the file's name: " << what;
    return "p.json: " + what.substr(prefix.size());
  }
  return "";
}

std::string error_of(const nlohmann::json& j, PartitionShape shape = {8, 8}) {
  return error_of_text(j.dump(2), shape);
}

// A copy of the plan with pipelines[r].devices[s] = d in every view (so that only the device
// itself is at fault).
nlohmann::json with_device(int r, int s, int d) {
  nlohmann::json j = planned().json;
  j["pipelines"][r]["devices"][s] = d;
  j["stages"][s]["devices"][r] = d;
  for (auto& e : j["rank_map"])
    if (e["replica"] == r && e["stage"] == s) e["device"] = d;
  return j;
}

#define EXPECT_ERROR(error, part) \
  EXPECT_NE((error).find(part), std::string::npos) << "expected '" << (part) << "' in: " << (error)

TEST(PlacementCheck, APlanFromTheSearchIsAcceptedAndRoundTrips) {
  EXPECT_EQ(error_of(planned().json), "");
  const Placement back = read_placement_file(write("ok.json", planned().json.dump(2)));
  EXPECT_EQ(back.pipelines, planned().placement.pipelines);
  EXPECT_EQ(back.topology_devices, 64);
  EXPECT_EQ(back.topology_fingerprint, topology_fingerprint(planned().topology));
  EXPECT_EQ(back.topology_fingerprint.size(), 16u);
  // Written before the fingerprint existed: still read, and checked on everything else.
  nlohmann::json old = planned().json;
  old.erase("topology_devices");
  old.erase("topology_fingerprint");
  old.erase("interrupted");
  EXPECT_EQ(error_of(old), "");
}

TEST(PlacementCheck, DevicesMustBeInTheTopologyAndUsedOnce) {
  EXPECT_ERROR(error_of(with_device(1, 0, 70)),
               "p.json: pipelines[1].devices[0]: device 70 is not in the topology (64 devices, "
               "0..63)");
  EXPECT_ERROR(error_of(with_device(2, 3, -1)),
               "p.json: pipelines[2].devices[3]: device -1 is not");
  const int first = planned().placement.pipelines[0][0];
  EXPECT_ERROR(error_of(with_device(3, 2, first)),
               "p.json: pipelines[3].devices[2]: device " + std::to_string(first) +
                   " is used twice (also at pipelines[0].devices[0])");
}

TEST(PlacementCheck, APlacementForAnotherTopologyIsRefused) {
  nlohmann::json j = planned().json;
  j["topology"] = "regional-geo";
  EXPECT_ERROR(error_of(j),
               "p.json: topology: planned for 'regional-geo', but this topology is "
               "'worldwide-geo'");
  j = planned().json;
  j["topology_devices"] = 32;
  EXPECT_ERROR(error_of(j),
               "p.json: topology_devices: planned on 32 devices, but topology "
               "'worldwide-geo' has 64");
  // The same id and size, other devices: two devices of different sites trade places.
  Topology moved = planned().topology;
  std::swap(moved.devices[0].site, moved.devices[63].site);
  ASSERT_NE(moved.devices[0].site, moved.devices[63].site);
  moved.finalize("moved");
  EXPECT_ERROR(error_of_text(planned().json.dump(), {8, 8}, &moved),
               "p.json: topology_fingerprint: " + planned().placement.topology_fingerprint +
                   ": planned for other devices than those of topology 'worldwide-geo'");
  // Localized (GPUs and links changed, devices and sites kept): the same fingerprint.
  Topology localized = planned().topology;
  for (Device& d : localized.devices) d.peak_tflops /= 2;
  localized.intra_site.bandwidth_gbps *= 3;
  localized.finalize("localized");
  EXPECT_EQ(topology_fingerprint(localized), topology_fingerprint(planned().topology));
}

TEST(PlacementCheck, TheShapeMustBeTheOneToRun) {
  EXPECT_ERROR(error_of(planned().json, {4, 16}),
               "p.json: stages_count, replicas: the placement is 8 x 8, the pipeline to run is "
               "4 x 16");
  nlohmann::json j = planned().json;
  j["pipelines"].erase(7);
  EXPECT_ERROR(error_of(j), "p.json: pipelines: 7 entries, expected one per replica (8)");
  j = planned().json;
  j["pipelines"][2]["devices"].erase(5);
  EXPECT_ERROR(error_of(j), "p.json: pipelines[2].devices: 7 devices, expected one per stage (8)");
  j = planned().json;
  j["stages"].erase(7);
  EXPECT_ERROR(error_of(j), "p.json: stages: 7 entries, expected one per stage (8)");
}

TEST(PlacementCheck, TheViewsMustAgreeWithThePipelines) {
  nlohmann::json j = planned().json;
  std::swap(j["stages"][1]["devices"][0], j["stages"][1]["devices"][1]);
  EXPECT_ERROR(error_of(j), "p.json: stages[1].devices[0]: device ");
  EXPECT_ERROR(error_of(j), "(the two views must agree)");
  j = planned().json;
  j["rank_map"][5]["device"] = planned().placement.pipelines[0][0];
  EXPECT_ERROR(error_of(j), "p.json: rank_map[5].device: device ");
  j = planned().json;
  j["rank_map"][5]["rank"] = 4;
  EXPECT_ERROR(error_of(j), "p.json: rank_map[5].rank: 4, but replica 0 x 8 + stage 5 = 5");
  j = planned().json;
  j["rank_map"].erase(63);
  EXPECT_ERROR(error_of(j), "p.json: rank_map: 63 entries, expected stages x replicas = 64");
  j = planned().json;
  j["stages"][2]["dp_ring"][0] = planned().placement.stages[3][0];
  EXPECT_ERROR(error_of(j), "p.json: stages[2].dp_ring: not an order of the stage's devices");
  j = planned().json;
  j["pipelines"][4]["replica"] = 5;
  EXPECT_ERROR(error_of(j), "p.json: pipelines[4].replica: 5, but it is entry 4 of the list");
}

TEST(PlacementCheck, TheLayerSplitMustFitTheModel) {
  const int layers = planned().workload.layers;
  auto split = [&](int stage, int value) {
    nlohmann::json j = planned().json;
    j["layer_split"][stage] = value;
    j["stages"][stage]["layers"] = value;
    return j;
  };
  EXPECT_ERROR(error_of(split(3, 0)),
               "p.json: layer_split[3]: 0 layers; every stage needs at "
               "least 1");
  EXPECT_ERROR(error_of(split(0, -4)), "p.json: layer_split[0]: -4 layers");
  const int s0 = planned().placement.layer_split[0];
  EXPECT_ERROR(error_of(split(0, s0 + 1)),
               "p.json: layer_split: sums to " + std::to_string(layers + 1) +
                   " layers, but the model to run has " + std::to_string(layers) +
                   " (the placement is for model 'gpt3-1.3b')");
  nlohmann::json j = planned().json;
  j["layer_split"].erase(7);
  EXPECT_ERROR(error_of(j), "p.json: layer_split: 7 entries, expected one per stage (8)");
  j = planned().json;
  j["stages"][2]["layers"] = 99;
  EXPECT_ERROR(error_of(j), "p.json: stages[2].layers: 99, but layer_split[2] is ");
}

TEST(PlacementFile, MalformedFilesAreRefusedNamingTheFieldOrThePosition) {
  EXPECT_ERROR(error_of_text("{\"format_version\": 1,\n  \"topology\": }"),
               "p.json: not JSON: parse error at line 2");
  EXPECT_ERROR(error_of_text(""), "p.json: not JSON: ");
  EXPECT_ERROR(error_of_text("[1, 2]"), "p.json: not a placement: expected a JSON object");
  EXPECT_ERROR(error_of_text("{\"format_version\": 1}"), "p.json: topology: missing");
  nlohmann::json j = planned().json;
  j["format_version"] = 2;
  EXPECT_ERROR(error_of(j), "p.json: format_version: 2 is not supported (this tessel reads 1)");
  j = planned().json;
  j.erase("pipelines");
  EXPECT_ERROR(error_of(j), "p.json: pipelines: missing");
  j = planned().json;
  j["pipelines"][1]["devices"][0] = "3";
  EXPECT_ERROR(error_of(j), "p.json: pipelines[1].devices[0]: expected an integer, got \"3\"");
  j = planned().json;
  j["pipelines"][1]["devices"][0] = 1.5;
  EXPECT_ERROR(error_of(j), "p.json: pipelines[1].devices[0]: expected an integer, got 1.5");
  j = planned().json;
  j["pipelines"][1]["devices"][0] = 99999999999LL;
  EXPECT_ERROR(error_of(j),
               "p.json: pipelines[1].devices[0]: 99999999999 is not in "
               "-2147483648..2147483647");
  j = planned().json;
  j["stages_count"] = -8;
  EXPECT_ERROR(error_of(j), "p.json: stages_count, replicas: the placement is -8 x 8");
  j = planned().json;
  j["seed"] = -1;
  EXPECT_ERROR(error_of(j), "p.json: seed: expected an integer in 0..2^64-1, got -1");
  j = planned().json;
  j["cost"]["total_s"] = "fast";
  EXPECT_ERROR(error_of(j), "p.json: cost.total_s: expected a number or null, got \"fast\"");
  j = planned().json;
  j["elapsed_s"] = -3.0;
  EXPECT_ERROR(error_of(j), "p.json: elapsed_s: -3.0 is not a number of seconds");
  j = planned().json;
  j["convergence"][0] = {1};
  EXPECT_ERROR(error_of(j), "p.json: convergence[0]: expected [evaluations, best cost]");
  EXPECT_ERROR(error_of_text("{\"a\": NaN}"), "p.json: not JSON: ");
  // out_of_range, not parse_error (tests/fuzz found it in job.json; regressions/placement_json).
  EXPECT_ERROR(error_of_text("{\"seed\": 1e400}"),
               "p.json: not JSON: number overflow parsing '1e400'");
}

TEST(PlacementFile, SizeAndNestingAreBoundedBeforeParsing) {
  const std::string deep(100000, '[');
  EXPECT_ERROR(error_of_text(deep + std::string(100000, ']')),
               "p.json: nested more than 16 levels deep");
  // A stream without end is refused at the size limit, not read into memory.
  try {
    read_placement_file("/dev/zero");
    FAIL() << "/dev/zero accepted";
  } catch (const PlacementError& e) {
    EXPECT_ERROR(std::string(e.what()), "/dev/zero: more than 64 MiB");
  }
  try {
    read_placement_file(::testing::TempDir() + "/no-such-placement.json");
    FAIL() << "a missing file accepted";
  } catch (const PlacementError& e) {
    EXPECT_ERROR(std::string(e.what()), "no-such-placement.json: cannot open the placement");
  }
}

}  // namespace
}  // namespace tessel::placement
