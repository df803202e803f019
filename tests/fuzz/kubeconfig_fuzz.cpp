// A kubeconfig as bytes (kube/config.h): what a MemberCluster's Secret holds, read by the
// operator and kubectl-tessel. kubeconfig_from_bytes under both policies (insecure TLS refused,
// allowed), with the current context and with a named one. A KubeConfigError is the refusal.
#include "kube/config.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::kube;
  const std::string text = tessel::fuzz::as_text(data, size);
  for (const bool insecure : {false, true}) {
    for (const char* context : {"", "member-a"}) {
      KubeconfigBytesPolicy policy;
      policy.allow_insecure = insecure;
      try {
        describe(
            kubeconfig_from_bytes(text, "Secret fuzz/kubeconfig[kubeconfig]", policy, context));
      } catch (const KubeConfigError&) {
      }
    }
  }
  return 0;
}
