// Conditions as the API conventions keep them: one per type, the transition time moving only
// when the status flips, and no change reported when nothing changed.
#include "operator/controller/conditions.h"

#include <gtest/gtest.h>

namespace tessel::controller {
namespace {

using nlohmann::json;

TEST(Conditions, TransitionTimeMovesOnlyWhenTheStatusFlips) {
  json conditions;  // null: no status yet
  EXPECT_TRUE(set_condition(conditions, {"Placed", "False", "NotEnoughGPUs", "needs 4, 2 free"}, 1,
                            "2026-11-26T00:00:00Z"));
  ASSERT_EQ(conditions.size(), 1u);
  // The same again, later: nothing to write.
  EXPECT_FALSE(set_condition(conditions, {"Placed", "False", "NotEnoughGPUs", "needs 4, 2 free"}, 1,
                             "2026-11-26T00:05:00Z"));
  // A new message, same status: written, but the transition time stays.
  EXPECT_TRUE(set_condition(conditions, {"Placed", "False", "NotEnoughGPUs", "needs 4, 3 free"}, 1,
                            "2026-11-26T00:06:00Z"));
  EXPECT_EQ(conditions[0]["lastTransitionTime"], "2026-11-26T00:00:00Z");
  EXPECT_EQ(conditions[0]["message"], "needs 4, 3 free");
  // The status flips: the time moves, and a new generation is recorded.
  EXPECT_TRUE(set_condition(conditions, {"Placed", "True", "Placed", "4 GPUs in 2 clusters"}, 2,
                            "2026-11-26T00:07:00Z"));
  EXPECT_EQ(conditions[0]["lastTransitionTime"], "2026-11-26T00:07:00Z");
  EXPECT_EQ(conditions[0]["observedGeneration"], 2);
  // Another type is a second entry.
  EXPECT_TRUE(set_condition(conditions, {"Valid", "True", "Valid", ""}, 2, "2026-11-26T00:07:00Z"));
  EXPECT_EQ(conditions.size(), 2u);
  EXPECT_TRUE(condition_is_true(conditions, "Valid"));
  EXPECT_FALSE(condition_is_true(conditions, "Running"));
  EXPECT_EQ(find_condition(conditions, "Running"), nullptr);
}

TEST(Conditions, RefusesWhatTheSchemaWouldRefuse) {
  json conditions = json::array();
  EXPECT_THROW(set_condition(conditions, {"Ready", "Yes", "Ok", ""}, 1, "t"),
               std::invalid_argument);
  EXPECT_THROW(set_condition(conditions, {"Ready", "True", "not enough GPUs", ""}, 1, "t"),
               std::invalid_argument);
  EXPECT_TRUE(conditions.empty());
}

}  // namespace
}  // namespace tessel::controller
