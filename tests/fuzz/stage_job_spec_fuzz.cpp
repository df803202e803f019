// job.json, what every tessel-stage process reads (noderuntime/stage/job_spec.h; written by the
// launcher and the operator, or by hand): parse_job_spec on the bytes. A ConfigError is the
// refusal.
#include "noderuntime/stage/job_spec.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tessel::stage::parse_job_spec(tessel::fuzz::as_text(data, size), "job.json");
  } catch (const tessel::stage::ConfigError&) {
  }
  return 0;
}
