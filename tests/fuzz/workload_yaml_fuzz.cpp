// The workload YAML (`tessel plan --workload`, placement/workload.h): parse_workload_yaml on the
// bytes; a WorkloadError is the parser refusing them. An accepted workload must validate and
// read back from workload_to_yaml as the same YAML.
#include "placement/workload.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::placement;
  Workload workload;
  try {
    workload = parse_workload_yaml(tessel::fuzz::as_text(data, size), "fuzz.yaml");
  } catch (const WorkloadError&) {
    return 0;
  }
  const std::string yaml = workload_to_yaml(workload);
  try {
    workload.validate();
    if (workload_to_yaml(parse_workload_yaml(yaml, "written")) != yaml) {
      tessel::fuzz::finding("workload_to_yaml does not read back the same:\n" + yaml);
    }
  } catch (const WorkloadError& e) {
    tessel::fuzz::finding(std::string("an accepted workload is refused: ") + e.what());
  }
  return 0;
}
