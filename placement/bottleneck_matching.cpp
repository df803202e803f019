#include "placement/bottleneck_matching.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>
#include <string>

namespace tessel::placement {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

void check_size(int n) {
  if (n < 1 || n > kMaxBottleneckSize) {
    throw std::invalid_argument("bottleneck matching: size " + std::to_string(n) + " outside [1, " +
                                std::to_string(kMaxBottleneckSize) + "]");
  }
}

// Kuhn's augmenting path from `row` over the columns not yet in `visited`.
bool augment(int row, const std::uint64_t* adjacency, int* row_of_col, std::uint64_t& visited) {
  std::uint64_t open = adjacency[row] & ~visited;
  while (open != 0) {
    const int col = std::countr_zero(open);
    const std::uint64_t bit = std::uint64_t{1} << col;
    open &= ~bit;
    visited |= bit;
    if (row_of_col[col] < 0 || augment(row_of_col[col], adjacency, row_of_col, visited)) {
      row_of_col[col] = row;
      return true;
    }
  }
  return false;
}

// Whether the edges with weight <= threshold hold a perfect matching. Starts from
// ws.base_row_of_col (whose edges must all lie under the threshold) and leaves the matching
// it reached in ws.row_of_col.
bool perfect_matching_exists(const double* w, int n, double threshold, BottleneckWorkspace& ws) {
  for (int r = 0; r < n; ++r) {
    std::uint64_t mask = 0;
    for (int c = 0; c < n; ++c) {
      mask |= std::uint64_t{w[r * n + c] <= threshold} << c;
    }
    ws.adjacency[r] = mask;
  }
  std::copy_n(ws.base_row_of_col.begin(), n, ws.row_of_col.begin());
  std::uint64_t matched_rows = 0;
  for (int c = 0; c < n; ++c) {
    if (ws.row_of_col[c] >= 0) matched_rows |= std::uint64_t{1} << ws.row_of_col[c];
  }
  // A row with no augmenting path now never gets one later in Kuhn's algorithm, so the first
  // failure decides; visited columns stay valid until the matching changes.
  std::uint64_t visited = 0;
  for (int r = 0; r < n; ++r) {
    if ((matched_rows >> r) & 1) continue;
    if (!augment(r, ws.adjacency.data(), ws.row_of_col.data(), visited)) return false;
    visited = 0;
  }
  return true;
}

// Min-cost perfect assignment over the edges with weight <= limit (Hungarian method with
// potentials, O(n^3)); such an assignment must exist. Returns the column of each row.
std::vector<int> min_cost_assignment_under(const double* w, int n, double limit) {
  // 1-based rows and columns; column 0 is the virtual start of each shortest-path search.
  std::vector<double> u(n + 1, 0), v(n + 1, 0), min_reduced(n + 1);
  std::vector<int> row_of_col(n + 1, 0), way(n + 1, 0);
  std::vector<char> used(n + 1);
  for (int row = 1; row <= n; ++row) {
    row_of_col[0] = row;
    int col0 = 0;
    std::fill(min_reduced.begin(), min_reduced.end(), kInfinity);
    std::fill(used.begin(), used.end(), 0);
    do {
      used[col0] = 1;
      const int row0 = row_of_col[col0];
      double delta = kInfinity;
      int col1 = 0;
      for (int col = 1; col <= n; ++col) {
        if (used[col]) continue;
        const double weight = w[(row0 - 1) * n + (col - 1)];
        if (weight <= limit) {
          const double reduced = weight - u[row0] - v[col];
          if (reduced < min_reduced[col]) {
            min_reduced[col] = reduced;
            way[col] = col0;
          }
        }
        if (min_reduced[col] < delta) {
          delta = min_reduced[col];
          col1 = col;
        }
      }
      // A perfect matching exists under the limit, so an augmenting path always does.
      if (col1 == 0) throw std::logic_error("min_cost_assignment_under: no perfect matching");
      for (int col = 0; col <= n; ++col) {
        if (used[col]) {
          u[row_of_col[col]] += delta;
          v[col] -= delta;
        } else {
          min_reduced[col] -= delta;
        }
      }
      col0 = col1;
    } while (row_of_col[col0] != 0);
    do {
      const int col1 = way[col0];
      row_of_col[col0] = row_of_col[col1];
      col0 = col1;
    } while (col0 != 0);
  }
  std::vector<int> match_of_row(n);
  for (int col = 1; col <= n; ++col) match_of_row[row_of_col[col] - 1] = col - 1;
  return match_of_row;
}

}  // namespace

double bottleneck_matching_value(const double* w, int n, BottleneckWorkspace& ws) {
  check_size(n);
  // Every row and every column must take one edge: the largest row or column minimum bounds
  // the value from below.
  std::array<double, kMaxBottleneckSize> col_min;
  std::copy_n(w, n, col_min.begin());
  double lower = -kInfinity;
  for (int r = 0; r < n; ++r) {
    double row_min = kInfinity;
    for (int c = 0; c < n; ++c) {
      row_min = std::min(row_min, w[r * n + c]);
      col_min[c] = std::min(col_min[c], w[r * n + c]);
    }
    lower = std::max(lower, row_min);
  }
  for (int c = 0; c < n; ++c) lower = std::max(lower, col_min[c]);

  std::fill_n(ws.base_row_of_col.begin(), n, -1);
  if (perfect_matching_exists(w, n, lower, ws)) return lower;
  ws.base_row_of_col = ws.row_of_col;

  // The value is one of the weights above `lower`. Binary search over them without sorting:
  // nth_element picks the median of the undecided range. The largest weight is always
  // feasible, so `best` is set before the range empties.
  double* cand = ws.candidates.data();
  int end = 0;
  for (int i = 0; i < n * n; ++i) {
    if (w[i] > lower) cand[end++] = w[i];
  }
  int begin = 0;
  double best = kInfinity;
  while (begin < end) {
    const int mid = begin + (end - begin) / 2;
    std::nth_element(cand + begin, cand + mid, cand + end);
    const double threshold = cand[mid];
    if (perfect_matching_exists(w, n, threshold, ws)) {
      best = threshold;
      end = static_cast<int>(
          std::partition(cand + begin, cand + mid, [=](double x) { return x < threshold; }) - cand);
    } else {
      // This matching stays valid at every larger threshold: the next search starts there.
      ws.base_row_of_col = ws.row_of_col;
      begin = mid + 1;
      end = static_cast<int>(
          std::partition(cand + begin, cand + end, [=](double x) { return x > threshold; }) - cand);
    }
  }
  return best;
}

BottleneckMatch bottleneck_matching(const double* w, int n) {
  BottleneckWorkspace ws;
  BottleneckMatch result;
  result.value = bottleneck_matching_value(w, n, ws);
  result.match_of_row = min_cost_assignment_under(w, n, result.value);
  for (int r = 0; r < n; ++r) result.total_weight += w[r * n + result.match_of_row[r]];
  return result;
}

}  // namespace tessel::placement
