// The prober peers ConfigMap's data["peers.json"] (api/prober_peers.h): written by the operator,
// read by every prober of a member. parse_prober_peers on the bytes; a ManifestError is the
// refusal. Accepted peers must read back equal from format_prober_peers.
#include "api/manifest_error.h"
#include "api/prober_peers.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::api;
  ProberPeers peers;
  try {
    peers = parse_prober_peers(tessel::fuzz::as_text(data, size), "fuzz: ConfigMap peers");
  } catch (const ManifestError&) {
    return 0;
  }
  const std::string written = format_prober_peers(peers);
  try {
    if (!(parse_prober_peers(written, "written") == peers)) {
      tessel::fuzz::finding("format_prober_peers does not read back equal: " + written);
    }
  } catch (const ManifestError& e) {
    tessel::fuzz::finding(std::string("format_prober_peers's output is refused: ") + e.what());
  }
  return 0;
}
