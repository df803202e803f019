// PipelineLayout::pipeline_neighbours: the ranks whose links carry a replica's activations and
// their gradients (the links the transport warms, link_warmup.h), never a data-parallel peer.
#include <gtest/gtest.h>

#include <vector>

#include "noderuntime/stage/pipeline_layout.h"

namespace tessel::stage {
namespace {

TEST(PipelineNeighbours, AStagesNeighboursAreItsReplicasPreviousAndNextStage) {
  // 4 stages x 2 replicas, rank = replica x stages + stage.
  const PipelineLayout layout = PipelineLayout::standard(4, 2, 1, 8);
  EXPECT_EQ(layout.pipeline_neighbours(layout.rank(0, 0)), (std::vector<int>{1}));
  EXPECT_EQ(layout.pipeline_neighbours(layout.rank(1, 0)), (std::vector<int>{0, 2}));
  EXPECT_EQ(layout.pipeline_neighbours(layout.rank(3, 0)), (std::vector<int>{2}));
  EXPECT_EQ(layout.pipeline_neighbours(layout.rank(0, 1)), (std::vector<int>{5}));
  EXPECT_EQ(layout.pipeline_neighbours(layout.rank(2, 1)), (std::vector<int>{5, 7}));
}

TEST(PipelineNeighbours, InterleavedChunksJoinTheLastStageToTheFirst) {
  const PipelineLayout layout = PipelineLayout::standard(4, 1, 2, 8);
  EXPECT_EQ(layout.pipeline_neighbours(0), (std::vector<int>{1, 3}));
  EXPECT_EQ(layout.pipeline_neighbours(3), (std::vector<int>{0, 2}));
  EXPECT_EQ(layout.pipeline_neighbours(1), (std::vector<int>{0, 2}));
  // Two stages: the wrap-around is the other stage already.
  EXPECT_EQ(PipelineLayout::standard(2, 1, 2, 4).pipeline_neighbours(0), (std::vector<int>{1}));
}

TEST(PipelineNeighbours, OneStageHasNone) {
  const PipelineLayout layout = PipelineLayout::standard(1, 4, 1, 2);
  for (int rank = 0; rank < 4; ++rank) EXPECT_TRUE(layout.pipeline_neighbours(rank).empty());
}

}  // namespace
}  // namespace tessel::stage
