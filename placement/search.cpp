#include "placement/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <system_error>
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
// The exhaustive search evaluates its partitions in chunks, checking `cancel` between them.
constexpr int kExhaustiveChunk = 1024;

// Runs job(i, worker) for i in [0, count) on `threads` workers. The first exception a job
// throws stops the others from taking new items; every thread is joined and it is rethrown
// here. A thread that cannot be started leaves its share to the others (the result does not
// depend on the number of workers).
template <typename Job>
void parallel_for(int count, int threads, Job&& job) {
  if (threads <= 1 || count <= 1) {
    for (int i = 0; i < count; ++i) job(i, 0);
    return;
  }
  std::atomic<int> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto work = [&](int worker) noexcept {
    try {
      for (int i; (i = next.fetch_add(1)) < count;) job(i, worker);
    } catch (...) {
      next.store(count);
      const std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  const int extra = std::min(threads, count) - 1;
  pool.reserve(extra);
  for (int w = 1; w <= extra; ++w) {
    try {
      pool.emplace_back(work, w);
    } catch (const std::system_error&) {
      break;  // no more threads: the started ones and this one do the work
    }
  }
  work(0);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

class Searcher {
 public:
  Searcher(const CostModel& model, const SearchOptions& options)
      : model_(model), options_(options), shape_(model.shape()), start_(Clock::now()) {
    check_search_options(options);
    if (shape_.stages < 1 || shape_.replicas < 1)
      throw std::invalid_argument("search: the shape is " + std::to_string(shape_.stages) +
                                  " stages x " + std::to_string(shape_.replicas) +
                                  " replicas; both must be at least 1");
    const size_t n = static_cast<size_t>(shape_.devices());  // throws on overflow
    if (model.hop_weight().size() != n * n || model.sync_weight().size() != n * n)
      throw std::invalid_argument("search: the cost model's weights are not " + std::to_string(n) +
                                  " x " + std::to_string(n));
    threads_ = options.threads > 0
                   ? options.threads
                   : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u,
                                                 static_cast<unsigned>(kMaxSearchThreads)));
    // No worker index ever exceeds the largest batch: the genetic and random searches work in
    // batches of kBatch, the exhaustive one in chunks of kExhaustiveChunk.
    threads_ = std::min(threads_, options.strategy == Strategy::Exhaustive
                                      ? kExhaustiveChunk
                                      : std::max(kBatch, options.population));
    for (int w = 0; w < threads_; ++w) scratch_.push_back(model.make_scratch());
    budget_ = options.evaluations > 0 ? options.evaluations : std::numeric_limits<long>::max();
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
    if (result_.best.empty()) throw std::logic_error("search: no candidate was evaluated");
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
  // Whether to stop before the next batch: cancelled, or out of time. The first batch always
  // runs, so that there is a best placement to return.
  bool must_stop() {
    if (evaluations_ == 0) return false;
    if (options_.cancel && options_.cancel->load(std::memory_order_relaxed)) {
      result_.interrupted = true;
      return true;
    }
    return out_of_time();
  }

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
    if (options_.progress)
      options_.progress(
          {evaluations_, result_.best_cost, elapsed(), options_.evaluations > 0 ? budget_ : 0});
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
    while (remaining() > 0 && !must_stop()) {
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
    std::vector<double> cost(kExhaustiveChunk);
    for (size_t first = 0; first < all.size() && !must_stop(); first += kExhaustiveChunk) {
      const int count = static_cast<int>(std::min<size_t>(kExhaustiveChunk, all.size() - first));
      parallel_for(count, threads_,
                   [&](int i, int worker) { cost[i] = evaluate(all[first + i], worker); });
      for (int i = 0; i < count; ++i) record(all[first + i], cost[i]);
      report();
    }
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
    while (remaining() > 0 && !must_stop()) {
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

void check_search_options(const SearchOptions& o) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("search: " + what); };
  if (o.evaluations < 0 || o.evaluations > kMaxSearchEvaluations)
    fail("evaluations: " + std::to_string(o.evaluations) + " is not in 1.." +
         std::to_string(kMaxSearchEvaluations) +
         " (a larger budget runs for hours; give a time limit instead)");
  if (!std::isfinite(o.time_limit_s) || o.time_limit_s < 0 || o.time_limit_s > kMaxSearchSeconds)
    fail("time limit: " + std::to_string(o.time_limit_s) + " s is not a number of seconds in 0.." +
         std::to_string(static_cast<long>(kMaxSearchSeconds)));
  if (o.evaluations == 0 && o.time_limit_s == 0) fail("give an evaluation budget or a time limit");
  if (o.threads < 0 || o.threads > kMaxSearchThreads)
    fail("threads: " + std::to_string(o.threads) + " is not in 0.." +
         std::to_string(kMaxSearchThreads) + " (0: all cores)");
  if (o.population < 2 || o.population > kMaxSearchPopulation)
    fail("population: " + std::to_string(o.population) + " is not in 2.." +
         std::to_string(kMaxSearchPopulation));
  if (o.crossover_points < 0)
    fail("crossover points: " + std::to_string(o.crossover_points) + " is negative");
  if (o.swap_trials < 0 || o.swap_trials > kMaxSearchEvaluations)
    fail("swap trials: " + std::to_string(o.swap_trials) + " is not in 0.." +
         std::to_string(kMaxSearchEvaluations));
}

SearchResult search_placement(const CostModel& model, const SearchOptions& options) {
  return Searcher(model, options).run();
}

std::vector<Labels> all_balanced_partitions(const PartitionShape& shape, long limit) {
  const int n = shape.devices(), g = shape.stages, d = shape.replicas;
  // Count first: n! / (d!^g g!) unlabelled partitions, in logarithms (n! overflows a double
  // past 170 devices).
  const double log_count = std::lgamma(n + 1.0) - g * std::lgamma(d + 1.0) - std::lgamma(g + 1.0);
  if (log_count > std::log(double(limit)) + 1e-9) {
    char count[64];
    const double log10_count = log_count / std::log(10.0);
    if (log10_count < 300)
      std::snprintf(count, sizeof count, "%.3g", std::exp(log_count));
    else
      std::snprintf(count, sizeof count, "10^%.0f", log10_count);
    throw std::invalid_argument("exhaustive search of " + std::to_string(n) + " devices (" +
                                std::to_string(g) + " groups of " + std::to_string(d) +
                                ") would evaluate about " + count + " partitions (limit " +
                                std::to_string(limit) + "; use another strategy)");
  }
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
