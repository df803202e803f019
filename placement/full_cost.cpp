#include "placement/full_cost.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_map>

#include "placement/bottleneck_matching.h"
#include "placement/island_sync.h"
#include "placement/iteration_model.h"
#include "placement/layer_split.h"
#include "placement/outer_sync_cost.h"
#include "placement/ring_allreduce.h"
#include "placement/schedule.h"
#include "placement/sync_period.h"

namespace tessel::placement {
namespace {

struct FullCostScratch : CostScratch {
  std::unordered_map<uint64_t, RingPlan> rings;  // per group key
  std::vector<double> tie;                       // first-stage x last-stage pair times
  BottleneckWorkspace matching;
  std::vector<StageCapacity> capacity;
  PipelineTiming timing;  // of the candidate being evaluated
  bool feasible = true;
  double overflow_bytes = 0;
  double data_parallel_s = 0;
  std::vector<std::vector<std::vector<int>>> islands;  // per stage (low-communication mode)
};

}  // namespace

struct FullCostModel::Detail {
  LayerSplit split;
  std::vector<std::vector<int>> rings;
  CostBreakdown cost;
};

FullCostModel::FullCostModel(const Topology& topology, PartitionShape shape, Workload workload,
                             FullCostOptions options)
    : CostModel(topology, shape), workload_(std::move(workload)), options_(options) {
  workload_.validate();
  if (!(options.utilisation > 0 && options.utilisation <= 1))
    throw std::invalid_argument("utilisation must be in (0, 1]");
  spec_.kind = options.schedule;
  spec_.stages = shape.stages;
  spec_.micro_batches = workload_.micro_batches_per_replica(shape.replicas);
  spec_.chunks = options.schedule == ScheduleKind::Interleaved ? options.chunks : 1;

  // Activations in flight per stage position, counted on the schedule itself (in units of a
  // whole stage's micro-batch: an interleaved chunk holds 1/v of the stage's layers).
  const auto lists = generate_schedule(spec_);
  for (const auto& list : lists)
    in_flight_.push_back(double(max_in_flight_activations(list)) / spec_.chunks);

  const int n = devices();
  for (const Device& d : topology.devices) {
    double peak = d.peak_tflops;
    if (workload_.precision == Precision::FP32) {
      const GpuType* type = topology.gpu_type(d.gpu);
      peak = type && type->peak_tflops_fp32 > 0 ? type->peak_tflops_fp32 : d.peak_tflops / 8;
    }
    flops_per_s_.push_back(peak * 1e12 * options.utilisation);
    memory_bytes_.push_back((d.memory_gib - options.memory_reserve_gib) * double(1ULL << 30));
  }
  message_bytes_ = workload_.activation_message_bytes();
  // Every device takes part: the world's sum waits for the longest latency among them.
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) world_sync_s_ = std::max(world_sync_s_, topology.latency_ms(a, b) / 1000.0);
  const double c_dp = workload_.paper_c_dp_gb(shape.stages);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const double lat_s = topology.latency_ms(a, b) / 1000.0;
      const double bps = topology.bandwidth_gbps(a, b) * 1e9;
      const size_t i = static_cast<size_t>(a) * n + b;
      hop_weight_[i] = lat_s + 8.0 * message_bytes_ / bps;
      sync_weight_[i] = lat_s + 8.0 * c_dp * 1e9 / bps;
    }
  }
}

// Two copies of the tied table summed between devices a and b: a ring all-reduce of two, each
// sending half the table twice (reduce-scatter, all-gather) on its own direction of the link.
double FullCostModel::tie_s(int a, int b) const {
  if (a == b) return 0;
  const double lat_s = topology_.latency_ms(a, b) / 1000.0;
  const double bytes_per_s =
      std::min(topology_.bandwidth_gbps(a, b), topology_.bandwidth_gbps(b, a)) * 1e9 / 8;
  return 2 * lat_s + workload_.table_gradient_bytes() / bytes_per_s;
}

double FullCostModel::settle_sync_every(PipelineTiming& timing) const {
  const double step = predict_inner_step_s(spec_, timing);
  const DataParallelMode& mode = workload_.data_parallel;
  if (mode.low_communication() && mode.choose_sync_every)
    timing.outer_sync.sync_every =
        choose_sync_every(step, outer_sync_stall_s(timing, step), mode.sync_overhead).sync_every;
  return step;
}

// Low-communication mode: the per-step sum of an island's replicas spans their pipelines too,
// so it waits for the slowest hop's latency as well as the islands' own.
void FullCostModel::step_sum_over_hops(PipelineTiming& timing) const {
  if (!workload_.data_parallel.low_communication()) return;
  for (const HopTiming& hop : timing.hops)
    timing.world_sync_s = std::max(timing.world_sync_s, hop.latency_s);
}

std::unique_ptr<CostScratch> FullCostModel::make_scratch() const {
  return std::make_unique<FullCostScratch>();
}

void FullCostModel::fill_stages(const std::vector<const std::vector<int>*>& members,
                                CostScratch& base, Detail* detail) const {
  auto& s = static_cast<FullCostScratch&>(base);
  const int p = shape_.stages;
  s.capacity.resize(p);
  for (int st = 0; st < p; ++st) {
    StageCapacity& c = s.capacity[st];
    c.flops_per_s = INFINITY;
    c.memory_bytes = INFINITY;
    for (int d : *members[st]) {
      c.flops_per_s = std::min(c.flops_per_s, flops_per_s_[d]);
      c.memory_bytes = std::min(c.memory_bytes, memory_bytes_[d]);
    }
    c.in_flight = in_flight_[st];
    c.min_layers = spec_.chunks;
  }
  LayerSplit split = split_layers(workload_, s.capacity);

  PipelineTiming& t = s.timing;
  t.overlap = options_.overlap;
  const DataParallelMode& mode = workload_.data_parallel;
  // The per-step sum of loss and norm: over every rank, or (low-communication) inside the
  // islands' replicas, whose pipelines' hops add their latency (step_sum_over_hops).
  t.world_sync_s = mode.low_communication() ? 0.0 : world_sync_s_;
  s.islands.resize(p);
  auto ring_of = [&](const std::vector<int>& group) -> const RingPlan& {
    const uint64_t key = keys_.of(group);
    auto it = s.rings.find(key);
    if (it == s.rings.end())
      it =
          s.rings.emplace(key, plan_ring(topology_, group, workload_.paper_c_dp_gb(p) * 1e9)).first;
    return it->second;
  };
  auto island_allreduce_s = [&](const std::vector<std::vector<int>>& islands, double bytes) {
    double slowest = 0;
    for (const auto& island : islands)
      slowest = std::max(slowest, ring_allreduce_s(ring_of(island), bytes));
    return slowest;
  };
  t.stages.resize(p);
  t.optimizer_s = 0;
  double data_parallel = 0;
  for (int st = 0; st < p; ++st) {
    const bool first = st == 0, last = st == p - 1;
    const int layers = split.layers[st];
    const double fwd = layers * workload_.forward_flops_per_layer() +
                       (last ? workload_.forward_flops_head() : 0.0);
    t.stages[st].forward_s = fwd / s.capacity[st].flops_per_s;
    t.stages[st].backward_s = t.stages[st].forward_s * workload_.backward_flops_factor();

    const RingPlan& ring = ring_of(*members[st]);
    const double grad = workload_.gradient_bytes(layers, first, last);
    const int64_t params = workload_.stage_parameters(layers, first, last);
    t.stages[st].table_allreduce_s = 0;
    t.stages[st].delta_exchange_s = 0;
    if (mode.low_communication()) {
      // Every step inside each island; every H steps the delta exchange between them.
      s.islands[st] = site_islands(topology_, *members[st]);
      t.stages[st].allreduce_s = island_allreduce_s(s.islands[st], grad);
      t.stages[st].delta_exchange_s =
          delta_exchange_s(topology_, s.islands[st], delta_encoding_bytes(params, mode.delta_bits));
      t.world_sync_s = std::max(t.world_sync_s, island_latency_s(topology_, s.islands[st]));
    } else {
      t.stages[st].allreduce_s = ring_allreduce_s(ring, grad);
    }
    data_parallel = std::max(data_parallel, t.stages[st].allreduce_s);
    // The optimizer step is memory-bound: AdamW reads and writes ~36 bytes per parameter.
    t.optimizer_s =
        std::max(t.optimizer_s, 36.0 * double(params) / (options_.hbm_gbytes_per_s * 1e9));
    if (detail) detail->rings.push_back(ring.order);
  }
  // The outer sync: the stop vote goes round every rank (the longest latency); decoding the
  // deltas and the outer step touch a few arrays per parameter, priced like the optimizer step.
  // With the planner choosing H, mode.sync_every stands in until settle_sync_every replaces it.
  t.outer_sync = OuterSyncTiming{};
  if (mode.low_communication())
    t.outer_sync = OuterSyncTiming{mode.sync_every, mode.delayed, world_sync_s_, t.optimizer_s};
  // The tied table (p > 1): each replica's first and last stage sum their copies (pairs
  // matched for the fastest slowest pair), then each of the two stage groups all-reduces it.
  t.embedding_allreduce_s = 0;
  if (p > 1) {
    const std::vector<int>& firsts = *members[0];
    const std::vector<int>& lasts = *members[p - 1];
    const int d = static_cast<int>(firsts.size());
    s.tie.resize(static_cast<size_t>(d) * d);
    for (int r = 0; r < d; ++r)
      for (int c = 0; c < d; ++c)
        s.tie[static_cast<size_t>(r) * d + c] = tie_s(firsts[r], lasts[c]);
    t.embedding_allreduce_s = bottleneck_matching_value(s.tie.data(), d, s.matching);
    const double table = workload_.table_gradient_bytes();
    if (mode.low_communication()) {
      t.stages[0].table_allreduce_s = island_allreduce_s(s.islands[0], table);
      t.stages[p - 1].table_allreduce_s = island_allreduce_s(s.islands[p - 1], table);
    } else {
      t.stages[0].table_allreduce_s = ring_allreduce_s(s.rings.at(keys_.of(firsts)), table);
      t.stages[p - 1].table_allreduce_s = ring_allreduce_s(s.rings.at(keys_.of(lasts)), table);
    }
    data_parallel = std::max({data_parallel, t.embedding_allreduce_s,
                              t.stages[0].allreduce_s + t.stages[0].table_allreduce_s,
                              t.stages[p - 1].allreduce_s + t.stages[p - 1].table_allreduce_s});
  }
  s.feasible = split.feasible;
  s.overflow_bytes = split.overflow_bytes;
  s.data_parallel_s = data_parallel;  // the mode's: in finish, once H is settled
  if (detail) detail->split = std::move(split);
  if (s.rings.size() > (size_t{1} << 18)) s.rings.clear();
}

CostBreakdown FullCostModel::finish(CostScratch& base) const {
  auto& s = static_cast<FullCostScratch&>(base);
  CostBreakdown c;
  const double step = settle_sync_every(s.timing);
  c.pipeline_s = amortised_iteration_s(s.timing, step);
  c.total_s = c.pipeline_s;
  c.data_parallel_s = s.data_parallel_s;
  if (workload_.data_parallel.low_communication())
    c.data_parallel_s =
        std::max(s.timing.embedding_allreduce_s, data_parallel_comm_per_step_s(s.timing));
  c.feasible = s.feasible;
  if (!s.feasible) c.total_s = kInfeasibleCost + s.overflow_bytes / double(1ULL << 30);
  s.bound_caches();
  return c;
}

double FullCostModel::iteration(const Groups& groups, const std::vector<int>& order,
                                CostScratch& base, Detail* detail) const {
  auto& s = static_cast<FullCostScratch&>(base);
  const int p = shape_.stages, n = devices();
  std::vector<const std::vector<int>*> members(p);
  for (int st = 0; st < p; ++st) members[st] = &groups[order[st]];
  fill_stages(members, s, detail);

  // Each hop's slowest matched pair: the edge of the coarsened graph is its weight; find the
  // pair to split it into latency and transfer time.
  auto hop_timing = [&](int ga, int gb) {
    const double value = s.h[static_cast<size_t>(ga) * p + gb];
    for (int a : groups[ga])
      for (int b : groups[gb])
        if (hop_weight_[static_cast<size_t>(a) * n + b] == value) {
          const double latency = topology_.latency_ms(a, b) / 1000.0;
          return HopTiming{latency, value - latency};
        }
    return HopTiming{0, value};
  };
  s.timing.hops.resize(hop_count());
  for (int hp = 0; hp < hop_count(); ++hp)
    s.timing.hops[hp] = hop_timing(order[hp], order[(hp + 1) % p]);
  step_sum_over_hops(s.timing);

  const CostBreakdown c = finish(s);
  if (detail) detail->cost = c;
  return c.total_s;
}

PipelineTiming FullCostModel::pipeline_timing(const std::vector<std::vector<int>>& pipelines,
                                              std::vector<int>* layer_split) const {
  const int p = shape_.stages, n = devices();
  if (static_cast<int>(pipelines.size()) != shape_.replicas)
    throw std::invalid_argument("expected " + std::to_string(shape_.replicas) + " pipelines");
  Groups columns(p);
  for (const auto& pipe : pipelines) {
    if (static_cast<int>(pipe.size()) != p)
      throw std::invalid_argument("a pipeline must have " + std::to_string(p) + " devices");
    for (int st = 0; st < p; ++st) {
      if (pipe[st] < 0 || pipe[st] >= n)
        throw std::invalid_argument("device " + std::to_string(pipe[st]) + " out of range");
      columns[st].push_back(pipe[st]);
    }
  }
  auto scratch = make_scratch();
  auto& s = static_cast<FullCostScratch&>(*scratch);
  std::vector<const std::vector<int>*> members(p);
  for (int st = 0; st < p; ++st) members[st] = &columns[st];
  Detail detail;
  fill_stages(members, s, &detail);
  // Each hop: the slowest replica's pair (every replica's iteration waits for the slowest).
  s.timing.hops.assign(hop_count(), HopTiming{});
  for (int hp = 0; hp < hop_count(); ++hp) {
    double worst = -1;
    for (const auto& pipe : pipelines) {
      const int a = pipe[hp], b = pipe[(hp + 1) % p];
      const double w = hop_weight_[static_cast<size_t>(a) * n + b];
      if (w > worst) {
        worst = w;
        const double latency = topology_.latency_ms(a, b) / 1000.0;
        s.timing.hops[hp] = HopTiming{latency, w - latency};
      }
    }
  }
  step_sum_over_hops(s.timing);
  // The tied table's pairs are the replicas' own first and last stages.
  if (p > 1) {
    s.timing.embedding_allreduce_s = 0;
    for (const auto& pipe : pipelines) {
      s.timing.embedding_allreduce_s =
          std::max(s.timing.embedding_allreduce_s, tie_s(pipe[0], pipe[p - 1]));
    }
  }
  settle_sync_every(s.timing);
  if (layer_split) *layer_split = detail.split.layers;
  return s.timing;
}

// The stage order: the shortest path (cycle for interleaved) through the coarsened graph, in
// both directions (and, for a cycle, from every start): the sum of hops is the same, but the
// first stage keeps the most activations in flight and the last one computes the head.
double FullCostModel::best_order(const Groups& groups, CostScratch& scratch,
                                 std::vector<int>* best) const {
  coarsened_graph(groups, scratch);
  const int p = shape_.stages;
  const bool cycle = spec_.kind == ScheduleKind::Interleaved;
  std::vector<int> order = cycle ? shortest_cycle(scratch.h.data(), p, scratch.path).order
                                 : shortest_open_path(scratch.h.data(), p, scratch.path).order;
  double best_cost = INFINITY;
  const int starts = cycle ? p : 1;
  for (int direction = 0; direction < 2; ++direction) {
    for (int start = 0; start < starts; ++start) {
      const double c = iteration(groups, order, scratch, nullptr);
      if (c < best_cost) {
        best_cost = c;
        if (best) *best = order;
      }
      std::rotate(order.begin(), order.begin() + 1, order.end());
    }
    std::reverse(order.begin(), order.end());
  }
  return best_cost;
}

double FullCostModel::cost(const Groups& groups, CostScratch& scratch) const {
  return best_order(groups, scratch, nullptr);
}

Evaluation FullCostModel::evaluate(const Groups& groups) const {
  auto scratch = make_scratch();
  std::vector<int> order;
  best_order(groups, *scratch, &order);
  return evaluate_in_order(groups, order);
}

Evaluation FullCostModel::evaluate_in_order(const Groups& groups,
                                            const std::vector<int>& stage_group) const {
  auto scratch = make_scratch();
  coarsened_graph(groups, *scratch);
  Detail detail;
  iteration(groups, stage_group, *scratch, &detail);
  Evaluation e;
  e.cost = detail.cost;
  e.stage_group = stage_group;
  e.layer_split = detail.split.layers;
  e.predicted_iteration_s = detail.cost.feasible ? detail.cost.pipeline_s : INFINITY;
  e.dp_rings = std::move(detail.rings);
  const int p = shape_.stages;
  for (int hp = 0; hp < hop_count(); ++hp) {
    HopMatching hop = match_groups(groups, stage_group[hp], stage_group[(hp + 1) % p]);
    hop.from_stage = hp;
    hop.to_stage = (hp + 1) % p;
    e.hops.push_back(std::move(hop));
  }
  return e;
}

}  // namespace tessel::placement
