// Orderings of the coarsened graph's nodes (the data-parallel groups) into a pipeline: the
// open-loop TSP of PipelineP-Cost (spec dtfm-scheduler.md, section 2, paper eq. 4) and the
// closed tour the interleaved schedule needs (its last stage sends back to the first).
//
// h is a g x g symmetric row-major matrix of finite values, h[a * g + b] the edge between
// nodes a and b; the diagonal is ignored. Which method runs:
//   - g == 1: the single node, length 0.
//   - 2 <= g <= options.exact_max_nodes (at most kMaxExactPathNodes = 16): Held-Karp subset
//     DP over paths from node 0 through subsets of the other g - 1 nodes, exact (an open path
//     is two such paths joined at node 0). Time O(2^g * g^2); memory 2^(g-1) * (g-1)
//     doubles (3.75 MiB at g = 16), kept in the workspace between calls. Measured (one core
//     of an AMD EPYC, -O2): about 3-5 us at g = 8, 4 ms at g = 16.
//   - larger g: multi-start local search, NOT guaranteed optimal. Starts: nearest neighbour
//     from every node plus options.random_starts random orders; each is improved by 2-opt
//     and Or-opt (moving segments of 1 to 3 nodes, either orientation) to a local optimum.
//     Then options.kicks rounds of iterated local search: a double-bridge kick of the best
//     tour, descent again, kept if shorter. Deterministic for a given options.seed. Measured
//     with the default options: about 1.5 ms at g = 32. Forced onto small instances it
//     matched Held-Karp on all 360 of g = 4..12 and 197 of 200 of g = 13..16 (worst 2.4%
//     longer); at g = 32 it matched a 40x longer run on 59 of 60 planar-distance instances
//     but only 20 of 60 uniformly random matrices (worst 5.7% longer).
// Ties between equally long orderings go to the same ordering on every call; when all edges
// are equal, both searches return the identity order 0, 1, ..., g-1.
#pragma once

#include <cstdint>
#include <vector>

namespace tessel::placement {

inline constexpr int kMaxExactPathNodes = 16;

struct PathSearchOptions {
  int exact_max_nodes = kMaxExactPathNodes;  // Held-Karp up to this g (capped at 16);
                                             // 0 forces the local search
  int random_starts = 8;   // local-search starts besides the nearest-neighbour ones
  int kicks = 64;          // iterated-local-search rounds after the starts
  std::uint64_t seed = 1;  // for the random starts and kicks
};

struct PathResult {
  double length = 0;
  // The nodes in order. Open path: order.front() <= order.back(). Cycle: order.front() == 0
  // and, for g >= 3, order[1] < order.back().
  std::vector<int> order;
};

// Scratch space for the searches; grows to the largest g seen and is reused, so repeated
// calls on the same g do not reallocate the DP table. One per thread.
struct OpenPathWorkspace {
  std::vector<double> dp;        // Held-Karp table, [subset][last node]
  std::vector<double> distance;  // the matrix as a search sees it (Held-Karp: without node
                                 // 0; local search: with the open path's dummy node)
  std::vector<int> tour;         // local search: the tour being improved,
  std::vector<int> best_tour;    // the best local optimum so far,
  std::vector<int> scratch;      // room to rebuild a tour after a move,
  std::vector<int> position;     // where each node stands in `tour`,
  std::vector<int> queue;        // and the nodes still to examine
  std::vector<char> queued;
};

// min over orderings of the g nodes of the sum of consecutive edges; free start and end.
// Throws std::invalid_argument for g < 1.
PathResult shortest_open_path(const double* h, int g, OpenPathWorkspace& ws,
                              const PathSearchOptions& options = {});

// min over cyclic orderings of the sum of consecutive edges plus the edge from the last node
// back to the first (for g == 2: both directions of the one edge). Throws for g < 1.
PathResult shortest_cycle(const double* h, int g, OpenPathWorkspace& ws,
                          const PathSearchOptions& options = {});

// Sum of h over consecutive entries of order (open path), and with the closing edge added.
double path_length(const double* h, int g, const std::vector<int>& order);
double cycle_length(const double* h, int g, const std::vector<int>& order);

}  // namespace tessel::placement
