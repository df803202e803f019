// bench/runtime (c): the low-communication data-parallel mode (issue 15,
// noderuntime/stage/outer_sync.h) against synchronous data parallelism, through `tessel local`.
//
// Speed (the default): the job file (examples/local/fables-low-communication.yaml: two replicas,
// one per site, over a 50 Mbit/s, 50 ms link) runs twice in one invocation, as written and with
// its data_parallel section removed (synchronous: every step's gradients all-reduced across the
// link). For each: tokens/s (the global batch over the run's iteration time: the median step
// time synchronously, the mean in the mode, whose sync steps are longer; the first step left out)
// and the final loss: the mean over the last 10% of the steps (at least 10) of the mean over the
// ranks of the loss each reports (in the mode each replica reports its own batch's loss; the mean
// over ranks is the global batch's). Goals: >= 3x the tokens/s, final loss within 3%.
//
// Study (--study DIR): loss against tokens for synchronous data parallelism and H in
// {10, 50, 100} x deltas of 32, 8 and 4 bits, on the same seeds, for the job file's model and
// data and for a larger synthetic-data job, with the job file's outer optimizer; the links are
// made fast (the loss per token does not
// depend on them; the runs take minutes, not hours). Writes DIR/<job>.csv (step, tokens, loss
// per configuration) and DIR/<job>.svg, and prints the final losses with the share of the run's
// tokens that synchronous training needed to reach each. Steps: the job file's (fables: 300, one
// pass over its 400 KB takes 390) and 600 for the synthetic job (a third of its 2 MB), so that
// neither sees a token twice; --steps sets both.
//   low_communication_bench [--job FILE] [--study DIR] [--steps N] [--stage-binary PATH] [--keep]
// Run from the repository root, with TESSEL_STAGE_BINARY=build/noderuntime/stage/tessel-stage.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/runtime/local_bench_support.h"
#include "noderuntime/launcher/svg_chart.h"
#include "placement/atomic_file.h"
#include "placement/data_parallel_mode.h"

namespace {

using namespace tessel;

struct Config {
  std::string name;
  stage::LowCommunication mode;  // not enabled: synchronous
};

struct Outcome {
  std::string name;
  std::vector<double> loss;  // per step: the mean over ranks
  double tokens_per_step = 0;
  double tokens_per_s = 0;
  double wall_s = 0;
  double final_loss = 0;
};

// The steps the final loss averages: the last 10%, at least 10.
size_t final_window(size_t steps) { return std::min(steps, std::max<size_t>(10, steps / 10)); }

Outcome run(launcher::LocalJob job, const Config& c, const bench::BenchOptions& o,
            const std::string& folder) {
  job.data_parallel = c.mode;
  job.data_parallel.final_step = job.training.steps;
  // What the planner prices: the configuration's H and bits as given.
  placement::DataParallelMode priced;
  if (c.mode.enabled) {
    priced.kind = placement::DataParallelKind::LowCommunication;
    priced.sync_every = c.mode.sync_every;
    priced.delta_bits = c.mode.delta_bits;
    priced.delayed = c.mode.delayed;
  }
  job.workload.data_parallel = priced;
  const launcher::LocalRunResult r = bench::run_job(job, o, folder);
  Outcome out;
  out.name = c.name;
  const size_t steps = r.steps.size();
  out.loss.assign(steps, 0.0);
  for (const launcher::RankRecord& rank : r.ranks) {
    if (rank.steps.size() != steps) {
      std::fprintf(stderr, "%s: %s reported %zu steps of %zu\n", folder.c_str(), rank.label.c_str(),
                   rank.steps.size(), steps);
      std::exit(1);
    }
    for (size_t i = 0; i < steps; ++i) out.loss[i] += rank.steps[i].loss / double(r.ranks.size());
  }
  out.tokens_per_step = double(r.steps.front().tokens);
  out.tokens_per_s = out.tokens_per_step / *r.measured_iteration_s;
  out.wall_s = r.wall_s;
  const size_t tail = final_window(steps);
  const size_t from = steps > tail ? steps - tail : 0;
  for (size_t i = from; i < steps; ++i) out.final_loss += out.loss[i] / double(steps - from);
  return out;
}

// The first step (from 1) after which `run`'s loss, averaged over the steps that the final loss
// averages, is at most `loss`; 0 if it never is. While the loss still falls, a difference of
// final losses in percent says little (it grows with the slope); the tokens synchronous training
// needed to reach a configuration's final loss say what its steps were worth.
size_t steps_to_reach(const Outcome& run, double loss) {
  const size_t window = final_window(run.loss.size());
  double sum = 0;
  for (size_t i = 0; i < run.loss.size(); ++i) {
    sum += run.loss[i];
    if (i >= window) sum -= run.loss[i - window];
    if (i + 1 >= window && sum / double(window) <= loss) return i + 1;
  }
  return 0;
}

// The job file's mode (outer optimizer, delayed, stagger) at another H and precision.
stage::LowCommunication mode(stage::LowCommunication m, int h, int bits) {
  m.sync_every = h;
  m.delta_bits = bits;
  return m;
}

void speed(const launcher::LocalJob& job, const bench::BenchOptions& o) {
  const Outcome sync = run(job, {"synchronous", {}}, o, "synchronous");
  const stage::LowCommunication& m = job.data_parallel;
  const std::string name = "low-communication H=" + std::to_string(m.sync_every) + ", " +
                           std::to_string(m.delta_bits) + "-bit" + (m.delayed ? ", delayed" : "");
  const Outcome low = run(job, {name, m}, o, "low-communication");
  std::printf("\n%s, %d steps of %.0f tokens\n\n", job.source.c_str(), job.training.steps,
              sync.tokens_per_step);
  std::printf("| data parallelism | tokens/s | wall | final loss |\n|---|---:|---:|---:|\n");
  for (const Outcome* x : {&sync, &low}) {
    std::printf("| %s | %.0f | %.1f s | %.4f |\n", x->name.c_str(), x->tokens_per_s, x->wall_s,
                x->final_loss);
  }
  std::printf(
      "\nspeed-up %.2fx (goal >= 3x); final loss %+.2f%% of synchronous (goal within 3%%)\n",
      low.tokens_per_s / sync.tokens_per_s,
      100 * (low.final_loss - sync.final_loss) / sync.final_loss);
}

void study(launcher::LocalJob job, const stage::LowCommunication& outer, const std::string& label,
           const bench::BenchOptions& o, const std::string& dir) {
  // Fast links: the loss per token is the same on any network.
  job.topology.bandwidth_scale = 1000;
  job.topology.latency_scale = 0.001;
  std::vector<Config> configs = {{"synchronous", {}}};
  for (int h : {10, 50, 100}) {
    for (int bits : {32, 8, 4}) {
      configs.push_back(
          {"H=" + std::to_string(h) + " " + std::to_string(bits) + "-bit", mode(outer, h, bits)});
    }
  }
  std::vector<Outcome> outcomes;
  for (const Config& c : configs) {
    std::string folder = label + "-" + c.name;
    std::replace(folder.begin(), folder.end(), ' ', '-');
    std::replace(folder.begin(), folder.end(), '=', '-');
    outcomes.push_back(run(job, c, o, folder));
  }
  std::string csv = "step,tokens";
  for (const Outcome& x : outcomes) csv += "," + x.name;
  csv += "\n";
  launcher::LineChart chart;
  chart.title = label + ": loss per token, synchronous vs low-communication";
  chart.x_label = "tokens (thousands)";
  chart.y_label = "training loss (nats, mean over replicas)";
  for (size_t i = 0; i < outcomes.front().loss.size(); ++i) {
    csv += std::to_string(i + 1) + "," +
           std::to_string(int64_t(double(i + 1) * outcomes.front().tokens_per_step));
    for (const Outcome& x : outcomes) csv += "," + std::to_string(x.loss[i]);
    csv += "\n";
  }
  // Every curve smoothed over 10 steps, so the configurations can be told apart.
  for (size_t c = 0; c < outcomes.size(); ++c) {
    std::vector<std::pair<double, double>> points;
    const std::vector<double>& loss = outcomes[c].loss;
    for (size_t i = 9; i < loss.size(); i += 5) {
      double mean = 0;
      for (size_t k = i - 9; k <= i; ++k) mean += loss[k] / 10;
      points.emplace_back(double(i + 1) * outcomes[c].tokens_per_step / 1000, mean);
    }
    if (c == 0) {
      chart.points = points;
      chart.points_label = outcomes[c].name;
    } else {
      chart.series.push_back({outcomes[c].name, points});
    }
  }
  chart.width = 900;
  chart.height = 520;
  placement::write_file_atomically(dir + "/" + label + ".csv", csv);
  placement::write_file_atomically(dir + "/" + label + ".svg", launcher::render_svg(chart));
  std::printf("\n%s: %d steps of %.0f tokens; final loss = mean of the last %zu steps\n\n",
              label.c_str(), job.training.steps, outcomes.front().tokens_per_step,
              final_window(outcomes.front().loss.size()));
  std::printf(
      "| configuration | final loss | vs synchronous | tokens synchronous needed for it |\n"
      "|---|---:|---:|---:|\n");
  const Outcome& sync = outcomes.front();
  for (const Outcome& x : outcomes) {
    const size_t step = steps_to_reach(sync, x.final_loss);
    const std::string needed = step == 0 ? "not reached"
                                         : std::to_string(100 * step / sync.loss.size()) +
                                               "% (step " + std::to_string(step) + ")";
    std::printf("| %s | %.4f | %+.2f%% | %s |\n", x.name.c_str(), x.final_loss,
                100 * (x.final_loss - sync.final_loss) / sync.final_loss, needed.c_str());
  }
  std::fflush(stdout);
}

// A larger model on the synthetic grammar (noderuntime/stage/token_data.h). Its learning rate is
// the best of 0.001, 0.0014 and 0.002 for synchronous training over 600 steps; at 0.002 the
// loss without clipping stays at the unigram entropy, so comparisons there measure instability
// (docs/low-communication.md, "Convergence").
constexpr int kSyntheticSteps = 600;
launcher::LocalJob synthetic_job(const std::string& topology, int steps) {
  const std::string yaml =
      "name: synthetic\n"
      "topology: {file: " +
      topology +
      "}\n"
      "model: {layers: 6, hidden: 192, heads: 6, seq_len: 64}\n"
      "training: {steps: " +
      std::to_string(steps) +
      ", micro_batch: 4, global_batch: 16, learning_rate: 0.001, seed: 7}\n"
      "data: {synthetic: {seed: 11, bytes: 2000000}}\n"
      "schedule: {kind: 1f1b}\n"
      "pipeline: {stages: 1, replicas: 2}\n";
  return launcher::parse_local_job(yaml, "synthetic.yaml", ".");
}

}  // namespace

int main(int argc, char** argv) {
  std::string job_path = "examples/local/fables-low-communication.yaml";
  std::string study_dir;
  int steps = 0;
  bench::BenchOptions o = bench::parse_bench_options(
      argc, argv,
      "low_communication_bench [--job FILE] [--study DIR] [--steps N] [--stage-binary PATH] "
      "[--keep]",
      [&](const std::string& arg, const char* value, int& i) {
        if (arg == "--job" && value) {
          job_path = value;
        } else if (arg == "--study" && value) {
          study_dir = value;
        } else {
          return false;
        }
        ++i;
        return true;
      });
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--steps") steps = o.steps;
  }
  try {
    launcher::LocalJob job = launcher::load_local_job(job_path);
    if (steps > 0) job.training.steps = steps;
    if (!job.data_parallel.enabled) {
      std::fprintf(stderr, "%s: no data_parallel section in the low-communication mode\n",
                   job_path.c_str());
      return 2;
    }
    if (study_dir.empty()) {
      speed(job, o);
    } else {
      std::filesystem::create_directories(study_dir);
      study(job, job.data_parallel, job.name, o, study_dir);
      const std::string topology =
          std::filesystem::absolute(std::filesystem::path(job_path).parent_path() /
                                    "two-sites-slow.yaml")
              .string();
      study(synthetic_job(topology, steps > 0 ? steps : kSyntheticSteps), job.data_parallel,
            "synthetic", o, study_dir);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "low_communication_bench: %s\n", e.what());
    return 1;
  }
  bench::finish_scratch(o);
  return 0;
}
