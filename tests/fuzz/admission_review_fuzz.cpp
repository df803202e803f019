// The body of an AdmissionReview the API server POSTs to the operator's webhooks
// (operator/server/webhook.h): handle_validate and handle_mutate on the bytes, as the HTTPS
// server hands them over. Every body gets an answer (400 for one that is not an AdmissionReview);
// nothing may escape.
#include "operator/server/webhook.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::server;
  const std::string body = tessel::fuzz::as_text(data, size);
  const int validated = handle_validate({"POST", "/validate", body}).status;
  const int mutated = handle_mutate({"POST", "/mutate", body}).status;
  if (validated != 200 && validated != 400) {
    tessel::fuzz::finding("/validate answered " + std::to_string(validated));
  }
  if (mutated != 200 && mutated != 400) {
    tessel::fuzz::finding("/mutate answered " + std::to_string(mutated));
  }
  return 0;
}
