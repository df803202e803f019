#include "placement/local_search.h"

#include <algorithm>
#include <limits>

namespace tessel::placement {

CyclicPartitioning::CyclicPartitioning(const std::vector<double>& hop_weight,
                                       const std::vector<double>& sync_weight, PartitionShape shape,
                                       Gain gain)
    : shape_(shape), gain_(gain), n_(shape.devices()), g_(shape.stages) {
  w_ = hop_weight;
  if (gain == Gain::KernighanLin)
    for (size_t i = 0; i < w_.size(); ++i) w_[i] -= sync_weight[i];
  members_.resize(g_);
  sum_to_.resize(static_cast<size_t>(n_) * g_);
  own_.resize(n_);
  locked_.resize(n_);
  best_.resize(g_);
  gain_to_.resize(static_cast<size_t>(g_) * g_);
}

void CyclicPartitioning::load(const Labels& labels) {
  label_ = labels;
  for (auto& m : members_) m.clear();
  for (int v = 0; v < n_; ++v) members_[label_[v]].push_back(v);
  std::fill(sum_to_.begin(), sum_to_.end(), 0.0);
  for (int v = 0; v < n_; ++v)
    for (int e = 0; e < n_; ++e) sum_to_[static_cast<size_t>(v) * g_ + label_[e]] += weight(v, e);
  if (gain_ == Gain::Custom)
    for (int v = 0; v < n_; ++v) own_[v] = own(v);
  std::fill(locked_.begin(), locked_.end(), 0);
}

double CyclicPartitioning::own(int v) const {
  double best = std::numeric_limits<double>::infinity();
  for (int e : members_[label_[v]])
    if (e != v) best = std::min(best, weight(v, e));
  return best == std::numeric_limits<double>::infinity() ? 0.0 : best;
}

void CyclicPartitioning::move(int v, int to) {
  const int from = label_[v];
  auto& src = members_[from];
  src.erase(std::find(src.begin(), src.end(), v));
  members_[to].push_back(v);
  label_[v] = to;
  for (int e = 0; e < n_; ++e) {
    const double wv = weight(e, v);
    sum_to_[static_cast<size_t>(e) * g_ + from] -= wv;
    sum_to_[static_cast<size_t>(e) * g_ + to] += wv;
  }
  if (gain_ == Gain::Custom) {
    for (int e : members_[from]) own_[e] = own(e);  // v may have been their fastest link
    for (int e : members_[to]) own_[e] = e == v ? own(v) : std::min(own_[e], weight(e, v));
  }
}

double CyclicPartitioning::gain_of(int v, int from, int to) const {
  const double* sums = &sum_to_[static_cast<size_t>(v) * g_];
  if (gain_ == Gain::Custom) {
    const double size_to = static_cast<double>(members_[to].size());
    return (size_to > 0 ? sums[to] / size_to : 0.0) - own_[v];
  }
  return sums[to] - sums[from];  // w(v, v) = 0, so v's own entry adds nothing
}

void CyclicPartitioning::compute_gains() {
  for (int p = 0; p < g_; ++p) {
    Best& b = best_[p];
    b = Best{};
    b.gain = -std::numeric_limits<double>::infinity();
    double* row = &gain_to_[static_cast<size_t>(p) * g_];
    if (gain_ == Gain::Custom) {
      int cand = -1;
      for (int v : members_[p])
        if (!locked_[v] && (cand < 0 || own_[v] < own_[cand])) cand = v;
      if (cand < 0) continue;
      b.vertex = cand;
      for (int q = 0; q < g_; ++q) {
        row[q] = q == p ? 0.0 : gain_of(cand, p, q);
        if (q != p && row[q] > b.gain) b.gain = row[q], b.target = q;
      }
    } else {
      for (int q = 0; q < g_; ++q) row[q] = -std::numeric_limits<double>::infinity();
      for (int v : members_[p]) {
        if (locked_[v]) continue;
        for (int q = 0; q < g_; ++q) {
          if (q == p) continue;
          const double gq = gain_of(v, p, q);
          if (gq > b.gain) b.gain = gq, b.target = q, b.vertex = v;
        }
      }
      // Gij for the KL gain: the chosen vertex's gain to every group.
      if (b.vertex >= 0)
        for (int q = 0; q < g_; ++q) row[q] = q == p ? 0.0 : gain_of(b.vertex, p, q);
    }
  }
}

double CyclicPartitioning::run(Labels& labels) {
  if (g_ < 2 || shape_.replicas < 1) return 0.0;
  load(labels);
  std::vector<char> targeted(g_, 0);
  double total = 0;
  struct Move {
    int vertex, from, to;
  };
  std::vector<Move> moves;
  std::vector<double> eps, tau;
  for (int cycle = 0; cycle < g_; ++cycle) {
    moves.clear();
    eps.clear();
    tau.clear();
    compute_gains();
    int s0 = -1;
    for (int p = 0; p < g_; ++p)
      if (best_[p].vertex >= 0 && (s0 < 0 || best_[p].gain > best_[s0].gain)) s0 = p;
    if (s0 < 0) break;
    int s = s0;
    bool closed = false;
    for (int step = 0; step < n_; ++step) {
      int v = best_[s].vertex, q = best_[s].target;
      if (v < 0) {  // nothing unlocked left in S: send the device that just arrived to S0
        v = moves.back().vertex;
        q = s0;
      }
      eps.push_back(best_[s].vertex < 0 ? gain_of(v, s, q) : best_[s].gain);
      tau.push_back(gain_to_[static_cast<size_t>(s) * g_ + s0]);
      moves.push_back({v, s, q});
      move(v, q);
      locked_[v] = 1;
      targeted[q] = 1;
      s = q;
      if (s == s0) {
        closed = true;
        break;
      }
      compute_gains();
    }
    // Best cut: keep moves [0, l) and send move l's device to S0 instead (gain tau[l]); or,
    // when the chain came back to S0 by itself, keep all of it.
    const int k = static_cast<int>(moves.size());
    int best_l = 0;
    double best_gain = 0, prefix = 0;
    for (int l = 1; l <= k; ++l) {
      prefix += eps[l - 1];
      const double value =
          l < k ? prefix + tau[l] : (closed ? prefix : -std::numeric_limits<double>::infinity());
      if (value > best_gain) best_gain = value, best_l = l;
    }
    for (int i = k - 1; i >= best_l; --i) {  // undo, newest first
      move(moves[i].vertex, moves[i].from);
      locked_[moves[i].vertex] = 0;
    }
    if (best_l > 0 && best_l < k) {
      move(moves[best_l].vertex, s0);
      locked_[moves[best_l].vertex] = 1;
    }
    if (best_l > 0) total += best_gain;
    if (std::all_of(targeted.begin(), targeted.end(), [](char t) { return t != 0; })) break;
  }
  labels = label_;
  return total;
}

}  // namespace tessel::placement
