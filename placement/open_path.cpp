#include "placement/open_path.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace tessel::placement {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr int kMaxSegment = 3;  // Or-opt moves segments of 1..kMaxSegment nodes

void check_nodes(int g, const char* what) {
  if (g < 1) {
    throw std::invalid_argument(std::string(what) + ": node count " + std::to_string(g) +
                                " is below 1");
  }
}

bool use_exact(int g, const PathSearchOptions& options) {
  return g <= std::min(options.exact_max_nodes, kMaxExactPathNodes);
}

// min over i < m of a[i] + b[i]. Four independent minima: a single chain would wait on the
// latency of every comparison.
double min_sum(const double* a, const double* b, int m) {
  double lane[4] = {kInfinity, kInfinity, kInfinity, kInfinity};
  int i = 0;
  for (; i + 4 <= m; i += 4) {
    for (int j = 0; j < 4; ++j) lane[j] = std::min(lane[j], a[i + j] + b[i + j]);
  }
  for (; i < m; ++i) lane[0] = std::min(lane[0], a[i] + b[i]);
  return std::min(std::min(lane[0], lane[1]), std::min(lane[2], lane[3]));
}

// Held-Karp from node 0. The DP runs over the other nodes, index i standing for node i + 1:
// d is their (g-1) x (g-1) matrix and from_zero[i] the edge from node 0 to node i + 1.
class PathsFromZero {
 public:
  struct End {
    double cost;
    int last;
  };

  // Fills dp[s * m + last] = the cheapest path that starts at node 0, visits exactly the
  // nodes of s and ends at last; +inf when last is not in s, which lets the inner minimum run
  // over all m predecessors without a membership test.
  PathsFromZero(const double* d, int m, const double* from_zero, OpenPathWorkspace& ws)
      : d_(d), m_(m) {
    const std::size_t subsets = std::size_t{1} << m;
    ws.dp.resize(subsets * m);
    dp_ = ws.dp.data();
    for (std::size_t s = 1; s < subsets; ++s) {
      double* row = dp_ + s * m;
      std::fill(row, row + m, kInfinity);
      if (std::has_single_bit(s)) {
        const int only = std::countr_zero(s);
        row[only] = from_zero[only];
        continue;
      }
      for (std::size_t rest = s; rest != 0; rest &= rest - 1) {
        const int last = std::countr_zero(rest);
        row[last] = min_sum(dp_ + (s ^ (std::size_t{1} << last)) * m, d + last * m, m);
      }
    }
  }

  // The cheapest path through s (nonempty) plus exit_cost[last] (nullptr: nothing); ties go to
  // the largest last.
  End cheapest_end(std::size_t s, const double* exit_cost) const {
    End end{kInfinity, 0};
    for (int i = 0; i < m_; ++i) {
      const double cost = dp_[s * m_ + i] + (exit_cost ? exit_cost[i] : 0.0);
      if (cost <= end.cost) end = {cost, i};
    }
    return end;
  }

  // Writes the nodes (as 1..m) of the cheapest path through s ending at last to out, in path
  // order, and returns the end of what it wrote. The predecessor is the largest node whose
  // sum reproduces the entry: the same additions in the same order, so equality is bit-exact.
  // Together with cheapest_end this gives the identity order when all edges are equal.
  int* trace(std::size_t s, int last, int* out) const {
    int* const end = out + std::popcount(s);
    for (int* position = end - 1;; --position) {
      *position = last + 1;
      const std::size_t before = s ^ (std::size_t{1} << last);
      if (before == 0) break;
      const double target = dp_[s * m_ + last];
      int p = m_ - 1;
      while (p > 0 && dp_[before * m_ + p] + d_[last * m_ + p] != target) --p;
      s = before;
      last = p;
    }
    return end;
  }

 private:
  const double* d_;
  int m_;
  double* dp_ = nullptr;  // ws.dp
};

// Copies h without node 0 into ws.distance and the edges at node 0 into from_zero and
// to_zero (each g - 1 entries).
void split_off_node_zero(const double* h, int g, OpenPathWorkspace& ws, double* from_zero,
                         double* to_zero) {
  const int m = g - 1;
  ws.distance.resize(static_cast<std::size_t>(m) * m);
  for (int a = 0; a < m; ++a) {
    std::copy_n(h + (a + 1) * g + 1, m, ws.distance.begin() + a * m);
    from_zero[a] = h[a + 1];
    to_zero[a] = h[(a + 1) * g];
  }
}

// Exact open path, g >= 2. Node 0 splits the path into two paths that start at node 0 and
// cover complementary sets A and B of the other nodes (h being symmetric, the first one runs
// backwards): one DP half the size of a DP with every node as a possible start.
void exact_open_path(const double* h, int g, OpenPathWorkspace& ws, int* order) {
  const int m = g - 1;
  std::array<double, kMaxExactPathNodes> from_zero{}, to_zero{};
  split_off_node_zero(h, g, ws, from_zero.data(), to_zero.data());
  const PathsFromZero paths(ws.distance.data(), m, from_zero.data(), ws);
  const auto cost = [&](std::size_t s) {
    return s == 0 ? 0.0 : paths.cheapest_end(s, nullptr).cost;
  };
  const std::size_t all = (std::size_t{1} << m) - 1;
  std::size_t best_a = 0;
  double best = kInfinity;
  for (std::size_t a = 0; a < (all ^ a); ++a) {
    const double length = cost(a) + cost(all ^ a);
    if (length < best) {
      best = length;
      best_a = a;
    }
  }
  int* next = order;
  if (best_a != 0) {
    next = paths.trace(best_a, paths.cheapest_end(best_a, nullptr).last, order);
    std::reverse(order, next);
  }
  *next++ = 0;
  paths.trace(all ^ best_a, paths.cheapest_end(all ^ best_a, nullptr).last, next);
}

// Exact cycle, g >= 2: paths from node 0 through all other nodes, closed by the edge back.
void exact_cycle(const double* h, int g, OpenPathWorkspace& ws, int* order) {
  const int m = g - 1;
  std::array<double, kMaxExactPathNodes> from_zero{}, to_zero{};
  split_off_node_zero(h, g, ws, from_zero.data(), to_zero.data());
  const PathsFromZero paths(ws.distance.data(), m, from_zero.data(), ws);
  const std::size_t all = (std::size_t{1} << m) - 1;
  order[0] = 0;
  paths.trace(all, paths.cheapest_end(all, to_zero.data()).last, order + 1);
}

// Open path: smaller end first. Cycle: node 0 first, smaller neighbour of 0 second.
void normalize_path(std::vector<int>& order) {
  if (order.front() > order.back()) std::reverse(order.begin(), order.end());
}

void normalize_cycle(std::vector<int>& order) {
  std::rotate(order.begin(), std::find(order.begin(), order.end(), 0), order.end());
  if (order.size() >= 3 && order[1] > order.back()) std::reverse(order.begin() + 1, order.end());
}

// splitmix64: a fixed generator, so that seeded runs agree across standard libraries.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int below(int bound) { return static_cast<int>(next() % static_cast<std::uint64_t>(bound)); }

 private:
  std::uint64_t state_;
};

// Local search on closed tours over the n x n matrix ws.distance. Only the first `real`
// nodes take part in the start constructions; nodes real..n-1 (the open path's dummy) are
// appended to every start tour. Descent is node-driven ("don't-look bits"): a queue holds the
// nodes whose neighbourhood changed, so a descent after a small change costs O(n) per node.
class TourSearch {
 public:
  TourSearch(int n, int real, OpenPathWorkspace& ws)
      : n_(n),
        real_(real),
        d_(ws.distance.data()),
        tour_(ws.tour),
        scratch_(ws.scratch),
        position_(ws.position),
        queue_(ws.queue),
        queued_(ws.queued) {
    tour_.resize(n);
    scratch_.resize(n);
    position_.resize(n);
    queue_.resize(n);
    queued_.resize(n);
    double largest = 0;
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        if (a != b) largest = std::max(largest, std::abs(dist(a, b)));
      }
    }
    // Moves must gain more than rounding noise, or the search could cycle.
    min_gain_ = 1e-12 * largest;
  }

  void nearest_neighbour_start(int first) {
    std::iota(tour_.begin(), tour_.end(), 0);
    std::swap(tour_[0], tour_[first]);
    for (int k = 1; k < real_; ++k) {
      int nearest = k;
      for (int j = k + 1; j < real_; ++j) {
        if (dist(tour_[k - 1], tour_[j]) < dist(tour_[k - 1], tour_[nearest])) nearest = j;
      }
      std::swap(tour_[k], tour_[nearest]);
    }
    reset_queue();
  }

  void random_start(SplitMix64& rng) {
    std::iota(tour_.begin(), tour_.end(), 0);
    for (int k = real_ - 1; k > 0; --k) std::swap(tour_[k], tour_[rng.below(k + 1)]);
    reset_queue();
  }

  // Restarts from `tour` kicked out of its local optimum: cut into A B C D, reconnected as
  // A C B D, a change that 2-opt and Or-opt cannot undo in one move. Needs n >= 4.
  void kicked_start(const std::vector<int>& tour, SplitMix64& rng) {
    tour_ = tour;
    const int first = 1 + rng.below(n_ - 3);
    const int second = first + 1 + rng.below(n_ - 2 - first);
    const int third = second + 1 + rng.below(n_ - 1 - second);
    std::rotate(tour_.begin() + first, tour_.begin() + second, tour_.begin() + third);
    update_positions();
    const int middle = first + third - second;  // where B now begins
    for (int p : {first - 1, first, middle - 1, middle, third - 1, third}) push(tour_[p]);
  }

  // Descends with 2-opt and Or-opt moves to a local optimum; returns the tour's length.
  double improve() {
    // With 3 nodes or fewer every tour has the same length.
    while (n_ > 3 && queued_count_ > 0) {
      const int node = queue_[queue_head_];
      queue_head_ = queue_head_ + 1 == n_ ? 0 : queue_head_ + 1;
      --queued_count_;
      queued_[node] = 0;
      if (!two_opt_from(node)) or_opt_from(node);
    }
    double length = 0;
    for (int i = 0; i < n_; ++i) length += dist(tour_[i], tour_[next(i)]);
    return length;
  }

 private:
  double dist(int a, int b) const { return d_[a * n_ + b]; }
  int wrap(int i) const { return ((i % n_) + n_) % n_; }
  int next(int i) const { return i + 1 == n_ ? 0 : i + 1; }
  int at(int i) const { return tour_[wrap(i)]; }

  void update_positions() {
    for (int i = 0; i < n_; ++i) position_[tour_[i]] = i;
  }

  void reset_queue() {
    update_positions();
    queue_head_ = 0;
    queued_count_ = 0;
    std::fill(queued_.begin(), queued_.end(), 0);
    for (int node : tour_) push(node);
  }

  void push(int node) {
    if (queued_[node]) return;
    queued_[node] = 1;
    queue_[wrap(queue_head_ + queued_count_)] = node;
    ++queued_count_;
  }

  // Edge x joins positions x and x+1. Replaces edges x and y with (t[x], t[y]) and
  // (t[x+1], t[y+1]), tried for both tour edges at `node` against every other edge.
  bool two_opt_from(int node) {
    const int i = position_[node];
    for (int x : {i, i == 0 ? n_ - 1 : i - 1}) {
      const int a = tour_[x], b = tour_[next(x)];
      const double* from_a = d_ + a * n_;
      const double* from_b = d_ + b * n_;
      const double removed = dist(a, b);
      for (int y = next(next(x)), offset = 2; offset < n_ - 1; ++offset, y = next(y)) {
        const int c = tour_[y], e = tour_[next(y)];
        if (from_a[c] + from_b[e] - removed - dist(c, e) < -min_gain_) {
          reverse_run(x + 1, y);
          for (int changed : {a, b, c, e}) push(changed);
          return true;
        }
      }
    }
    return false;
  }

  // Reverses the cyclic run of positions first..last, or equivalently (distances being
  // symmetric) the complementary run, whichever is shorter.
  void reverse_run(int first, int last) {
    int length = wrap(last - first) + 1;
    if (2 * length > n_) {
      first = last + 1;
      length = n_ - length;
    }
    for (int k = 0; k < length / 2; ++k) {
      const int p = wrap(first + k), q = wrap(first + length - 1 - k);
      std::swap(tour_[p], tour_[q]);
      position_[tour_[p]] = p;
      position_[tour_[q]] = q;
    }
  }

  // Moves a segment of 1..kMaxSegment nodes that begins or ends at `node`, either way round,
  // between two other neighbours.
  bool or_opt_from(int node) {
    const int i = position_[node];
    for (int length = 1; length <= kMaxSegment && n_ - length >= 3; ++length) {
      for (int start : {i, i - length + 1}) {
        if (or_opt_segment(start, length)) return true;
        if (length == 1) break;
      }
    }
    return false;
  }

  bool or_opt_segment(int start, int length) {
    start = wrap(start);
    const int before = at(start - 1), first = tour_[start], last = at(start + length - 1),
              after = at(start + length);
    const double removal_gain = dist(before, first) + dist(last, after) - dist(before, after);
    const double* from_first = d_ + first * n_;
    const double* from_last = d_ + last * n_;
    // The rest of the tour runs rest[0] = after .. rest[n - length - 1] = before; insert
    // between rest[k] and rest[k + 1].
    for (int k = 0, p = wrap(start + length); k + 1 < n_ - length; ++k, p = next(p)) {
      const int u = tour_[p], v = tour_[next(p)];
      const double kept = dist(u, v) + removal_gain;
      const double forward = from_first[u] + from_last[v];
      const double reversed = from_last[u] + from_first[v];
      if (std::min(forward, reversed) - kept < -min_gain_) {
        move_segment(start, length, k, reversed < forward);
        for (int changed : {before, first, last, after, u, v}) push(changed);
        return true;
      }
    }
    return false;
  }

  void move_segment(int start, int length, int k, bool reversed) {
    int out = 0;
    for (int r = 0; r <= k; ++r) scratch_[out++] = at(start + length + r);
    for (int s = 0; s < length; ++s) {
      scratch_[out++] = at(start + (reversed ? length - 1 - s : s));
    }
    for (int r = k + 1; r < n_ - length; ++r) scratch_[out++] = at(start + length + r);
    std::swap(tour_, scratch_);
    update_positions();
  }

  int n_;
  int real_;
  const double* d_;
  std::vector<int>& tour_;
  std::vector<int>& scratch_;
  std::vector<int>& position_;  // position_[node]: where node stands in tour_
  std::vector<int>& queue_;     // ring buffer of nodes to examine
  std::vector<char>& queued_;
  int queue_head_ = 0;
  int queued_count_ = 0;
  double min_gain_ = 0;
};

// Best local optimum over all starts and kicks, left in ws.best_tour (a closed tour over n
// nodes).
void local_search(int n, int real, OpenPathWorkspace& ws, const PathSearchOptions& options) {
  TourSearch search(n, real, ws);
  SplitMix64 rng(options.seed);
  double best = kInfinity;
  const auto keep_if_better = [&](double length) {
    if (length < best) {
      best = length;
      ws.best_tour = ws.tour;
    }
  };
  for (int start = 0; start < real; ++start) {
    search.nearest_neighbour_start(start);
    keep_if_better(search.improve());
  }
  for (int start = 0; start < options.random_starts; ++start) {
    search.random_start(rng);
    keep_if_better(search.improve());
  }
  // Iterated local search from the best tour found.
  for (int kick = 0; kick < options.kicks && n >= 4; ++kick) {
    search.kicked_start(ws.best_tour, rng);
    keep_if_better(search.improve());
  }
}

}  // namespace

PathResult shortest_open_path(const double* h, int g, OpenPathWorkspace& ws,
                              const PathSearchOptions& options) {
  check_nodes(g, "shortest_open_path");
  PathResult result;
  result.order.resize(g);
  if (g == 1) return result;
  if (use_exact(g, options)) {
    exact_open_path(h, g, ws, result.order.data());
  } else {
    // A dummy node g at distance 0 from all others turns the open path into a closed tour.
    const int n = g + 1;
    ws.distance.assign(static_cast<std::size_t>(n) * n, 0.0);
    for (int a = 0; a < g; ++a) std::copy_n(h + a * g, g, ws.distance.begin() + a * n);
    local_search(n, g, ws, options);
    const auto dummy = std::find(ws.best_tour.begin(), ws.best_tour.end(), g);
    const auto rest = std::copy(dummy + 1, ws.best_tour.end(), result.order.begin());
    std::copy(ws.best_tour.begin(), dummy, rest);
  }
  normalize_path(result.order);
  result.length = path_length(h, g, result.order);
  return result;
}

PathResult shortest_cycle(const double* h, int g, OpenPathWorkspace& ws,
                          const PathSearchOptions& options) {
  check_nodes(g, "shortest_cycle");
  PathResult result;
  result.order.resize(g);
  if (g == 1) return result;
  if (use_exact(g, options)) {
    exact_cycle(h, g, ws, result.order.data());
  } else {
    ws.distance.assign(h, h + g * g);
    local_search(g, g, ws, options);
    std::copy(ws.best_tour.begin(), ws.best_tour.end(), result.order.begin());
  }
  normalize_cycle(result.order);
  result.length = cycle_length(h, g, result.order);
  return result;
}

double path_length(const double* h, int g, const std::vector<int>& order) {
  double length = 0;
  for (std::size_t k = 1; k < order.size(); ++k) length += h[order[k - 1] * g + order[k]];
  return length;
}

double cycle_length(const double* h, int g, const std::vector<int>& order) {
  if (order.size() < 2) return 0;
  return path_length(h, g, order) + h[order.back() * g + order.front()];
}

}  // namespace tessel::placement
