// `tessel local`'s job file (noderuntime/launcher/trainingjob_local.h): a local job file
// (examples/local/) or a TrainingJob manifest, read as if it were examples/local/fuzz.yaml so
// that the relative paths of the real examples (their topology, their text) resolve. Each input
// goes through both forms of the call: without --topology (a local job file must name its own)
// and with examples/local/two-sites.yaml. A LocalJobError is the refusal.
#include <string>

#include "noderuntime/launcher/trainingjob_local.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::launcher;
  static const std::string kExamples = std::string(TESSEL_SOURCE_DIR) + "/examples/local";
  const std::string text = tessel::fuzz::as_text(data, size);
  for (const std::string& topology : {std::string(), kExamples + "/two-sites.yaml"}) {
    try {
      parse_job_file(text, kExamples + "/fuzz.yaml", topology);
    } catch (const LocalJobError&) {
    }
  }
  return 0;
}
