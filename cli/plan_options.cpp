#include "cli/plan_options.h"

#include <charconv>
#include <stdexcept>

#include "cli/validators.h"
#include "placement/limits.h"
#include "placement/sync_period.h"

namespace tessel::cli {

using namespace tessel::placement;

namespace {

// "auto" or what `inner` accepts; the refusal says both.
CLI::Validator auto_or(CLI::Validator inner) {
  return CLI::Validator(
      [inner](std::string& text) -> std::string {
        if (text == "auto") return "";
        const std::string why = inner(text);
        return why.empty() ? ""
                           : "must be auto or " + why.substr(why.find("must be ") == 0 ? 8 : 0);
      },
      "auto|" + inner.get_description());
}

}  // namespace

void PlanOptions::add_to(CLI::App& cmd, bool with_search) {
  cmd.add_option("--topology", topology_file, "Topology YAML file (examples/topologies/)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd.add_option("--stages", stages, "Pipeline stages D_PP")
      ->required()
      ->check(count_in(1, kMaxStages, "every stage needs a layer; the layer limit"));
  cmd.add_option("--replicas", replicas, "Data-parallel replicas D_DP")
      ->required()
      ->check(count_in(1, kMaxReplicas, "the planner's replica matching"));
  auto* model = cmd.add_option("--model", model_file, "Workload YAML file (examples/models/)")
                    ->check(CLI::ExistingFile);
  cmd.add_option("--preset", preset,
                 "Named workload: gpt3-1.3b (default), gpt3-6.7b, gpt2-124m, gpt2-350m, gpt2-1.5b")
      ->excludes(model);
  cmd.add_option("--cost-model", cost_model, "paper (the DT-FM objective) or full (iteration time)")
      ->check(CLI::IsMember({"paper", "full"}));
  cmd.add_option("--c-dp-gb", c_dp_gb,
                 "Paper mode: one stage's gradient GB (default: from the model)")
      ->check(number_in(0, kMaxPaperGb, false, "GB"));
  cmd.add_option("--c-pp-gb", c_pp_gb,
                 "Paper mode: one replica's activation GB (default: from the model)")
      ->check(number_in(0, kMaxPaperGb, false, "GB"));
  cmd.add_option("--schedule", schedule, "Pipeline schedule: gpipe, 1f1b, interleaved")
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved"}));
  cmd.add_option("--chunks", chunks, "Model chunks per device (interleaved)")
      ->check(count_in(2, kMaxChunks));
  cmd.add_flag("--no-overlap", no_overlap,
               "Model communication as blocking compute (default: overlapped on its own streams)");
  cmd.add_option("--data-parallel", data_parallel,
                 "synchronous or low-communication (default: the model file's data_parallel, "
                 "else synchronous)")
      ->check(CLI::IsMember({"synchronous", "low-communication"}));
  cmd.add_option("--sync-every", sync_every,
                 "Low-communication: H, inner steps between outer syncs, or auto (default): the "
                 "smallest of 1, 2, 5, ..., 1000 whose sync adds at most --sync-overhead to the "
                 "inner step, for each layout")
      ->check(auto_or(count_in(1, kMaxSyncEvery, "the runtime's limit")));
  cmd.add_option("--sync-overhead", sync_overhead,
                 "Low-communication, --sync-every auto: what the amortised outer sync may add to "
                 "the inner step, a fraction (default 0.05)")
      ->check(number_in(0, kMaxSyncOverhead, true, "(a fraction of the inner step)"));
  cmd.add_option("--delta-bits", delta_bits,
                 "Low-communication: bits per element of the exchanged delta: 32, 8, 4 or auto "
                 "(default: 8, the fewest within 2% of fp32's loss as measured)")
      ->check(CLI::IsMember({"auto", "32", "8", "4"}));
  cmd.add_flag("--blocking-sync", blocking_sync,
               "Low-communication: the outer sync is waited at its step (default: it overlaps "
               "the next inner step)");
  if (!with_search) return;
  cmd.add_option("--strategy", strategy, "evolutionary, random, ordered, kl or exhaustive")
      ->check(CLI::IsMember({"evolutionary", "random", "ordered", "kl", "exhaustive"}));
  auto* evals = cmd.add_option("--evaluations", evaluations, "Evaluation budget (default 5000)")
                    ->check(count_in(1, kMaxSearchEvaluations));
  cmd.add_option("--time-limit", time_limit_s, "Search for this many seconds instead")
      ->check(number_in(0, kMaxSearchSeconds, true, "s"))
      ->excludes(evals);
  cmd.add_option("--seed", seed, "Random seed: the same seed gives the same placement")
      ->check(seed_value());
  cmd.add_option("--threads", threads, "Worker threads (default: all cores)")
      ->check(count_in(0, kMaxSearchThreads, "0: all cores"));
  cmd.add_option("--swap-trials", swap_trials,
                 "Evolutionary: random swaps tried on the true cost per offspring (default 0)")
      ->check(count_in(0, kMaxSearchEvaluations));
  cmd.add_flag("--no-seeds", no_seeds,
               "Evolutionary: start from random partitions only, as the paper's GA");
}

namespace {

// A flag's integer (its validator checked it; PlanOptions filled by a caller may not be).
int flag_integer(const char* flag, const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || ptr != end)
    throw std::invalid_argument(std::string(flag) + ": must be auto or an integer, got '" + text +
                                "'");
  return value;
}

// The flags over the model file's data_parallel section. The mode's settings without the mode
// are refused, naming the flag. The mode turned on by the flag chooses H and the bits (auto)
// unless they are given, as a model file's section without them does.
void apply_data_parallel_flags(const PlanOptions& o, DataParallelMode& mode) {
  if (o.data_parallel) {
    const DataParallelKind kind = parse_data_parallel_kind(*o.data_parallel);
    if (kind != mode.kind)
      mode = kind == DataParallelKind::LowCommunication ? low_communication_chosen()
                                                        : DataParallelMode{};
  }
  const char* flag = o.sync_every      ? "--sync-every"
                     : o.delta_bits    ? "--delta-bits"
                     : o.sync_overhead ? "--sync-overhead"
                     : o.blocking_sync ? "--blocking-sync"
                                       : nullptr;
  if (flag && !mode.low_communication())
    throw std::invalid_argument(std::string(flag) +
                                " applies to the low-communication mode only: add "
                                "--data-parallel low-communication");
  if (o.sync_every) {
    mode.choose_sync_every = *o.sync_every == "auto";
    if (!mode.choose_sync_every) {
      mode.sync_every = flag_integer("--sync-every", *o.sync_every);
      mode.sync_overhead = kDefaultSyncOverhead;
    }
  }
  if (o.delta_bits) {
    mode.choose_delta_bits = *o.delta_bits == "auto";
    mode.delta_bits = mode.choose_delta_bits ? choose_delta_bits().bits
                                             : flag_integer("--delta-bits", *o.delta_bits);
  }
  if (o.sync_overhead) {
    if (!mode.choose_sync_every)
      throw std::invalid_argument(
          "--sync-overhead applies when the planner chooses H: H is given (" +
          std::to_string(mode.sync_every) + "); add --sync-every auto");
    mode.sync_overhead = *o.sync_overhead;
  }
  if (o.blocking_sync) mode.delayed = false;
  mode.validate("--data-parallel");
}

}  // namespace

PlanInputs load_plan_inputs(const PlanOptions& o) {
  PlanInputs in;
  in.topology = load_topology_file(o.topology_file);
  in.workload = o.model_file.empty() ? workload_preset(o.preset) : load_workload_file(o.model_file);
  // The flags' validators bound each; checked again here for callers that fill PlanOptions.
  const auto devices = checked_mul(o.stages, o.replicas);
  if (o.stages < 1 || o.replicas < 1 || !devices || *devices > kMaxDevices)
    throw std::invalid_argument(
        "--stages " + std::to_string(o.stages) + " x --replicas " + std::to_string(o.replicas) +
        (devices ? " = " + std::to_string(*devices) : std::string(" overflows")) +
        " devices: each must be >= 1 and the product at most " + std::to_string(kMaxDevices));
  in.shape = {o.stages, o.replicas};
  apply_data_parallel_flags(o, in.workload.data_parallel);
  if (in.topology.size() != *devices)
    throw std::invalid_argument(o.topology_file + " has " + std::to_string(in.topology.size()) +
                                " devices, but --stages " + std::to_string(o.stages) +
                                " x --replicas " + std::to_string(o.replicas) + " = " +
                                std::to_string(*devices));
  if (in.workload.layers < o.stages)
    throw std::invalid_argument("the model has " + std::to_string(in.workload.layers) +
                                " layers, fewer than --stages " + std::to_string(o.stages));
  FullCostOptions full;
  full.schedule = parse_schedule_kind(o.schedule);
  full.chunks = o.chunks;
  full.overlap = !o.no_overlap;
  const int64_t virtual_stages = int64_t{o.stages} * o.chunks;  // both bounded: no overflow
  if (full.schedule == ScheduleKind::Interleaved && in.workload.layers < virtual_stages)
    throw std::invalid_argument("the interleaved schedule needs at least --stages x --chunks = " +
                                std::to_string(virtual_stages) + " layers; the model has " +
                                std::to_string(in.workload.layers));
  in.full = std::make_unique<FullCostModel>(in.topology, in.shape, in.workload, full);
  if (o.cost_model == "paper") {
    PaperCostParams params;
    params.c_dp_gb = o.c_dp_gb.value_or(in.workload.paper_c_dp_gb(o.stages));
    params.c_pp_gb = o.c_pp_gb.value_or(in.workload.paper_c_pp_gb(o.replicas));
    in.paper = std::make_unique<PaperCostModel>(in.topology, in.shape, params);
    if (in.workload.data_parallel.low_communication())
      throw std::invalid_argument(
          "--cost-model paper: the paper's objective has no sync period; the low-communication "
          "mode needs --cost-model full");
  } else if (o.c_dp_gb || o.c_pp_gb) {
    throw std::invalid_argument("--c-dp-gb and --c-pp-gb apply to --cost-model paper only");
  }
  in.search.strategy = parse_strategy(o.strategy);
  in.search.evaluations = o.time_limit_s > 0 ? 0 : o.evaluations;
  in.search.time_limit_s = o.time_limit_s;
  in.search.seed = o.seed;
  in.search.threads = o.threads;
  in.search.swap_trials = o.swap_trials;
  in.search.structured_seeds = !o.no_seeds;
  return in;
}

}  // namespace tessel::cli
