// Where the tasklets of a job run: P pipeline stages x D data-parallel replicas, each
// (stage, replica) one communicator rank, each stage holding v model chunks (interleaving),
// and which layers each of the P v virtual stages holds. Rank p's chunk c is virtual stage
// c P + p (placement/schedule.h).
//
// Groups of ranks for the collectives, each in ring order:
// - data-parallel group of a stage: that stage's rank in every replica, replica order;
// - tie group of a replica: its first and last stage, which sum their copies of the tied
//   token table (with one stage: that stage alone);
// - world: every rank, 0 .. P D - 1.
#pragma once

#include <vector>

#include "noderuntime/stage/gpt_config.h"

namespace tessel::stage {

struct PipelineLayout {
  int stages = 1;                    // P
  int replicas = 1;                  // D
  int chunks = 1;                    // v, model chunks per stage
  std::vector<int> layer_split;      // P v entries: layers of each virtual stage, in order
  std::vector<int> rank_of_tasklet;  // index stage * D + replica -> communicator rank

  // Ranks r = replica * P + stage (the launcher's default), the layers split evenly.
  static PipelineLayout standard(int stages, int replicas, int chunks, int layers);

  // Throws ConfigError naming the field when counts are below 1, the split does not match
  // P v virtual stages of at least one layer summing to config.layers, or the rank map is not
  // a permutation of 0 .. P D - 1.
  void validate(const GptConfig& config) const;

  int world_size() const { return stages * replicas; }
  int virtual_stages() const { return stages * chunks; }
  int rank(int stage, int replica) const { return rank_of_tasklet[stage * replicas + replica]; }
  // The (stage, replica) of a rank. Throws ConfigError when the rank is not in the map.
  struct Tasklet {
    int stage = 0;
    int replica = 0;
  };
  Tasklet tasklet_of(int rank) const;

  std::vector<int> data_parallel_group(int stage) const;
  // The ranks that hold a copy of the tied token table in one replica: its first and last
  // stage (one rank when there is one stage). They sum their copies' gradients.
  std::vector<int> tie_group(int replica) const;
  // The ranks `rank` exchanges activations and their gradients with: its replica's previous and
  // next stage, and with several chunks per stage (interleaved) the last and first stage too.
  // In rank order.
  std::vector<int> pipeline_neighbours(int rank) const;
  std::vector<int> world() const;
};

}  // namespace tessel::stage
