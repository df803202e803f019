#include "noderuntime/stage/pipeline_layout.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "noderuntime/stage/parameter_layout.h"

namespace tessel::stage {

PipelineLayout PipelineLayout::standard(int stages, int replicas, int chunks, int layers) {
  PipelineLayout layout;
  layout.stages = stages;
  layout.replicas = replicas;
  layout.chunks = chunks;
  layout.layer_split = even_layer_split(layers, stages * chunks);
  layout.rank_of_tasklet.resize(stages * replicas);
  for (int s = 0; s < stages; ++s) {
    for (int r = 0; r < replicas; ++r) layout.rank_of_tasklet[s * replicas + r] = r * stages + s;
  }
  return layout;
}

void PipelineLayout::validate(const GptConfig& config) const {
  auto need = [](bool ok, const std::string& message) {
    if (!ok) throw ConfigError(message);
  };
  need(stages >= 1, "pipeline.stages: must be >= 1, got " + std::to_string(stages));
  need(replicas >= 1, "pipeline.replicas: must be >= 1, got " + std::to_string(replicas));
  need(chunks >= 1, "schedule.chunks: must be >= 1, got " + std::to_string(chunks));
  need(static_cast<int>(layer_split.size()) == virtual_stages(),
       "pipeline.layer_split: has " + std::to_string(layer_split.size()) +
           " entries, stages x chunks is " + std::to_string(virtual_stages()));
  chunk_spec(config, layer_split, 0);  // checks the split itself
  need(static_cast<int>(rank_of_tasklet.size()) == world_size(),
       "ranks: " + std::to_string(rank_of_tasklet.size()) + " tasklets mapped, stages x " +
           "replicas is " + std::to_string(world_size()));
  std::vector<int> seen(world_size(), 0);
  for (int rank : rank_of_tasklet) {
    need(rank >= 0 && rank < world_size(), "ranks: rank " + std::to_string(rank) +
                                               " out of range [0, " + std::to_string(world_size()) +
                                               ")");
    need(++seen[rank] == 1, "ranks: rank " + std::to_string(rank) + " runs two tasklets");
  }
}

PipelineLayout::Tasklet PipelineLayout::tasklet_of(int rank) const {
  const auto it = std::find(rank_of_tasklet.begin(), rank_of_tasklet.end(), rank);
  if (it == rank_of_tasklet.end()) {
    throw ConfigError("rank " + std::to_string(rank) + " runs no tasklet of the pipeline");
  }
  const int index = static_cast<int>(it - rank_of_tasklet.begin());
  return {index / replicas, index % replicas};
}

std::vector<int> PipelineLayout::data_parallel_group(int stage) const {
  std::vector<int> group;
  for (int r = 0; r < replicas; ++r) group.push_back(rank(stage, r));
  return group;
}

std::vector<int> PipelineLayout::tie_group(int replica) const {
  if (stages == 1) return {rank(0, replica)};
  return {rank(0, replica), rank(stages - 1, replica)};
}

std::vector<int> PipelineLayout::pipeline_neighbours(int rank) const {
  const Tasklet t = tasklet_of(rank);
  std::vector<int> neighbours;
  const auto add = [&](int stage) { neighbours.push_back(this->rank(stage, t.replica)); };
  if (t.stage > 0) add(t.stage - 1);
  if (t.stage + 1 < stages) add(t.stage + 1);
  // Interleaved: the last stage hands each chunk's output to the first stage's next chunk (with
  // two stages they are neighbours already).
  if (chunks > 1 && stages > 2) {
    if (t.stage == 0) add(stages - 1);
    if (t.stage == stages - 1) add(0);
  }
  std::sort(neighbours.begin(), neighbours.end());
  return neighbours;
}

std::vector<int> PipelineLayout::world() const {
  std::vector<int> all(world_size());
  std::iota(all.begin(), all.end(), 0);
  return all;
}

}  // namespace tessel::stage
