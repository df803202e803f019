#include "placement/ring_allreduce.h"

#include <algorithm>
#include <limits>

namespace tessel::placement {
namespace {

double step_s(const Topology& t, int a, int b, double chunk_bytes) {
  return t.latency_ms(a, b) / 1000.0 + chunk_bytes * 8.0 / (t.bandwidth_gbps(a, b) * 1e9);
}

}  // namespace

RingPlan plan_ring(const Topology& topology, const std::vector<int>& members, double bytes) {
  const int n = static_cast<int>(members.size());
  RingPlan best;
  if (n <= 1) {
    best.order = members;
    return best;
  }
  const double chunk = bytes / n;
  double best_max = std::numeric_limits<double>::infinity();
  double best_sum = best_max;
  std::vector<int> order(n);
  std::vector<char> used(n);
  for (int start = 0; start < n; ++start) {
    std::fill(used.begin(), used.end(), 0);
    order[0] = start;
    used[start] = 1;
    for (int i = 1; i < n; ++i) {
      int next = -1;
      double next_w = std::numeric_limits<double>::infinity();
      for (int c = 0; c < n; ++c) {
        if (used[c]) continue;
        const double w = step_s(topology, members[order[i - 1]], members[c], chunk);
        if (w < next_w) next_w = w, next = c;
      }
      order[i] = next;
      used[next] = 1;
    }
    double mx = 0, sum = 0;
    for (int i = 0; i < n; ++i) {
      const double w = step_s(topology, members[order[i]], members[order[(i + 1) % n]], chunk);
      mx = std::max(mx, w);
      sum += w;
    }
    if (mx < best_max || (mx == best_max && sum < best_sum)) {
      best_max = mx;
      best_sum = sum;
      best.order.clear();
      for (int i : order) best.order.push_back(members[i]);
    }
  }
  for (int i = 0; i < n; ++i) {
    const int a = best.order[i], b = best.order[(i + 1) % n];
    best.latency_s.push_back(topology.latency_ms(a, b) / 1000.0);
    best.bytes_per_s.push_back(topology.bandwidth_gbps(a, b) * 1e9 / 8.0);
  }
  return best;
}

double ring_allreduce_s(const RingPlan& ring, double bytes) {
  const int n = static_cast<int>(ring.order.size());
  if (n <= 1) return 0.0;
  double step = 0;
  for (int i = 0; i < n; ++i)
    step = std::max(step, ring.latency_s[i] + bytes / n / ring.bytes_per_s[i]);
  return 2.0 * (n - 1) * step;
}

}  // namespace tessel::placement
