// The paper's local search: cyclic partitioning (Kang & Moon's multiway version of
// Kernighan-Lin) over a balanced partition. A cycle is a chain of single-device moves
// S0 -> q1 -> q2 -> ... where each step moves the best candidate of the current group to
// its best target; the chain is cut at the prefix with the largest total gain and closed by
// sending that step's device back to S0, so every group keeps its size.
//
// Two gains:
//  - Custom (the paper's): with w = one pipeline hop's time, for each group only the unlocked
//    device with the fastest internal link is a candidate (own(v) = min over its group of
//    w(v,e)); moving it to q gains avg over q of w(v,e) - own(v).
//  - KernighanLin (the paper's "Hybrid" baseline): with W = w_pp - w_dp, every unlocked
//    device is a candidate; moving v from p to q gains sum_q W(v,e) - sum_p W(v,e).
// Fixed relative to the reference code: the last cycle performed can be chosen.
#pragma once

#include <vector>

#include "placement/partition.h"
#include "placement/rng.h"

namespace tessel::placement {

enum class Gain { Custom, KernighanLin };

class CyclicPartitioning {
 public:
  // hop_weight and sync_weight: N x N row-major (see CostModel).
  CyclicPartitioning(const std::vector<double>& hop_weight, const std::vector<double>& sync_weight,
                     PartitionShape shape, Gain gain);
  // Improves labels in place (balanced in, balanced out); returns the total gain taken.
  double run(Labels& labels);

 private:
  struct Best {
    int vertex = -1;
    int target = -1;
    double gain = 0;
  };
  void load(const Labels& labels);
  void move(int v, int to);
  double weight(int a, int b) const { return w_[static_cast<size_t>(a) * n_ + b]; }
  double own(int v) const;
  void compute_gains();
  double gain_of(int v, int from, int to) const;

  std::vector<double> w_;  // the weight the gain reads
  PartitionShape shape_;
  Gain gain_;
  int n_;
  int g_;
  Labels label_;
  std::vector<std::vector<int>> members_;
  std::vector<double> sum_to_;  // N x G: sum over e in group q of w(v, e)
  std::vector<double> own_;     // custom gain: fastest internal link of v
  std::vector<char> locked_;
  std::vector<Best> best_;       // per group: its candidate and best move
  std::vector<double> gain_to_;  // G x G: the candidate of group p moving to q
};

}  // namespace tessel::placement
