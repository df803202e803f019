// Bottleneck matching against brute force over all n! pairings.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "placement/bottleneck_matching.h"

namespace tessel::placement {
namespace {

struct BruteForce {
  double value = std::numeric_limits<double>::infinity();
  double min_total_at_value = std::numeric_limits<double>::infinity();
};

double max_weight(const std::vector<double>& w, int n, const std::vector<int>& match_of_row) {
  double worst = -std::numeric_limits<double>::infinity();
  for (int r = 0; r < n; ++r) worst = std::max(worst, w[r * n + match_of_row[r]]);
  return worst;
}

double total_weight(const std::vector<double>& w, int n, const std::vector<int>& match_of_row) {
  double total = 0;
  for (int r = 0; r < n; ++r) total += w[r * n + match_of_row[r]];
  return total;
}

BruteForce brute_force(const std::vector<double>& w, int n) {
  std::vector<int> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  BruteForce best;
  do {
    best.value = std::min(best.value, max_weight(w, n, perm));
  } while (std::next_permutation(perm.begin(), perm.end()));
  do {
    if (max_weight(w, n, perm) <= best.value) {
      best.min_total_at_value = std::min(best.min_total_at_value, total_weight(w, n, perm));
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best;
}

bool is_permutation_of_size(std::vector<int> match_of_row, int n) {
  if (static_cast<int>(match_of_row.size()) != n) return false;
  std::sort(match_of_row.begin(), match_of_row.end());
  for (int i = 0; i < n; ++i) {
    if (match_of_row[i] != i) return false;
  }
  return true;
}

std::vector<double> random_matrix(int n, std::mt19937& rng) {
  std::uniform_real_distribution<double> weight(0.1, 10.0);
  std::vector<double> w(n * n);
  for (double& x : w) x = weight(rng);
  return w;
}

// Few distinct values: many ties, several bottleneck-optimal pairings.
std::vector<double> tied_matrix(int n, std::mt19937& rng) {
  std::uniform_int_distribution<int> weight(0, 3);
  std::vector<double> w(n * n);
  for (double& x : w) x = weight(rng);
  return w;
}

// ws is reused across calls, as the cost model does.
void expect_matches_brute_force(const std::vector<double>& w, int n, BottleneckWorkspace& ws) {
  const BruteForce expected = brute_force(w, n);
  EXPECT_EQ(bottleneck_matching_value(w.data(), n, ws), expected.value);
  const BottleneckMatch match = bottleneck_matching(w.data(), n);
  EXPECT_EQ(match.value, expected.value);
  ASSERT_TRUE(is_permutation_of_size(match.match_of_row, n));
  EXPECT_EQ(max_weight(w, n, match.match_of_row), expected.value);
  EXPECT_NEAR(match.total_weight, expected.min_total_at_value, 1e-9);
  EXPECT_NEAR(total_weight(w, n, match.match_of_row), match.total_weight, 1e-12);
}

TEST(BottleneckMatching, EqualsBruteForceOnRandomWeights) {
  std::mt19937 rng(20220509);
  BottleneckWorkspace ws;
  for (int n = 1; n <= 8; ++n) {
    const int instances = n <= 6 ? 200 : (n == 7 ? 60 : 20);
    for (int i = 0; i < instances; ++i) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " instance " << i);
      expect_matches_brute_force(random_matrix(n, rng), n, ws);
    }
  }
}

TEST(BottleneckMatching, EqualsBruteForceWithTies) {
  std::mt19937 rng(7);
  BottleneckWorkspace ws;
  for (int n = 1; n <= 8; ++n) {
    const int instances = n <= 6 ? 200 : (n == 7 ? 60 : 20);
    for (int i = 0; i < instances; ++i) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " instance " << i);
      expect_matches_brute_force(tied_matrix(n, rng), n, ws);
    }
  }
}

TEST(BottleneckMatching, BeatsGreedyCheapestEdgeFirst) {
  // Greedy takes the diagonal 1s first and is then forced onto w[n-1][n-1] = 100; the cyclic
  // shift row r -> column r+1 keeps every edge at most 3.
  const int n = 8;
  std::vector<double> w(n * n, 100.0);
  for (int r = 0; r + 1 < n; ++r) {
    w[r * n + r] = 1;
    w[r * n + r + 1] = 2;
  }
  w[(n - 1) * n] = 3;
  const BottleneckMatch match = bottleneck_matching(w.data(), n);
  EXPECT_EQ(match.value, 3);
  for (int r = 0; r < n; ++r) EXPECT_EQ(match.match_of_row[r], (r + 1) % n);
  EXPECT_EQ(match.total_weight, 2 * (n - 1) + 3);
  BottleneckWorkspace ws;
  expect_matches_brute_force(w, n, ws);
}

TEST(BottleneckMatching, ValueAboveTheRowAndColumnBound) {
  // Rows 1 and 2 are only cheap in column 0, which only one of them can take: the row/column
  // bound says 5, the answer is 8.
  const std::vector<double> w = {1, 5, 5,  //
                                 1, 8, 8,  //
                                 1, 8, 8};
  BottleneckWorkspace ws;
  EXPECT_EQ(bottleneck_matching_value(w.data(), 3, ws), 8);
  expect_matches_brute_force(w, 3, ws);
}

void expect_sane_large(int n, std::mt19937& rng) {
  const std::vector<double> w = random_matrix(n, rng);
  double lower = -std::numeric_limits<double>::infinity();
  for (int r = 0; r < n; ++r) {
    lower = std::max(lower, *std::min_element(w.begin() + r * n, w.begin() + (r + 1) * n));
  }
  std::vector<int> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  const BottleneckMatch match = bottleneck_matching(w.data(), n);
  EXPECT_GE(match.value, lower);
  EXPECT_LE(match.value, max_weight(w, n, identity));
  ASSERT_TRUE(is_permutation_of_size(match.match_of_row, n));
  EXPECT_EQ(max_weight(w, n, match.match_of_row), match.value);
  // Minimal: forbidding every edge at the value leaves no perfect matching.
  std::vector<double> without = w;
  for (double& x : without) {
    if (x >= match.value) x = 1e9;
  }
  BottleneckWorkspace ws;
  EXPECT_EQ(bottleneck_matching_value(without.data(), n, ws), 1e9);
}

TEST(BottleneckMatching, LargeInstancesAreSane) {
  std::mt19937 rng(32);
  for (int i = 0; i < 20; ++i) expect_sane_large(32, rng);
  for (int i = 0; i < 5; ++i) expect_sane_large(64, rng);
}

TEST(BottleneckMatching, RejectsSizesOutOfRange) {
  BottleneckWorkspace ws;
  const std::vector<double> w(65 * 65, 1.0);
  EXPECT_THROW(bottleneck_matching_value(w.data(), 0, ws), std::invalid_argument);
  EXPECT_THROW(bottleneck_matching_value(w.data(), 65, ws), std::invalid_argument);
  EXPECT_THROW(bottleneck_matching(w.data(), 0), std::invalid_argument);
}

}  // namespace
}  // namespace tessel::placement
