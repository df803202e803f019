// The Node annotation net.tessel.dev/links (api/link_annotations.h), written by a prober that may
// be broken or hostile and read by the operator: parse_node_links on the bytes, for a node given
// by name and by "<cluster>/<node>". A ManifestError is the refusal. Accepted links must read
// back equal from format_node_links (values written have at most kSignificantDigits digits, and
// the parser keeps what it reads, so format(parse(format(x))) == format(x)).
#include "api/link_annotations.h"
#include "api/manifest_error.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::api;
  const std::string text = tessel::fuzz::as_text(data, size);
  parse_measured_at(text);
  for (const char* node : {"gpu-node-1", "member-a/gpu-node-1"}) {
    NodeLinks links;
    try {
      links = parse_node_links(text, node);
    } catch (const ManifestError&) {
      continue;
    }
    const std::string written = format_node_links(links);
    try {
      if (format_node_links(parse_node_links(written, node)) != written) {
        tessel::fuzz::finding("format_node_links does not read back the same: " + written);
      }
    } catch (const ManifestError& e) {
      tessel::fuzz::finding(std::string("format_node_links's output is refused: ") + e.what());
    }
  }
  return 0;
}
