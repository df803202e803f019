// A placement file (`tessel plan --format json`, read by `tessel simulate --placement` and
// `tessel local --placement`; placement/placement.h): parse_placement_text on the bytes, then
// check_placement against the topology of examples/topologies/1-datacenter-on-demand.yaml for the
// placement's own shape. A PlacementError is the refusal. An accepted placement must read back
// equal-in-JSON from placement_to_json.
#include <string>

#include "placement/placement.h"
#include "placement/topology.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::placement;
  static const Topology topology = load_topology_file(
      std::string(TESSEL_SOURCE_DIR) + "/examples/topologies/1-datacenter-on-demand.yaml");
  Placement placement;
  try {
    placement = parse_placement_text(tessel::fuzz::as_text(data, size), "fuzz.json");
  } catch (const PlacementError&) {
    return 0;
  }
  const nlohmann::json written = placement_to_json(placement);
  try {
    if (placement_to_json(placement_from_json(written, "written")) != written) {
      tessel::fuzz::finding("placement_to_json does not read back the same: " + written.dump());
    }
  } catch (const PlacementError& e) {
    tessel::fuzz::finding(std::string("placement_to_json's output is refused: ") + e.what());
  }
  try {
    check_placement(placement, topology, placement.shape, 0, "fuzz.json");
  } catch (const PlacementError&) {
  }
  return 0;
}
