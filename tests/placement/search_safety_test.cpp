// The search under faults and limits: an exception in a worker thread reaches the caller (every
// thread joined, nothing calls terminate), options out of their limits are refused before
// anything runs, and a cancelled search returns the best placement it has found.
#include <dirent.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>

#include "placement/cost_model.h"
#include "placement/paper_cost.h"
#include "placement/search.h"
#include "test_topologies.h"

namespace tessel::placement {
namespace {

// The threads of this process now.
int thread_count() {
  int count = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (const dirent* entry = readdir(dir))
      if (entry->d_name[0] != '.') ++count;
    closedir(dir);
  }
  return count;
}

// A cost model that fails on its throw_at-th evaluation (from whichever thread makes it), and
// can cancel the search on its cancel_at-th.
class FaultyModel : public CostModel {
 public:
  FaultyModel(const Topology& topology, PartitionShape shape, long throw_at)
      : CostModel(topology, shape), throw_at_(throw_at) {}
  std::string name() const override { return "faulty"; }
  double cost(const Groups& groups, CostScratch&) const override {
    const long call = calls.fetch_add(1) + 1;
    if (throw_at_ > 0 && call >= throw_at_)
      throw std::runtime_error("the cost model failed at evaluation " + std::to_string(call));
    if (cancel_at > 0 && call >= cancel_at && cancel) cancel->store(true);
    double c = 0;
    for (size_t g = 0; g < groups.size(); ++g) c += double(g + 1) * groups[g].back();
    return c;
  }
  Evaluation evaluate(const Groups&) const override { return {}; }

  mutable std::atomic<long> calls{0};
  long cancel_at = 0;
  std::atomic<bool>* cancel = nullptr;

 private:
  long throw_at_;
};

class SearchWorkers : public ::testing::TestWithParam<Strategy> {};

TEST_P(SearchWorkers, AnExceptionInAWorkerReachesTheCallerWithItsMessage) {
  // 12 devices in 4 groups: 15400 partitions, few enough for the exhaustive search.
  const Topology t = testing::small_geo(12, 4, 3);
  const int before = thread_count();
  for (int threads : {1, 4}) {
    FaultyModel model(t, {4, 3}, /*throw_at=*/40);
    SearchOptions options;
    options.strategy = GetParam();
    options.threads = threads;
    options.population = 20;
    options.evaluations = 400;
    try {
      search_placement(model, options);
      FAIL() << "no exception with " << threads << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("the cost model failed at evaluation"),
                std::string::npos)
          << e.what();
    }
    // The workers stopped taking candidates once one failed: at most the batch in flight ran.
    EXPECT_LT(model.calls.load(), 40 + 1024) << threads << " threads";
  }
  EXPECT_EQ(thread_count(), before) << "a search thread is still running";
}

INSTANTIATE_TEST_SUITE_P(Strategies, SearchWorkers,
                         ::testing::Values(Strategy::Evolutionary, Strategy::Random,
                                           Strategy::KernighanLin, Strategy::Exhaustive),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(SearchLimits, OptionsOutsideTheirLimitsAreRefusedNamingTheValueAndTheLimit) {
  const Topology t = testing::small_geo(8, 2, 1);
  FaultyModel model(t, {2, 4}, 0);
  auto refused = [&](SearchOptions o, const std::string& part) {
    try {
      search_placement(model, o);
      ADD_FAILURE() << "accepted; expected a refusal naming '" << part << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  SearchOptions o;
  o.evaluations = 2'000'000'000;
  refused(o, "evaluations: 2000000000 is not in 1..10000000");
  o.evaluations = -5;
  refused(o, "evaluations: -5");
  o.evaluations = 0;
  refused(o, "give an evaluation budget or a time limit");
  o = {};
  o.time_limit_s = NAN;
  refused(o, "time limit: nan");
  o.time_limit_s = INFINITY;
  refused(o, "time limit: inf");
  o.time_limit_s = -1;
  refused(o, "time limit: -1");
  o.time_limit_s = 1e9;
  refused(o, "0..86400");
  o = {};
  o.threads = 100000;
  refused(o, "threads: 100000 is not in 0..1024");
  o = {};
  o.population = 1;
  refused(o, "population: 1 is not in 2..100000");
  o.population = 1 << 30;
  refused(o, "population: 1073741824");
  o = {};
  o.swap_trials = std::numeric_limits<long>::max();
  refused(o, "swap trials");
  o = {};
  o.crossover_points = -1;
  refused(o, "crossover points: -1");
  EXPECT_EQ(model.calls.load(), 0) << "a refused search evaluated candidates";
  EXPECT_NO_THROW(check_search_options(SearchOptions{}));
}

TEST(SearchLimits, AShapeWhoseDeviceCountOverflowsIsRefusedNotWrapped) {
  const PartitionShape wraps{4, 1073741825};  // 4 x 1073741825 = 4 (mod 2^32)
  try {
    (void)wraps.devices();
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("4 stages x 1073741825 replicas = 4294967300"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)PartitionShape({65536, 65536}).devices(), std::invalid_argument);
  EXPECT_THROW((void)PartitionShape({-1, 4}).devices(), std::invalid_argument);
  EXPECT_EQ(PartitionShape({8, 8}).devices(), 64);
  // The cost models are built on the checked count: no vector of a wrapped size.
  const Topology t = testing::small_geo(4, 2, 1);
  EXPECT_THROW(PaperCostModel(t, wraps, {0.65, 0.47125}), std::invalid_argument);
}

class SearchCancel : public ::testing::TestWithParam<Strategy> {};

// Cancelled in the middle of a large budget (by the cost model itself, so the moment does not
// depend on timing), the search returns promptly with its best placement so far.
TEST_P(SearchCancel, ReturnsTheBestPlacementFoundSoFar) {
  const Topology t = testing::small_geo(16, 4, 3);
  std::atomic<bool> cancel{false};
  FaultyModel model(t, {4, 4}, 0);
  model.cancel = &cancel;
  model.cancel_at = 300;
  SearchOptions options;
  options.strategy = GetParam();
  options.threads = 2;
  options.population = 20;
  options.evaluations = kMaxSearchEvaluations;
  options.cancel = &cancel;
  const SearchResult r = search_placement(model, options);
  EXPECT_TRUE(r.interrupted);
  EXPECT_GE(r.evaluations, 300);
  EXPECT_LT(r.evaluations, 300 + 2048) << "the search went on after the cancel";
  ASSERT_EQ(r.best.size(), 16u);
  EXPECT_NO_THROW(check_balanced(r.best, {4, 4}));
  EXPECT_TRUE(std::isfinite(r.best_cost));
}

INSTANTIATE_TEST_SUITE_P(Strategies, SearchCancel,
                         ::testing::Values(Strategy::Evolutionary, Strategy::Random,
                                           Strategy::KernighanLin),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(SearchCancel, ACancelBeforeTheStartStillEvaluatesOneBatch) {
  const Topology t = testing::small_geo(12, 4, 1);  // 15400 partitions: 16 exhaustive chunks
  const PaperCostModel model(t, {4, 3}, {0.65, 0.47125});
  std::atomic<bool> cancel{true};
  for (Strategy s : {Strategy::Evolutionary, Strategy::Random, Strategy::Exhaustive}) {
    SearchOptions options;
    options.strategy = s;
    options.cancel = &cancel;
    const SearchResult r = search_placement(model, options);
    EXPECT_TRUE(r.interrupted) << to_string(s);
    EXPECT_GT(r.evaluations, 0) << to_string(s);
    EXPECT_LE(r.evaluations, 1024) << to_string(s);
    EXPECT_EQ(r.best.size(), 12u) << to_string(s);
  }
  SearchOptions not_cancelled;
  not_cancelled.evaluations = 50;
  std::atomic<bool> never{false};
  not_cancelled.cancel = &never;
  const SearchResult r = search_placement(model, not_cancelled);
  EXPECT_FALSE(r.interrupted);
  EXPECT_EQ(r.evaluations, 50);
}

TEST(SearchCancel, ProgressCarriesTheBudgetForAnEstimate) {
  const Topology t = testing::small_geo(8, 2, 1);
  const PaperCostModel model(t, {2, 4}, {0.65, 0.47125});
  SearchOptions options;
  options.evaluations = 200;
  long budget = -1, seen = 0;
  options.progress = [&](const SearchProgress& p) {
    budget = p.budget;
    seen = p.evaluations;
  };
  search_placement(model, options);
  EXPECT_EQ(budget, 200);
  EXPECT_EQ(seen, 200);
  options.evaluations = 0;
  options.time_limit_s = 0.05;
  search_placement(model, options);
  EXPECT_EQ(budget, 0) << "a time-limited search has no evaluation budget";
}

}  // namespace
}  // namespace tessel::placement
