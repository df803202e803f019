// A TrainingJob manifest as `tessel local` and kubectl users write it (api/trainingjob.h): the
// YAML (or JSON) read by yaml_to_json, then parse_trainingjob, the one parser the operator, its
// webhook and `tessel local` use. A ManifestError is the refusal; an accepted job's workload()
// must be valid.
#include "api/trainingjob.h"
#include "api/yaml_json.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::api;
  try {
    const TrainingJob job = parse_trainingjob(
        yaml_to_json(tessel::fuzz::as_text(data, size), "fuzz.yaml"), "fuzz.yaml");
    try {
      job.spec.workload();
    } catch (const tessel::placement::WorkloadError& e) {
      tessel::fuzz::finding(std::string("an accepted job has no valid workload: ") + e.what());
    }
  } catch (const ManifestError&) {
  }
  return 0;
}
