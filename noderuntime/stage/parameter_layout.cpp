#include "noderuntime/stage/parameter_layout.h"

#include <cmath>
#include <numeric>
#include <stdexcept>

namespace tessel::stage {
namespace {

constexpr float kInitStddev = 0.02f;  // GPT-2

}  // namespace

std::vector<int> even_layer_split(int layers, int parts) {
  if (parts < 1 || parts > layers) {
    throw ConfigError("layer split: cannot split " + std::to_string(layers) + " layers into " +
                      std::to_string(parts) + " virtual stages of at least one layer each");
  }
  std::vector<int> split(parts, layers / parts);
  for (int i = 0; i < layers % parts; ++i) ++split[i];
  return split;
}

ChunkSpec chunk_spec(const GptConfig& config, const std::vector<int>& layer_split,
                     int virtual_stage) {
  const int parts = static_cast<int>(layer_split.size());
  for (int s = 0; s < parts; ++s) {
    if (layer_split[s] < 1) {
      throw ConfigError("layer_split[" + std::to_string(s) + "]: every virtual stage needs at " +
                        "least one layer, got " + std::to_string(layer_split[s]));
    }
  }
  const int sum = std::accumulate(layer_split.begin(), layer_split.end(), 0);
  if (sum != config.layers) {
    throw ConfigError("layer_split: sums to " + std::to_string(sum) + " layers, the model has " +
                      std::to_string(config.layers));
  }
  if (virtual_stage < 0 || virtual_stage >= parts) {
    throw ConfigError("virtual stage " + std::to_string(virtual_stage) + " out of range [0, " +
                      std::to_string(parts) + ")");
  }
  ChunkSpec spec;
  spec.virtual_stage = virtual_stage;
  spec.first_layer = std::accumulate(layer_split.begin(), layer_split.begin() + virtual_stage, 0);
  spec.num_layers = layer_split[virtual_stage];
  spec.embedding = virtual_stage == 0;
  spec.head = virtual_stage == parts - 1;
  return spec;
}

ParameterLayout::ParameterLayout(const GptConfig& config, const ChunkSpec& spec) : spec_(spec) {
  config.validate();
  const int64_t C = config.channels, F = config.ffn, V = config.vocab, T = config.seq_len;
  // GPT-2 scales the residual projections by 1/sqrt(2 L): two per block add to the stream.
  const float residual_stddev = kInitStddev / std::sqrt(2.0f * float(config.layers));
  if (spec.embedding) {
    add("wte.weight", {V, C}, ParameterInit::kNormal, kInitStddev, true);
    close_bucket("wte", BucketGroup::kEmbedding);
    add("wpe.weight", {T, C}, ParameterInit::kNormal, kInitStddev, true);
    close_bucket("wpe", BucketGroup::kDataParallel);
  }
  first_layer_bucket_ = static_cast<int>(buckets_.size());
  for (int l = spec.first_layer; l < spec.first_layer + spec.num_layers; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    add(h + "ln_1.weight", {C}, ParameterInit::kOnes, 0, false);
    add(h + "ln_1.bias", {C}, ParameterInit::kZeros, 0, false);
    add(h + "attn.qkv.weight", {3 * C, C}, ParameterInit::kNormal, kInitStddev, true);
    add(h + "attn.qkv.bias", {3 * C}, ParameterInit::kZeros, 0, false);
    add(h + "attn.proj.weight", {C, C}, ParameterInit::kNormal, residual_stddev, true);
    add(h + "attn.proj.bias", {C}, ParameterInit::kZeros, 0, false);
    add(h + "ln_2.weight", {C}, ParameterInit::kOnes, 0, false);
    add(h + "ln_2.bias", {C}, ParameterInit::kZeros, 0, false);
    add(h + "mlp.fc.weight", {F, C}, ParameterInit::kNormal, kInitStddev, true);
    add(h + "mlp.fc.bias", {F}, ParameterInit::kZeros, 0, false);
    add(h + "mlp.proj.weight", {C, F}, ParameterInit::kNormal, residual_stddev, true);
    add(h + "mlp.proj.bias", {C}, ParameterInit::kZeros, 0, false);
    close_bucket("h." + std::to_string(l), BucketGroup::kDataParallel);
  }
  if (spec.head) {
    add("ln_f.weight", {C}, ParameterInit::kOnes, 0, false);
    add("ln_f.bias", {C}, ParameterInit::kZeros, 0, false);
    close_bucket("ln_f", BucketGroup::kDataParallel);
    if (spec.head_copy()) {
      add("lm_head.weight", {V, C}, ParameterInit::kNormal, kInitStddev, true);
      tensors_.back().init_key = "wte.weight";
      tensors_.back().in_norm = false;
      close_bucket("lm_head", BucketGroup::kEmbedding);
    }
  }
}

void ParameterLayout::add(std::string name, std::vector<int64_t> shape, ParameterInit init,
                          float stddev, bool decay) {
  ParameterTensor t;
  t.name = name;
  t.init_key = name;
  t.size = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  t.shape = std::move(shape);
  t.offset = total_;
  t.init = init;
  t.stddev = stddev;
  t.decay = decay;
  total_ += t.size;
  by_name_[name] = tensors_.size();
  tensors_.push_back(std::move(t));
}

void ParameterLayout::close_bucket(std::string name, BucketGroup group) {
  buckets_.push_back({std::move(name), bucket_start_, total_ - bucket_start_, group});
  bucket_start_ = total_;
}

const ParameterTensor& ParameterLayout::tensor(const std::string& name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    throw std::out_of_range("virtual stage " + std::to_string(spec_.virtual_stage) +
                            " has no parameter '" + name + "'");
  }
  return tensors_[it->second];
}

int ParameterLayout::bucket_index(const std::string& name) const {
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (buckets_[i].name == name) return static_cast<int>(i);
  }
  throw std::out_of_range("virtual stage " + std::to_string(spec_.virtual_stage) +
                          " has no gradient bucket '" + name + "'");
}

BlockOffsets ParameterLayout::block_offsets(int local_layer) const {
  const std::string h = "h." + std::to_string(spec_.first_layer + local_layer) + ".";
  auto at = [&](const char* name) { return offset(h + name); };
  return {at("ln_1.weight"),      at("ln_1.bias"),      at("attn.qkv.weight"), at("attn.qkv.bias"),
          at("attn.proj.weight"), at("attn.proj.bias"), at("ln_2.weight"),     at("ln_2.bias"),
          at("mlp.fc.weight"),    at("mlp.fc.bias"),    at("mlp.proj.weight"), at("mlp.proj.bias")};
}

}  // namespace tessel::stage
