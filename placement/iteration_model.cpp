#include "placement/iteration_model.h"

#include <algorithm>
#include <vector>

#include "placement/outer_sync_cost.h"
#include "placement/schedule.h"
#include "placement/simulator.h"

namespace tessel::placement {

namespace {

// The replica as S = p*v virtual stages (v = 1 except interleaved) in units of chunk ops: each
// rank runs N = m*v chunk forwards and N chunk backwards. Without overlap a send holds its rank
// until the message has arrived, which is the same as folding latency + transfer into the op
// that produces the message and leaving free hops; every formula below then covers both modes.
struct VirtualPipeline {
  int p = 1, v = 1, group = 1, stages = 1;  // group: G, the index distance of one chunk
  int slots = 1;                            // N = m*v chunk ops of each kind per rank
  std::vector<double> f, b;  // per virtual stage: one chunk forward / backward (send folded in)
  std::vector<double> hop;   // hop[s]: from virtual stage s to s+1 (0 without overlap)
  std::vector<double> head;  // head[s]: from a forward starting on stage 0 to its start on stage s
  std::vector<double> tail;  // tail[s]: from a backward ending on stage s to its end on stage 0
  // Per rank: Megatron's warm-up before capping at N, p-r-1 or 2(p-r-1)+(v-1)G, which is also
  // how far back a forward's follower backward is; and the warm-up actually run.
  std::vector<int> offset, cap;
  std::vector<double> chain_f, chain_b;  // per rank: mean chunk forward / backward over its chunks
  std::vector<double> burst_x;           // per hop: transfer_s (a short run of messages)
  std::vector<double> steady_x;  // per hop: transfer_s per chunk op in the long run (wrap: (v-1)/v)

  int rank(int s) const { return s % p; }
  int chunk(int s) const { return s / p; }
  // Forward of stage j to the turn at stage k and the backward back to stage j.
  double round_trip(int j, int k) const {
    return head[k] - head[j] + tail[k] - tail[j] + f[k] + b[k];
  }
};

VirtualPipeline fold(const ScheduleSpec& spec, const PipelineTiming& timing) {
  VirtualPipeline vp;
  vp.p = spec.stages;
  vp.v = spec.chunks;
  vp.group = spec.kind == ScheduleKind::Interleaved
                 ? (spec.microbatch_group > 0 ? spec.microbatch_group : spec.stages)
                 : 1;
  vp.stages = vp.p * vp.v;
  vp.slots = spec.micro_batches * vp.v;
  const int p = vp.p, v = vp.v, stages = vp.stages;
  vp.f.resize(stages);
  vp.b.resize(stages);
  vp.hop.assign(stages, 0);
  for (int s = 0; s < stages; ++s) {
    vp.f[s] = timing.stages[s % p].forward_s / v;
    vp.b[s] = timing.stages[s % p].backward_s / v;
  }
  // The hop after virtual stage s leaves rank s mod p: hop s mod p (hop p-1 is the wrap).
  for (int s = 0; s + 1 < stages; ++s) {
    const HopTiming& h = timing.hops[s % p];
    if (timing.overlap) {
      vp.hop[s] = h.latency_s + h.transfer_s;
    } else {
      vp.f[s] += h.latency_s + h.transfer_s;
      vp.b[s + 1] += h.latency_s + h.transfer_s;
    }
  }
  vp.head.assign(stages + 1, 0);
  vp.tail.assign(stages + 1, 0);
  for (int s = 0; s < stages; ++s) {
    vp.head[s + 1] = vp.head[s] + vp.f[s] + vp.hop[s];
    vp.tail[s + 1] = vp.tail[s] + vp.b[s] + vp.hop[s];
  }
  vp.chain_f.assign(p, 0);
  vp.chain_b.assign(p, 0);
  for (int r = 0; r < p; ++r) {
    vp.offset.push_back(
        spec.kind == ScheduleKind::Interleaved ? 2 * (p - r - 1) + (v - 1) * vp.group : p - r - 1);
    vp.cap.push_back(warmup_forwards(spec, r));
    for (int c = 0; c < v; ++c) {
      vp.chain_f[r] += vp.f[c * p + r] / v;
      vp.chain_b[r] += vp.b[c * p + r] / v;
    }
  }
  const int hops = spec.kind == ScheduleKind::Interleaved ? p : p - 1;
  for (int h = 0; h < hops; ++h) {
    const double x = timing.overlap ? timing.hops[h].transfer_s : 0;
    vp.burst_x.push_back(x);
    vp.steady_x.push_back(h == p - 1 ? x * (v - 1) / v : x);
  }
  return vp;
}

// Unbounded knapsack over path segments, without a table over m: the best of "as many copies
// of one segment as fit, the rest filled with unit steps or one shorter segment". length[a] is
// the longest segment advancing a chunk ops (0: none), unit the longest one-op step.
double fill_advance(int advance, const std::vector<double>& length, double unit) {
  double best = advance * unit;
  const int largest = std::min<int>(advance, static_cast<int>(length.size()) - 1);
  for (int a = 2; a <= largest; ++a) {
    if (length[a] <= 0) continue;
    const int rest = advance % a;
    double filler = rest * unit;
    if (rest > 0 && length[rest] > 0) filler = std::max(filler, length[rest]);
    best = std::max(best, (advance / a) * length[a] + filler);
  }
  return best;
}

// Paths of the event graph, in chunk-op index I (the position in Megatron's schedule table):
// stage j's forward of index I is followed on its rank by the backward of index I - offset
// (steady state), that backward by the forward of I + offset + 1; a message crossing the wrap
// hop adds G to the index. A path from the first forward (I = 0) to the last backward of rank 0
// (I = N-1) must add up to N-1, and its length bounds the iteration from below. The model takes
// the longest path of three shapes (for interleaved the index bookkeeping of partial round trips
// is approximate, so these are estimates rather than strict bounds).
class PathFamilies {
 public:
  explicit PathFamilies(const VirtualPipeline& vp) : vp_(vp) {
    const int p = vp.p;
    prefix_f_.resize(p);
    prefix_b_.resize(p);
    prefix_x_.assign(p + 1, 0);
    for (int r = 0; r < p; ++r) {
      prefix_f_[r] = std::max(r > 0 ? prefix_f_[r - 1] : 0.0, vp.f[r]);
      prefix_b_[r] = std::max(r > 1 ? prefix_b_[r - 1] : 0.0, r > 0 ? vp.b[r] : 0.0);
      if (r < p - 1) prefix_x_[r + 1] = std::max(prefix_x_[r], vp.burst_x[r]);
    }
  }

  double longest() const { return std::max({direct(), two_chains(), steady()}); }

 private:
  // The longest chain step usable `steps` times in a row by a path that visits ranks 0..reach
  // (reach = p-1 once it crosses the wrap): a run of consecutive forwards (or backwards) of one
  // rank, whose warm-up must hold that many, or a run of messages queued on one link.
  double chain_step(int steps, int reach, bool forward) const {
    const int p = vp_.p;
    int last = -1;
    while (last + 1 <= reach && vp_.cap[last + 1] >= steps) ++last;  // cap falls with the rank
    double step = prefix_x_[std::min(reach, p - 1)];
    if (reach == p - 1 && static_cast<int>(vp_.burst_x.size()) == p) {
      const double wrap =
          steps <= (vp_.v - 1) * vp_.group ? vp_.burst_x[p - 1] : vp_.steady_x[p - 1];
      step = std::max(step, wrap);
    }
    if (last < 0) return step;
    // A chunk op costs the same on every chunk of a rank except the forward of the last virtual
    // stage and the backward of the first (no message to send); only those runs are averaged.
    if (forward) {
      step = std::max(step, prefix_f_[std::min(last, std::max(p - 2, 0))]);
      if (last == p - 1) step = std::max(step, mean_run(steps, vp_.f[p - 1], vp_.f.back(), true));
    } else {
      if (last >= 1) step = std::max(step, prefix_b_[last]);
      step = std::max(step, mean_run(steps, vp_.b[p % vp_.stages], vp_.b[0], false));
    }
    return step;
  }

  // Mean op of a run of `steps` chunk ops of which some cost `odd` instead of `usual`: a warm-up
  // run of rank p-1 from index 0 meets the last chunk G times per group of G*v, after the first
  // (v-1)*G; a cool-down run of rank 0 ending at N-1 meets the first chunk in its last G.
  double mean_run(int steps, double usual, double odd, bool from_start) const {
    if (steps <= 0) return usual;
    const int g = vp_.group, period = g * vp_.v;
    const int full = steps / period, rest = steps % period;
    const int odd_ops =
        full * g + (from_start ? std::max(0, rest - (vp_.v - 1) * g) : std::min(g, rest));
    return usual + (odd - usual) * odd_ops / steps;
  }

  // Fill and drain: forward chain steps and wf passes round the wrap up to a turn at rank k
  // (forward of index I followed by the backward of I - offset[k]), then wb passes back and
  // backward chain steps. With F steps aF = I - wf*G and B steps aB = N-1 - (I - offset) - wb*G:
  //   wf*P_f + head[k] + f[k] + b[k] + tail[k] + wb*P_b + aF*step_F(aF) + aB*step_B(aB),
  // linear in I between the points where a chain stops being eligible, so only those are tried.
  // For GPipe-like ranks (warm-up = m) this is the flow shop sum + (m-1)*max of GPipe.
  double direct() const {
    const int p = vp_.p, v = vp_.v, g = vp_.group, n = vp_.slots - 1;
    const double pass_f = v > 1 ? vp_.head[p] : 0;  // one forward lap over the wrap
    const double pass_b = v > 1 ? vp_.tail[p + 1] - vp_.tail[1] : 0;  // one backward lap
    double best = 0;
    for (int k = 0; k < p; ++k) {
      const int offset = std::min(vp_.offset[k], n);
      for (int wf = 0; wf < v; ++wf) {
        for (int wb = 0; wb < v; ++wb) {
          const int lo = std::max(offset, wf * g), hi = std::min(n, n + offset - wb * g);
          if (lo > hi) continue;
          const int turn = wf * p + k;
          const double base =
              wf * pass_f + vp_.head[k] + vp_.f[turn] + vp_.b[turn] + vp_.tail[k] + wb * pass_b;
          auto length = [&](int index) {
            const int forward_steps = index - wf * g;
            const int backward_steps = n - (index - offset) - wb * g;
            return base + forward_steps * chain_step(forward_steps, wf > 0 ? p - 1 : k, true) +
                   backward_steps * chain_step(backward_steps, wb > 0 ? p - 1 : k, false);
          };
          best = std::max({best, length(lo), length(hi)});
          for (int r = 0; r < p; ++r) {
            for (int index : {wf * g + vp_.cap[r], n + offset - wb * g - vp_.cap[r]}) {
              if (index >= lo && index <= hi) best = std::max(best, length(index));
            }
          }
        }
      }
    }
    return best;
  }

  // Device-bound paths: rank j1's ops up to its forward of index I, the message on to rank j2,
  // then rank j2's ops to its last one. Rank j runs I+1 forwards and max(0, I - cap) backwards
  // up to its forward I, so with means cf, cb per chunk op:
  //   head[j1] + (I+1)*cf1 + max(0, I-cap1)*cb1 + (head[j2] - head[j1] - f[j1])
  //   + (N-I)*cf2 + min(N, N-I+cap2)*cb2 + tail[j2],    I at its breakpoints 0, cap2, cap1, N-1;
  // j1 = j2 is one rank busy throughout: head[j] + N*(cf+cb) + tail[j] (uniform, no comm:
  // (m + (p-1)/v)(f+b), Megatron's bubble).
  double two_chains() const {
    const int p = vp_.p, slots = vp_.slots;
    double best = 0;
    for (int j1 = 0; j1 < p; ++j1) {
      best =
          std::max(best, vp_.head[j1] + slots * (vp_.chain_f[j1] + vp_.chain_b[j1]) + vp_.tail[j1]);
      for (int j2 = j1 + 1; j2 < p; ++j2) {
        const double between = vp_.head[j2] - vp_.head[j1] - vp_.f[j1];
        for (int index :
             {0, std::min(vp_.cap[j2], slots - 1), std::min(vp_.cap[j1], slots - 1), slots - 1}) {
          const double first = vp_.head[j1] + (index + 1) * vp_.chain_f[j1] +
                               std::max(0, index - vp_.cap[j1]) * vp_.chain_b[j1];
          const double second = (slots - index) * vp_.chain_f[j2] +
                                std::min(slots, slots - index + vp_.cap[j2]) * vp_.chain_b[j2] +
                                vp_.tail[j2];
          best = std::max(best, first + between + second);
        }
      }
    }
    return best;
  }

  // Steady state at base stage j (rank r, chunk c): round trips that leave from stage j's
  // forward and come back to its backward, each followed on rank r by a forward offset[r]+1
  // further on. A round trip turning at stage k (rank rk, chunk ck) costs round_trip(j, k) and
  // advances the index by 2(ck-c)G + offset[r] - offset[rk] + 1 (1F1B: k-j+1); one chunk op of
  // a rank (device busy, cf+cb) or of a link (transfer) advances it by 1. The path
  //   head[j] + entry + fill_advance(rest) + exit + tail[j]
  // enters with a full round trip (or a chain of warm-up forwards and a turn at k), packs the
  // remaining advance with the segments of best length per advance, and leaves with a full round
  // trip (or a turn at k and a chain of cool-down backwards). For large m this is
  // RTT + (m-1)*period with period = max(device, link, round_trip/advance): the in-flight bound
  // RTT_j/(p-j) of 1F1B, generalised to round trips that turn before the last stage.
  // Interleaved: a partial round trip over the wrap lands on a chunk that depends on the index,
  // so it cannot be repeated at will; only those within one chunk and full ones are packed. The
  // wrap link carries messages for (v-1)G of every G*v ops, back to back, which is one more
  // segment: a group of G*v ops = (v-1)G wrap transfers + the best use of the other G.
  double steady() const {
    const int p = vp_.p, v = vp_.v, g = vp_.group, stages = vp_.stages, n = vp_.slots - 1;
    std::vector<double> segment(advance(0, stages - 1) + 2, 0);  // holds G*v too when v > 1
    double unit = 0, best = 0;
    for (int j = stages - 1; j >= 0; --j) {
      for (int k = j; k < stages; ++k) {
        if (vp_.chunk(k) != vp_.chunk(j) && k != stages - 1) continue;
        double& slot = segment[advance(j, k)];
        slot = std::max(slot, vp_.round_trip(j, k));
      }
      const int r = vp_.rank(j), c = vp_.chunk(j);
      unit = std::max(unit, vp_.chain_f[r] + vp_.chain_b[r]);
      if (j < stages - 1) unit = std::max(unit, vp_.steady_x[r]);
      if (v > 1 && j < stages - 1 && r == p - 1) {
        double& group = segment[g * v];
        group = std::max(group, (v - 1) * g * vp_.burst_x[p - 1] + fill_advance(g, segment, unit));
      }
      const int first = (v - 1 - 2 * c) * g + vp_.offset[r] + 1;  // a full round trip's advance
      const int last = (v - 1 - 2 * c) * g;                       // the final one, without the hop
      double entry = 0, exit = 0;
      for (int k = j; k < stages; ++k) {
        const int steps = std::max(0, vp_.offset[vp_.rank(k)] + (v - 1 - 2 * vp_.chunk(k)) * g);
        entry =
            std::max(entry, vp_.round_trip(j, k) + steps * chain_step(steps, max_rank(k), true));
        exit = std::max(exit, vp_.round_trip(j, k) + steps * chain_step(steps, max_rank(k), false));
      }
      const int rest = n - (2 * c * g + first + last);
      if (rest >= 0) {
        best = std::max(
            best, vp_.head[j] + entry + fill_advance(rest, segment, unit) + exit + vp_.tail[j]);
      }
      // Or leave through a turn at stage k whose cool-down backwards (offset of its rank) run
      // on to the last one, then straight down from that rank's chunk 0.
      for (int ck = c; ck < v; ++ck) {
        const int rest_k = n - (c * g + first + (ck - c) * g);
        if (rest_k < 0) continue;
        const double packed = fill_advance(rest_k, segment, unit);
        for (int rk = ck == c ? r : 0; rk < p; ++rk) {
          const int k = ck * p + rk;
          const double out = vp_.head[k] - vp_.head[j] + vp_.f[k] +
                             vp_.offset[rk] * chain_step(vp_.offset[rk], rk, false) + vp_.b[rk] +
                             vp_.tail[rk];
          best = std::max(best, vp_.head[j] + entry + packed + out);
        }
      }
    }
    return best;
  }

  int advance(int j, int k) const {
    return 2 * (vp_.chunk(k) - vp_.chunk(j)) * vp_.group + vp_.offset[vp_.rank(j)] -
           vp_.offset[vp_.rank(k)] + 1;
  }
  int max_rank(int s) const { return vp_.chunk(s) > 0 ? vp_.p - 1 : s; }

  const VirtualPipeline& vp_;
  std::vector<double> prefix_f_;  // max chunk forward over ranks 0..r (chunk 0)
  std::vector<double> prefix_b_;  // max chunk backward over ranks 1..r (chunk 0)
  std::vector<double> prefix_x_;  // prefix_x_[k]: max transfer over hops 0..k-1 (no wrap)
};

// When each rank's last backward starts and ends.
struct LastBackward {
  std::vector<double> start_s, end_s;
};

// GPipe is a flow shop of m identical jobs (machines: stages, links; latency is a pure delay),
// whose makespan is exact: sum of one job's times + (m-1) * the slowest machine. Forwards:
//   T_F = sum_j f_j + sum_h (lat_h + x_h) + (m-1) * max(max_j f_j, max_h x_h);
// the backwards start at T_F on the last stage and reach stage j after
//   sum_{k>=j} b_k + sum_{h>=j} (lat_h + x_h) + (m-1) * max(max_{k>=j} b_k, max_{h>=j} x_h).
LastBackward gpipe_last_backward(const VirtualPipeline& vp, int m) {
  const int p = vp.p;
  double slowest = 0;
  for (int j = 0; j < p; ++j) slowest = std::max(slowest, vp.f[j]);
  for (double x : vp.burst_x) slowest = std::max(slowest, x);
  const double forwards_end = vp.head[p - 1] + vp.f[p - 1] + (m - 1) * slowest;
  LastBackward last{std::vector<double>(p), std::vector<double>(p)};
  double path = 0, slowest_back = 0;
  for (int j = p - 1; j >= 0; --j) {
    path += vp.b[j] + (j < p - 1 ? vp.hop[j] : 0);
    slowest_back = std::max(slowest_back, vp.b[j]);
    if (j < p - 1) slowest_back = std::max(slowest_back, vp.burst_x[j]);
    last.end_s[j] = forwards_end + path + (m - 1) * slowest_back;
    last.start_s[j] = last.end_s[j] - vp.b[j];
  }
  return last;
}

// 1F1B and interleaved: rank 0's last backward ends at the longest path; rank r's is that less
// the drain from rank r down to rank 0 (chunk 0, where every rank's last backward runs).
LastBackward one_f_one_b_last_backward(const VirtualPipeline& vp) {
  const double rank0_end = PathFamilies(vp).longest();
  LastBackward last{std::vector<double>(vp.p), std::vector<double>(vp.p)};
  for (int r = 0; r < vp.p; ++r) {
    last.end_s[r] = rank0_end - vp.tail[r];
    last.start_s[r] = last.end_s[r] - vp.b[r];
  }
  return last;
}

// The gradient all-reduce and optimizer step after each rank's last backward ending at E
// (started at E - d). Overlapped, bucket k of K is released at E - d + (k+1)d/K and they queue
// on one link, a/K each, so the all-reduce ends at
//   max_k (E - d + (k+1)d/K + (K-k)a/K) = max(E - d + d/K + a, E + a/K)   (linear in k);
// blocking, it runs whole after E. The tied table (first and last rank) is summed between them
// once both have its gradient, then all-reduced by each after its other buckets (simulator.h).
// Then every rank sums the loss and norm with all others (world_sync_s) and steps together.
double with_gradient_sync(const PipelineTiming& timing, const LastBackward& last) {
  const double buckets = timing.allreduce_buckets;
  const size_t p = last.end_s.size();
  const bool table = sums_tied_table(timing);
  double tie_end = 0;
  if (table) {
    const double first_ready =
        timing.overlap ? last.end_s[0] : last.end_s[0] + timing.stages[0].allreduce_s;
    const double last_ready =
        timing.overlap ? last.start_s[p - 1] : last.end_s[p - 1] + timing.stages[p - 1].allreduce_s;
    tie_end = std::max(first_ready, last_ready) + timing.embedding_allreduce_s;
  }
  double synced_all = 0;  // every rank's gradients complete
  for (size_t r = 0; r < p; ++r) {
    const double a = timing.stages[r].allreduce_s;
    const double e = last.end_s[r], d = last.end_s[r] - last.start_s[r];
    double synced =
        timing.overlap ? std::max({e, e - d + d / buckets + a, e + a / buckets}) : e + a;
    // The table's all-reduce follows the tie and the rank's other buckets.
    if (table && (r == 0 || r == p - 1)) {
      synced = std::max(synced, tie_end) + timing.stages[r].table_allreduce_s;
    }
    synced_all = std::max(synced_all, synced);
  }
  return synced_all + timing.world_sync_s + timing.optimizer_s;
}

}  // namespace

double predict_iteration_s(const ScheduleSpec& spec, const PipelineTiming& timing) {
  return amortised_iteration_s(timing, predict_inner_step_s(spec, timing));
}

double predict_inner_step_s(const ScheduleSpec& spec, const PipelineTiming& timing) {
  validate_schedule_spec(spec);
  validate_pipeline_timing(spec, timing);
  const VirtualPipeline vp = fold(spec, timing);
  const LastBackward last = spec.kind == ScheduleKind::GPipe
                                ? gpipe_last_backward(vp, spec.micro_batches)
                                : one_f_one_b_last_backward(vp);
  return with_gradient_sync(timing, last);
}

}  // namespace tessel::placement
