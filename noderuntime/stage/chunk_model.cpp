#include "noderuntime/stage/chunk_model.h"

#include "noderuntime/stage/gpt_chunk.h"

namespace tessel::stage {

std::string to_string(Device device) { return device == Device::kCuda ? "cuda" : "cpu"; }

ChunkModel::ChunkModel(const GptConfig& config, const ChunkSpec& spec, int batch)
    : config_(config),
      layout_(config, spec),
      B_(batch),
      T_(config.seq_len),
      C_(config.channels),
      NH_(config.heads),
      F_(config.ffn),
      V_(config.vocab) {
  if (batch < 1) throw ConfigError("micro_batch: must be >= 1, got " + std::to_string(batch));
  if (spec.num_layers < 1) {
    throw ConfigError("virtual stage " + std::to_string(spec.virtual_stage) + " has no layers");
  }
}

transport::DType ChunkModel::wire_dtype() const {
  return config_.precision == placement::Precision::BF16 ? transport::DType::kBF16
                                                         : transport::DType::kF32;
}

ChunkFactory cpu_chunk_factory() {
  return [](const GptConfig& config, const ChunkSpec& spec, int batch) {
    return std::make_unique<GptChunk>(config, spec, batch);
  };
}

}  // namespace tessel::stage
