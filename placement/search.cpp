#include "placement/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>

namespace tessel::placement {

const char* to_string(Strategy s) {
  switch (s) {
    case Strategy::Evolutionary:
      return "evolutionary";
    case Strategy::Random:
      return "random";
    case Strategy::Ordered:
      return "ordered";
    case Strategy::KernighanLin:
      return "kl";
    case Strategy::Exhaustive:
      return "exhaustive";
  }
  return "?";
}

Strategy parse_strategy(const std::string& s) {
  for (Strategy k : {Strategy::Evolutionary, Strategy::Random, Strategy::Ordered,
                     Strategy::KernighanLin, Strategy::Exhaustive})
    if (s == to_string(k)) return k;
  throw std::invalid_argument("unknown strategy '" + s +
                              "' (expected evolutionary, random, ordered, kl or exhaustive)");
}

namespace {

using Clock = std::chrono::steady_clock;

// Offspring are made in batches from one snapshot of the population and merged in trial
// order, so a seed gives the same placement whatever the number of threads.
constexpr int kBatch = 16;

// Runs job(i, worker) for i in [0, count) on `threads` workers.
template <typename Job>
void parallel_for(int count, int threads, Job&& job) {
  if (threads <= 1 || count <= 1) {
    for (int i = 0; i < count; ++i) job(i, 0);
    return;
  }
  std::atomic<int> next{0};
  auto work = [&](int worker) {
    for (int i; (i = next.fetch_add(1)) < count;) job(i, worker);
  };
  std::vector<std::thread> pool;
  const int extra = std::min(threads, count) - 1;
  for (int w = 1; w <= extra; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& t : pool) t.join();
}

class Searcher {
 public:
  Searcher(const CostModel& model, const SearchOptions& options)
      : model_(model), options_(options), shape_(model.shape()), start_(Clock::now()) {
    threads_ =
        options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
    for (int w = 0; w < threads_; ++w) scratch_.push_back(model.make_scratch());
    budget_ = options.evaluations > 0 ? options.evaluations : std::numeric_limits<long>::max();
    if (options.evaluations <= 0 && options.time_limit_s <= 0)
      throw std::invalid_argument("give an evaluation budget or a time limit");
  }

  SearchResult run() {
    switch (options_.strategy) {
      case Strategy::Ordered: {
        const Labels l = ordered_labels(shape_);
        record(l, evaluate(l, 0));
        break;
      }
      case Strategy::Random:
        run_random();
        break;
      case Strategy::Evolutionary:
        run_genetic(Gain::Custom);
        break;
      case Strategy::KernighanLin:
        run_genetic(Gain::KernighanLin);
        break;
      case Strategy::Exhaustive:
        run_exhaustive();
        break;
    }
    result_.evaluations = evaluations_;
    result_.elapsed_s = elapsed();
    result_.convergence.emplace_back(evaluations_, result_.best_cost);
    return std::move(result_);
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  bool out_of_time() const {
    return options_.time_limit_s > 0 && elapsed() >= options_.time_limit_s;
  }
  long remaining() const { return budget_ - evaluations_; }

  double evaluate(const Labels& labels, int worker) {
    return model_.cost(groups_from_labels(labels, shape_), *scratch_[worker]);
  }

  // Counts one evaluation and keeps the best; called in trial order.
  void record(const Labels& labels, double cost) {
    ++evaluations_;
    if (result_.best.empty() || cost < result_.best_cost) {
      result_.best = labels;
      result_.best_cost = cost;
      result_.convergence.emplace_back(evaluations_, cost);
    }
  }

  void report() {
    if (options_.progress) options_.progress({evaluations_, result_.best_cost, elapsed()});
  }

  // Evaluates `count` candidates made by make(index, rng) in parallel; returns their costs.
  template <typename Make>
  std::vector<double> batch(int count, long first_index, std::vector<Labels>& out, Make&& make) {
    out.resize(count);
    std::vector<double> cost(count);
    parallel_for(count, threads_, [&](int i, int worker) {
      Rng rng = Rng::stream(options_.seed, static_cast<uint64_t>(first_index + i));
      out[i] = make(i, rng, worker);
      cost[i] = evaluate(out[i], worker);
    });
    return cost;
  }

  void run_random() {
    double sum = 0;
    long index = 0;
    std::vector<Labels> cand;
    while (remaining() > 0 && !out_of_time()) {
      const int count = static_cast<int>(std::min<long>(kBatch, remaining()));
      const auto cost =
          batch(count, index, cand, [&](int, Rng& rng, int) { return random_labels(shape_, rng); });
      for (int i = 0; i < count; ++i) record(cand[i], cost[i]), sum += cost[i];
      index += count;
      report();
    }
    result_.random_mean_cost = index > 0 ? sum / index : 0;
  }

  void run_exhaustive() {
    const auto all = all_balanced_partitions(shape_);
    std::vector<double> cost(all.size());
    parallel_for(static_cast<int>(all.size()), threads_,
                 [&](int i, int worker) { cost[i] = evaluate(all[i], worker); });
    for (size_t i = 0; i < all.size(); ++i) record(all[i], cost[i]);
  }

  // First-improvement descent on the true cost: `trials` random swaps of two devices in
  // different groups, each kept only if it lowers the cost. Returns the evaluations made.
  long swap_descent(Labels& labels, double& cost, long trials, Rng& rng, int worker) {
    const int n = shape_.devices();
    if (shape_.stages < 2) return 0;
    for (long t = 0; t < trials; ++t) {
      int x = rng.below(n), y = rng.below(n);
      while (labels[x] == labels[y]) y = rng.below(n);
      std::swap(labels[x], labels[y]);
      const double c = evaluate(labels, worker);
      if (c <= cost)
        cost = c;  // sideways moves too: max-type costs have wide plateaus
      else
        std::swap(labels[x], labels[y]);
    }
    return trials;
  }

  bool same_partition(const Labels& a, const Labels& b) const {
    return groups_from_labels(a, shape_) == groups_from_labels(b, shape_);
  }

  // Swaps max(2, N/32) random pairs of devices in different groups.
  void mutate(Labels& labels, Rng& rng) const {
    const int n = shape_.devices();
    if (shape_.stages < 2) return;
    for (int k = std::max(2, n / 32); k > 0;) {
      const int x = rng.below(n), y = rng.below(n);
      if (labels[x] == labels[y]) continue;
      std::swap(labels[x], labels[y]);
      --k;
    }
  }

  // All devices, starting from device 0, each followed by its nearest unvisited device.
  std::vector<int> nearest_neighbour_chain() const {
    const int n = shape_.devices();
    const std::vector<double>& w = model_.hop_weight();
    std::vector<int> chain{0};
    std::vector<char> used(n, 0);
    used[0] = 1;
    while (static_cast<int>(chain.size()) < n) {
      const int last = chain.back();
      int next = -1;
      for (int d = 0; d < n; ++d)
        if (!used[d] && (next < 0 || w[static_cast<size_t>(last) * n + d] <
                                         w[static_cast<size_t>(last) * n + next]))
          next = d;
      used[next] = 1;
      chain.push_back(next);
    }
    return chain;
  }

  // Renames parent a's groups to the groups of parent b they overlap most (greedy), so that
  // taking a few labels from a into b means "put this device with the same companions".
  Labels aligned(const Labels& a, const Labels& b) const {
    const int g = shape_.stages;
    std::vector<int> overlap(static_cast<size_t>(g) * g, 0);
    for (size_t d = 0; d < a.size(); ++d) ++overlap[static_cast<size_t>(a[d]) * g + b[d]];
    std::vector<int> rename(g, -1);
    std::vector<char> taken(g, 0);
    for (int round = 0; round < g; ++round) {
      int best = -1, ba = 0, bb = 0;
      for (int x = 0; x < g; ++x) {
        if (rename[x] >= 0) continue;
        for (int y = 0; y < g; ++y)
          if (!taken[y] && overlap[static_cast<size_t>(x) * g + y] > best)
            best = overlap[static_cast<size_t>(x) * g + y], ba = x, bb = y;
      }
      rename[ba] = bb;
      taken[bb] = 1;
    }
    Labels out(a.size());
    for (size_t d = 0; d < a.size(); ++d) out[d] = rename[a[d]];
    return out;
  }

  // k-point crossover of partition strings, then the reference's balance repair: scanning
  // devices in id order, a device whose group is over-full moves to the lowest-numbered group
  // that is under-full.
  Labels crossover(const Labels& p1, const Labels& p2, Rng& rng) const {
    const int n = shape_.devices(), g = shape_.stages, d = shape_.replicas;
    Labels child = p2;
    const Labels donor = aligned(p1, p2);
    const int points = std::min(options_.crossover_points, n);
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    for (int i = 0; i < points; ++i) {  // partial Fisher-Yates: `points` distinct devices
      std::swap(order[i], order[i + rng.below(n - i)]);
      child[order[i]] = donor[order[i]];
    }
    std::vector<int> count(g, 0);
    for (int l : child) ++count[l];
    for (int v = 0; v < n; ++v) {
      if (count[child[v]] <= d) continue;
      int to = 0;
      while (count[to] >= d) ++to;
      --count[child[v]];
      child[v] = to;
      ++count[to];
    }
    return child;
  }

  void run_genetic(Gain gain) {
    const int pop_size =
        static_cast<int>(std::max<long>(2, std::min<long>(options_.population, remaining())));
    // Two structured seeds, then random partitions: devices chained by nearest neighbour
    // (pipeline-hop weight) are cut into consecutive groups (well-connected devices together)
    // and dealt round-robin (each group spread over the clusters). Either is often near a
    // good placement; the search can only improve on them.
    // (The Kernighan-Lin baseline starts from random partitions only, as the paper's did.)
    const std::vector<int> chain = nearest_neighbour_chain();
    const int seeds = gain == Gain::Custom && options_.structured_seeds ? 2 : 0;
    std::vector<Labels> pop;
    std::vector<double> pop_cost = batch(pop_size, 0, pop, [&](int i, Rng& rng, int) {
      if (i >= seeds) return random_labels(shape_, rng);
      Labels labels(shape_.devices());
      for (int k = 0; k < shape_.devices(); ++k)
        labels[chain[k]] = i == 0 ? k / shape_.replicas : k % shape_.stages;
      return labels;
    });
    for (int i = 0; i < pop_size; ++i) record(pop[i], pop_cost[i]);
    report();

    std::vector<std::unique_ptr<CyclicPartitioning>> search;
    for (int w = 0; w < threads_; ++w)
      search.push_back(std::make_unique<CyclicPartitioning>(model_.hop_weight(),
                                                            model_.sync_weight(), shape_, gain));

    long trial = pop_size;
    const long swap_trials = gain == Gain::Custom ? options_.swap_trials : 0;
    const long per_child = 1 + swap_trials;
    std::vector<Labels> kids(kBatch);
    std::vector<double> cost(kBatch);
    std::vector<long> used(kBatch);
    std::vector<std::pair<int, int>> parents(kBatch);
    while (remaining() > 0 && !out_of_time()) {
      const int count = static_cast<int>(std::clamp<long>(remaining() / per_child, 1, kBatch));
      const long trials = std::min(swap_trials, remaining() / count - 1);
      parallel_for(count, threads_, [&](int i, int worker) {
        Rng rng = Rng::stream(options_.seed, static_cast<uint64_t>(trial + i));
        const int a = rng.below(pop_size), b = rng.below(pop_size);
        parents[i] = {a, b};
        Labels child = crossover(pop[a], pop[b], rng);
        search[worker]->run(child);
        // A child that is one of its parents again adds nothing: shake it (a few random swaps
        // between groups) and search from there, so a converged population keeps exploring.
        for (int round = 0;
             round < 3 && (same_partition(child, pop[a]) || same_partition(child, pop[b]));
             ++round) {
          mutate(child, rng);
          search[worker]->run(child);
        }
        cost[i] = evaluate(child, worker);
        used[i] = 1 + swap_descent(child, cost[i], std::max(0L, trials), rng, worker);
        kids[i] = std::move(child);
      });
      // Steady-state replacement, fixed: the offspring takes the slot of the worse parent
      // only when it is better than that parent.
      for (int i = 0; i < count; ++i) {
        evaluations_ += used[i] - 1;
        record(kids[i], cost[i]);
        const auto [a, b] = parents[i];
        const int worse = pop_cost[a] >= pop_cost[b] ? a : b;
        if (cost[i] < pop_cost[worse]) {
          pop[worse] = std::move(kids[i]);
          pop_cost[worse] = cost[i];
        }
      }
      trial += count;
      report();
    }
  }

  const CostModel& model_;
  const SearchOptions& options_;
  PartitionShape shape_;
  Clock::time_point start_;
  int threads_ = 1;
  long budget_ = 0;
  long evaluations_ = 0;
  std::vector<std::unique_ptr<CostScratch>> scratch_;
  SearchResult result_;
};

}  // namespace

SearchResult search_placement(const CostModel& model, const SearchOptions& options) {
  return Searcher(model, options).run();
}

std::vector<Labels> all_balanced_partitions(const PartitionShape& shape, long limit) {
  const int n = shape.devices(), g = shape.stages, d = shape.replicas;
  // Count first: n! / (d!^g g!) unlabelled partitions.
  double count = 1;
  for (int i = 1; i <= n; ++i) count *= i;
  for (int k = 0; k < g; ++k)
    for (int i = 1; i <= d; ++i) count /= i;
  for (int i = 1; i <= g; ++i) count /= i;
  if (count > double(limit))
    throw std::invalid_argument("exhaustive search of " + std::to_string(n) +
                                " devices would evaluate " + std::to_string(count) +
                                " partitions (limit " + std::to_string(limit) + ")");
  std::vector<Labels> out;
  Labels labels(n, -1);
  std::vector<int> size(g, 0);
  // Canonical form: a device either joins an open group with room or opens the next group.
  auto place = [&](auto&& self, int v, int open) -> void {
    if (v == n) {
      out.push_back(labels);
      return;
    }
    for (int k = 0; k < open; ++k) {
      if (size[k] == d) continue;
      labels[v] = k, ++size[k];
      self(self, v + 1, open);
      --size[k];
    }
    if (open < g) {
      labels[v] = open, ++size[open];
      self(self, v + 1, open + 1);
      --size[open];
    }
  };
  place(place, 0, 0);
  return out;
}

}  // namespace tessel::placement
