// Open path and cycle over the coarsened graph: Held-Karp against brute force over all
// orderings, the local search against Held-Karp and a naive baseline.
#include "placement/open_path.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

namespace tessel::placement {
namespace {

std::vector<double> random_symmetric(int g, std::mt19937& rng) {
  std::uniform_real_distribution<double> weight(0.01, 2.0);
  std::vector<double> h(g * g, 0.0);
  for (int a = 0; a < g; ++a) {
    for (int b = a + 1; b < g; ++b) h[a * g + b] = h[b * g + a] = weight(rng);
  }
  return h;
}

// Points in the plane: closer to the geography-driven graphs the placement produces.
std::vector<double> random_euclidean(int g, std::mt19937& rng) {
  std::uniform_real_distribution<double> coordinate(0.0, 1.0);
  std::vector<double> x(g), y(g), h(g * g);
  for (int a = 0; a < g; ++a) {
    x[a] = coordinate(rng);
    y[a] = coordinate(rng);
  }
  for (int a = 0; a < g; ++a) {
    for (int b = 0; b < g; ++b) h[a * g + b] = std::hypot(x[a] - x[b], y[a] - y[b]);
  }
  return h;
}

std::vector<int> identity(int g) {
  std::vector<int> order(g);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

double brute_force_path(const std::vector<double>& h, int g) {
  std::vector<int> order = identity(g);
  double best = std::numeric_limits<double>::infinity();
  do {
    best = std::min(best, path_length(h.data(), g, order));
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

double brute_force_cycle(const std::vector<double>& h, int g) {
  std::vector<int> order = identity(g);
  double best = std::numeric_limits<double>::infinity();
  do {
    best = std::min(best, cycle_length(h.data(), g, order));
  } while (std::next_permutation(order.begin() + 1, order.end()));
  return best;
}

bool is_permutation_of_size(std::vector<int> order, int g) {
  std::sort(order.begin(), order.end());
  return order == identity(g);
}

void expect_valid(const PathResult& result, const std::vector<double>& h, int g, bool cycle) {
  ASSERT_TRUE(is_permutation_of_size(result.order, g));
  const double length =
      cycle ? cycle_length(h.data(), g, result.order) : path_length(h.data(), g, result.order);
  EXPECT_EQ(result.length, length);
}

const PathSearchOptions kLocalSearchOnly = {.exact_max_nodes = 0};

TEST(OpenPath, HeldKarpEqualsBruteForce) {
  OpenPathWorkspace ws;
  for (int seed = 1; seed <= 6; ++seed) {
    std::mt19937 rng(seed);
    for (int g = 1; g <= 8; ++g) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " g=" << g);
      const std::vector<double> h = random_symmetric(g, rng);
      const PathResult result = shortest_open_path(h.data(), g, ws);
      expect_valid(result, h, g, false);
      EXPECT_NEAR(result.length, brute_force_path(h, g), 1e-12);
      EXPECT_LE(result.order.front(), result.order.back());
    }
  }
}

TEST(Cycle, HeldKarpEqualsBruteForce) {
  OpenPathWorkspace ws;
  for (int seed = 1; seed <= 6; ++seed) {
    std::mt19937 rng(seed);
    for (int g = 1; g <= 8; ++g) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " g=" << g);
      const std::vector<double> h = random_symmetric(g, rng);
      const PathResult result = shortest_cycle(h.data(), g, ws);
      expect_valid(result, h, g, true);
      EXPECT_NEAR(result.length, brute_force_cycle(h, g), 1e-12);
      EXPECT_EQ(result.order.front(), 0);
    }
  }
}

TEST(OpenPath, SmallCases) {
  OpenPathWorkspace ws;
  const std::vector<double> one = {5.0};
  EXPECT_EQ(shortest_open_path(one.data(), 1, ws).length, 0);
  EXPECT_EQ(shortest_open_path(one.data(), 1, ws).order, std::vector<int>{0});
  EXPECT_EQ(shortest_cycle(one.data(), 1, ws).length, 0);
  const std::vector<double> two = {0, 3, 3, 0};
  EXPECT_EQ(shortest_open_path(two.data(), 2, ws).length, 3);
  EXPECT_EQ(shortest_cycle(two.data(), 2, ws).length, 6);  // there and back
  EXPECT_EQ(shortest_open_path(two.data(), 2, ws, kLocalSearchOnly).length, 3);
  EXPECT_EQ(shortest_cycle(two.data(), 2, ws, kLocalSearchOnly).length, 6);
  EXPECT_THROW(shortest_open_path(one.data(), 0, ws), std::invalid_argument);
  EXPECT_THROW(shortest_cycle(one.data(), 0, ws), std::invalid_argument);
}

TEST(OpenPath, DiagonalIsIgnored) {
  OpenPathWorkspace ws;
  std::mt19937 rng(4);
  for (int g : {6, 20}) {
    const std::vector<double> h = random_symmetric(g, rng);
    for (double diagonal : {1e6, std::numeric_limits<double>::quiet_NaN()}) {
      std::vector<double> odd = h;
      for (int a = 0; a < g; ++a) odd[a * g + a] = diagonal;
      const PathResult path = shortest_open_path(odd.data(), g, ws);
      EXPECT_EQ(path.order, shortest_open_path(h.data(), g, ws).order);
      EXPECT_EQ(path.length, shortest_open_path(h.data(), g, ws).length);
      EXPECT_EQ(shortest_cycle(odd.data(), g, ws).order, shortest_cycle(h.data(), g, ws).order);
    }
  }
}

// Spec section 6, item 13: with all edges equal the reference prints 0..7; so do we, exact
// and heuristic alike.
TEST(OpenPath, AllEdgesEqualGiveTheIdentityOrder) {
  OpenPathWorkspace ws;
  for (int g : {3, 8, 20}) {
    const std::vector<double> h(g * g, 0.25);
    EXPECT_EQ(shortest_open_path(h.data(), g, ws).order, identity(g)) << "g=" << g;
    EXPECT_EQ(shortest_cycle(h.data(), g, ws).order, identity(g)) << "g=" << g;
    EXPECT_EQ(shortest_open_path(h.data(), g, ws, kLocalSearchOnly).order, identity(g));
    EXPECT_EQ(shortest_cycle(h.data(), g, ws, kLocalSearchOnly).order, identity(g));
  }
}

TEST(OpenPath, LocalSearchNeverWorseThanIdentityOrder) {
  OpenPathWorkspace ws;
  std::mt19937 rng(17);
  for (int g = 17; g <= 40; ++g) {
    SCOPED_TRACE(testing::Message() << "g=" << g);
    for (const std::vector<double>& h : {random_symmetric(g, rng), random_euclidean(g, rng)}) {
      const PathResult path = shortest_open_path(h.data(), g, ws);
      expect_valid(path, h, g, false);
      EXPECT_LE(path.length, path_length(h.data(), g, identity(g)));
      const PathResult cycle = shortest_cycle(h.data(), g, ws);
      expect_valid(cycle, h, g, true);
      EXPECT_LE(cycle.length, cycle_length(h.data(), g, identity(g)));
    }
  }
}

// The local search is not exact; on small instances it should almost always find the optimum.
TEST(OpenPath, LocalSearchUsuallyMatchesHeldKarp) {
  OpenPathWorkspace ws;
  std::mt19937 rng(12);
  int instances = 0, path_optimal = 0, cycle_optimal = 0;
  double worst_ratio = 1;
  for (int g = 4; g <= 12; ++g) {
    for (int i = 0; i < 20; ++i) {
      const std::vector<double> h = i % 2 ? random_symmetric(g, rng) : random_euclidean(g, rng);
      const double exact_path = shortest_open_path(h.data(), g, ws).length;
      const double exact_cycle = shortest_cycle(h.data(), g, ws).length;
      const double path = shortest_open_path(h.data(), g, ws, kLocalSearchOnly).length;
      const double cycle = shortest_cycle(h.data(), g, ws, kLocalSearchOnly).length;
      EXPECT_GE(path, exact_path - 1e-12);
      EXPECT_GE(cycle, exact_cycle - 1e-12);
      ++instances;
      path_optimal += path <= exact_path + 1e-12;
      cycle_optimal += cycle <= exact_cycle + 1e-12;
      worst_ratio = std::max({worst_ratio, path / exact_path, cycle / exact_cycle});
    }
  }
  std::printf("local search optimal on g=4..12: path %d/%d, cycle %d/%d, worst ratio %.4f\n",
              path_optimal, instances, cycle_optimal, instances, worst_ratio);
  EXPECT_GE(path_optimal, instances * 9 / 10);
  EXPECT_GE(cycle_optimal, instances * 9 / 10);
}

TEST(OpenPath, HeldKarpAtSixteenNodesBeatsOrTiesLocalSearch) {
  OpenPathWorkspace ws;
  std::mt19937 rng(16);
  const std::vector<double> h = random_symmetric(16, rng);
  const PathResult exact = shortest_open_path(h.data(), 16, ws);
  expect_valid(exact, h, 16, false);
  EXPECT_LE(exact.length, shortest_open_path(h.data(), 16, ws, kLocalSearchOnly).length + 1e-12);
  const PathResult exact_cycle = shortest_cycle(h.data(), 16, ws);
  expect_valid(exact_cycle, h, 16, true);
  EXPECT_LE(exact_cycle.length, shortest_cycle(h.data(), 16, ws, kLocalSearchOnly).length + 1e-12);
}

TEST(OpenPath, DeterministicForAGivenSeed) {
  std::mt19937 rng(3);
  const int g = 30;
  const std::vector<double> h = random_symmetric(g, rng);
  OpenPathWorkspace first_ws, second_ws;
  for (std::uint64_t seed : {1u, 2u, 99u}) {
    const PathSearchOptions options = {.seed = seed};
    const PathResult a = shortest_open_path(h.data(), g, first_ws, options);
    const PathResult b = shortest_open_path(h.data(), g, second_ws, options);
    EXPECT_EQ(a.order, b.order);
    EXPECT_EQ(a.length, b.length);
    EXPECT_EQ(shortest_cycle(h.data(), g, first_ws, options).order,
              shortest_cycle(h.data(), g, second_ws, options).order);
  }
  const std::vector<double> small = random_symmetric(10, rng);
  EXPECT_EQ(shortest_open_path(small.data(), 10, first_ws).order,
            shortest_open_path(small.data(), 10, second_ws).order);
}

}  // namespace
}  // namespace tessel::placement
