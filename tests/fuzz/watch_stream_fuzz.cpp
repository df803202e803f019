// The body of a Kubernetes watch response (kube/watch_stream.h), as the API server's chunks
// deliver it: the first byte of the input sets the chunk size (1 to 256 bytes), the rest is the
// body, fed chunk by chunk to a WatchDecoder, every event pulled and observed by a WatchPosition
// as the reflector does, then finish(). WatchDecodeError is the refusal of a bad line.
#include <algorithm>
#include <string_view>

#include "kube/watch_stream.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::kube;
  if (size == 0) return 0;
  const size_t chunk = size_t{data[0]} + 1;
  const std::string body = tessel::fuzz::as_text(data + 1, size - 1);
  WatchDecoder decoder;
  WatchPosition position("1");
  try {
    for (size_t at = 0; at < body.size(); at += chunk) {
      decoder.feed(std::string_view(body).substr(at, chunk));
      while (const auto event = decoder.next()) {
        position.observe(*event);
        if (position.needs_relist()) position.reset("1");
        query_string(position.resume_options({}));
      }
    }
    decoder.finish();
  } catch (const WatchDecodeError&) {
  }
  return 0;
}
