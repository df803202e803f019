// The topology YAML (`tessel plan`, `tessel local`, placement/topology.h): parse_topology_yaml on
// the bytes; a TopologyError is the parser refusing them. A topology it accepts must read back
// equal from topology_to_yaml (the header's promise).
#include "placement/topology.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::placement;
  Topology topology;
  try {
    topology = parse_topology_yaml(tessel::fuzz::as_text(data, size), "fuzz.yaml");
  } catch (const TopologyError&) {
    return 0;
  }
  const std::string yaml = topology_to_yaml(topology);
  try {
    if (!(parse_topology_yaml(yaml, "written") == topology)) {
      tessel::fuzz::finding("topology_to_yaml does not read back equal:\n" + yaml);
    }
  } catch (const TopologyError& e) {
    tessel::fuzz::finding(std::string("topology_to_yaml's output is refused: ") + e.what());
  }
  return 0;
}
