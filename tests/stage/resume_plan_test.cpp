// The plan of a resume from per-rank dirs (resume_plan.h), from inventories given by hand: the
// newest step every stage holds, the sources of the ranks without it spread over the holders,
// a fresh start only when no rank found anything, the errors naming the ranks; and the
// inventories' exchange over real sockets, steps of 64 bits intact.
#include "noderuntime/stage/resume_plan.h"

#include <gtest/gtest.h>

#include <thread>

#include "noderuntime/stage/checkpoint.h"
#include "stage_test_support.h"

namespace tessel::stage {
namespace {

// 2 stages x 3 replicas: rank r = replica x 2 + stage.
const PipelineLayout kLayout = PipelineLayout::standard(2, 3, 1, 4);

RankInventory holding(std::vector<int64_t> steps) { return {false, true, std::move(steps)}; }

std::string error_of(const std::vector<RankInventory>& ranks) {
  try {
    plan_resume(kLayout, ranks, "/ckpt", CheckpointDirs::kPerRank);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

TEST(ResumePlan, TheNewestStepEveryStageHoldsAndPeersForTheRanksWithoutIt) {
  // Stage 0 (ranks 0, 2, 4) holds 8 in ranks 2 and 4, never 10; stage 1 (ranks 1, 3, 5) holds
  // 8 in ranks 1 and 5.
  const ResumePlan plan = plan_resume(kLayout,
                                      {holding({6}), holding({10, 8, 6}), holding({8, 6}),
                                       holding({6}), holding({8}), holding({8, 6})},
                                      "/ckpt", CheckpointDirs::kPerRank);
  ASSERT_EQ(plan.step, 8);
  // Rank 0 from the first holder of stage 0 (rank 2), rank 3 from stage 1's (rank 1).
  EXPECT_EQ(plan.source, (std::vector<int>{2, 1, 2, 1, 4, 5}));
}

TEST(ResumePlan, ReceiversAreSpreadOverTheHolders) {
  const PipelineLayout layout = PipelineLayout::standard(1, 5, 1, 4);
  const ResumePlan plan =
      plan_resume(layout, {holding({4}), holding({}), holding({4}), holding({}), RankInventory{}},
                  "/ckpt", CheckpointDirs::kPerRank);
  ASSERT_EQ(plan.step, 4);
  EXPECT_EQ(plan.source, (std::vector<int>{0, 0, 2, 2, 0}));
}

TEST(ResumePlan, NothingAnywhereIsAFreshStartButSomethingUnusableIsNot) {
  const std::vector<RankInventory> none(6);
  const ResumePlan fresh = plan_resume(kLayout, none, "/ckpt", CheckpointDirs::kPerRank);
  EXPECT_EQ(fresh.step, std::nullopt);
  EXPECT_EQ(fresh.source, (std::vector<int>{0, 1, 2, 3, 4, 5}));

  std::vector<RankInventory> skipped = none;
  skipped[3].found_any = true;  // a dir with only a damaged step
  EXPECT_EQ(error_of(skipped),
            "resume: no checkpoint step at which every stage has a verified state "
            "(checkpoint.shared: false, each rank's own /ckpt): no rank holds a state of stage 0, "
            "1. The ranks hold: rank 0 (stage 0 replica 0): none; rank 1 (stage 1 replica 0): "
            "none; rank 2 (stage 0 replica 1): none; rank 3 (stage 1 replica 1): none; rank 4 "
            "(stage 0 replica 2): none; rank 5 (stage 1 replica 2): none (each rank's lines "
            "above name what it skipped). Restore the lost checkpoints, or start afresh (resume: "
            "false, or another checkpoint dir)");
}

TEST(ResumePlan, StagesWhoseStepsDoNotMeetAreAnErrorNamingEveryRanksSteps) {
  const std::string error = error_of(
      {holding({4}), holding({6}), holding({4, 2}), RankInventory{}, holding({}), holding({6})});
  EXPECT_NE(error.find("the stages' steps do not meet. The ranks hold: rank 0 (stage 0 replica "
                       "0): step 4; rank 1 (stage 1 replica 0): step 6; rank 2 (stage 0 replica "
                       "1): steps 4, 2; rank 3 (stage 1 replica 1): none;"),
            std::string::npos)
      << error;
}

TEST(ResumePlan, AFailedRankIsNamed) {
  std::vector<RankInventory> ranks(6, holding({2}));
  ranks[1].failed = true;
  ranks[4].failed = true;
  EXPECT_EQ(error_of(ranks),
            "resume: not starting: rank 1 (stage 1 replica 0), rank 4 (stage 0 replica 2) could "
            "not take the inventory of its checkpoint folder (its error says why)");
}

TEST(ResumePlan, InventoriesTravelToEveryRankIntact) {
  const PipelineLayout layout = PipelineLayout::standard(2, 2, 1, 4);
  const std::vector<RankInventory> mine = {
      holding({(int64_t{1} << 62) + 12345, 7}), RankInventory{}, {true, false, {}}, holding({3})};
  testing::Comms comms = testing::connect_ranks(testing::tasklet_labels(layout));
  std::vector<std::vector<RankInventory>> got(4);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 4; ++rank) {
    threads.emplace_back(
        [&, rank] { got[rank] = exchange_inventories(*comms[rank], layout, mine[rank]); });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(got[rank], mine) << "rank " << rank;
}

}  // namespace
}  // namespace tessel::stage
