// Bottleneck perfect matching between two equal-sized groups of devices: the coarsened-graph
// edge between two data-parallel groups (spec dtfm-scheduler.md, section 2, paper eq. 3).
//
// w is an n x n row-major matrix: w[r * n + c] is the weight (one-way transfer time) between
// member r of group A and member c of group B. The bottleneck value is
//     min over perfect matchings M of  max over (r, c) in M of w[r * n + c].
// Weights must be finite; n must lie in [1, kMaxBottleneckSize].
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace tessel::placement {

inline constexpr int kMaxBottleneckSize = 64;  // one uint64_t adjacency mask per row

// Scratch buffers for bottleneck_matching_value, sized for the largest n so that repeated
// calls allocate nothing. Reuse one per thread; the contents between calls mean nothing.
struct BottleneckWorkspace {
  std::array<double, kMaxBottleneckSize * kMaxBottleneckSize> candidates;  // thresholds
  std::array<std::uint64_t, kMaxBottleneckSize> adjacency;  // row r: columns with w <= t
  std::array<int, kMaxBottleneckSize> row_of_col;           // trial matching, -1 = free
  std::array<int, kMaxBottleneckSize> base_row_of_col;      // matching valid at every
                                                            // threshold still to be tried
};

// The bottleneck value only: the threshold search with warm-started augmenting paths on
// bitmask adjacency. No heap allocation; measured (one core of an AMD EPYC, -O2) about
// 0.4-0.6 us per call at n = 8 and 5-7 us at n = 32. Throws std::invalid_argument for n out
// of range.
double bottleneck_matching_value(const double* w, int n, BottleneckWorkspace& ws);

struct BottleneckMatch {
  double value = 0;               // the bottleneck value
  double total_weight = 0;        // sum of the matched weights
  std::vector<int> match_of_row;  // row r is paired with column match_of_row[r]
};

// The bottleneck value and a pairing that achieves it; among all pairings achieving it, one
// of minimum total weight (min-cost assignment over the edges with weight <= value, O(n^3)).
// Meant for reporting a placement, not for the cost model's inner loop.
BottleneckMatch bottleneck_matching(const double* w, int n);

}  // namespace tessel::placement
