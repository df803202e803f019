// A safetensors file (noderuntime/stage/safetensors.h): a checkpoint the stage runtime reads
// back, which may be torn, corrupt or someone else's. decode_safetensors on the bytes; a
// SafetensorsError is the refusal. An accepted file must encode and decode back to the same
// tensors and metadata.
#include <cstddef>
#include <vector>

#include "noderuntime/stage/safetensors.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessel::stage;
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  SafetensorsFile file;
  try {
    file = decode_safetensors(std::vector<std::byte>(bytes, bytes + size), "fuzz.safetensors");
  } catch (const SafetensorsError&) {
    return 0;
  }
  try {
    const SafetensorsFile again = decode_safetensors(encode_safetensors(file), "written");
    bool same = again.metadata == file.metadata && again.tensors.size() == file.tensors.size();
    for (auto a = again.tensors.cbegin(), b = file.tensors.cbegin();
         same && a != again.tensors.end(); ++a, ++b) {
      same = a->first == b->first && a->second.dtype == b->second.dtype &&
             a->second.shape == b->second.shape && a->second.data == b->second.data;
    }
    if (!same) tessel::fuzz::finding("encode_safetensors does not decode back the same");
  } catch (const SafetensorsError& e) {
    tessel::fuzz::finding(std::string("encode_safetensors's output is refused: ") + e.what());
  }
  return 0;
}
