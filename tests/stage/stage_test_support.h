// Test helpers for the stage runtime: a tiny GPT, communicators over real sockets on
// 127.0.0.1 (kernel-chosen ports, one thread per rank as separate processes would), and runs
// of a whole pipeline, or of the single-process reference, that collect every rank's losses
// and final weights.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/stage/stage_runtime.h"
#include "noderuntime/transport/tcp_communicator.h"

namespace tessel::stage::testing {

inline GptConfig tiny_config(int layers = 8) {
  return GptConfig{layers,       /*channels=*/32, /*heads=*/4, /*ffn=*/128, /*seq_len=*/16,
                   /*vocab=*/256};
}

inline TrainingOptions tiny_options(placement::ScheduleKind kind, int micro_batches) {
  TrainingOptions options;
  options.micro_batch = 2;
  options.micro_batches = micro_batches;
  options.schedule = kind;
  options.adamw.learning_rate = 1e-3f;
  options.adamw.weight_decay = 0.1f;
  options.grad_clip = 1.0f;
  options.seed = 42;
  return options;
}

inline const TokenCorpus& tiny_corpus() {
  static const TokenCorpus corpus = TokenCorpus::synthetic(7, 20000, 256);
  return corpus;
}

using Comms = std::vector<std::unique_ptr<transport::TcpCommunicator>>;

// One communicator per rank, over real sockets; labels name each rank's tasklet.
inline Comms connect_ranks(const std::vector<std::string>& labels,
                           std::optional<transport::LinkEmulator> links = std::nullopt) {
  const int n = static_cast<int>(labels.size());
  std::vector<transport::TcpListener> listeners;
  std::vector<transport::PeerAddress> peers;
  for (int r = 0; r < n; ++r) {
    listeners.push_back(transport::TcpListener::bind("127.0.0.1", 0));
    peers.push_back({"127.0.0.1", listeners.back().port(), labels[r]});
  }
  Comms comms(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      transport::TcpOptions options;
      options.job_id = 0x57a6e;
      options.rank = r;
      options.peers = peers;
      options.connect_timeout = std::chrono::seconds(20);
      options.io_timeout = std::chrono::seconds(20);
      options.links = links;
      try {
        comms[r] = std::make_unique<transport::TcpCommunicator>(std::move(options), listeners[r]);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
  return comms;
}

inline std::vector<std::string> tasklet_labels(const PipelineLayout& layout) {
  std::vector<std::string> labels(layout.world_size());
  for (int s = 0; s < layout.stages; ++s) {
    for (int r = 0; r < layout.replicas; ++r) {
      labels[layout.rank(s, r)] = "stage " + std::to_string(s) + " replica " + std::to_string(r);
    }
  }
  return labels;
}

// Every tensor of a runtime's chunks by name.
using Weights = std::map<std::string, std::vector<float>>;

inline void collect_weights(const StageRuntime& runtime, Weights& out) {
  for (const auto& chunk : runtime.chunks()) {
    const float* params = chunk->model.state_for_reading().params;
    for (const ParameterTensor& t : chunk->model.layout().tensors()) {
      out[t.name] = std::vector<float>(params + t.offset, params + t.offset + t.size);
    }
  }
}

struct RunResult {
  std::vector<std::vector<double>> losses;       // per rank, per step
  std::vector<Weights> weights;                  // per replica: every tensor of the whole model
  std::vector<std::vector<StepReport>> reports;  // per rank
};

// Called on every rank's thread: before the first step, and after each step (with its index).
struct RunHooks {
  std::optional<transport::LinkEmulator> links;  // shaping of the links between the ranks
  std::function<void(StageRuntime&, transport::Communicator&)> before;
  std::function<void(StageRuntime&, transport::Communicator&, int)> after_step;
  std::vector<StepTrace>* traces = nullptr;  // one per rank, when given
  ChunkFactory make_chunk = cpu_chunk_factory();
  DataParallelIslands islands;  // the data-parallel groups' islands (none: the flat ring)
};

// Trains `steps` steps on every rank of `layout`, one thread per rank. Fails the test with
// every rank's error when one throws.
inline RunResult run_pipeline(const GptConfig& config, const PipelineLayout& layout,
                              const TrainingOptions& options, int steps,
                              const RunHooks& hooks = {}) {
  Comms comms = connect_ranks(tasklet_labels(layout), hooks.links);
  const int n = layout.world_size();
  RunResult result;
  result.losses.resize(n);
  result.reports.resize(n);
  std::vector<Weights> rank_weights(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        StageRuntime runtime(config, layout, options, tiny_corpus(), *comms[rank],
                             hooks.traces ? &(*hooks.traces)[rank] : nullptr, hooks.make_chunk,
                             hooks.islands);
        if (hooks.before) hooks.before(runtime, *comms[rank]);
        for (int s = 0; s < steps; ++s) {
          const StepReport report = runtime.train_step();
          result.losses[rank].push_back(report.loss);
          result.reports[rank].push_back(report);
          if (hooks.after_step) hooks.after_step(runtime, *comms[rank], s);
        }
        collect_weights(runtime, rank_weights[rank]);
      } catch (const std::exception& e) {
        errors[rank] = e.what();
        comms[rank]->close();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < n; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
  result.weights.resize(layout.replicas);
  for (int s = 0; s < layout.stages; ++s) {
    for (int r = 0; r < layout.replicas; ++r) {
      for (auto& [name, values] : rank_weights[layout.rank(s, r)]) {
        result.weights[r][name] = values;
      }
    }
  }
  return result;
}

// The single-process reference of a layout with D replicas of m micro-batches each: one rank
// running the whole model with D m micro-batches per step.
inline RunResult run_reference(const GptConfig& config, int replicas,
                               const TrainingOptions& options, int steps) {
  TrainingOptions reference = options;
  reference.micro_batches = options.micro_batches * replicas;
  reference.schedule = placement::ScheduleKind::OneFOneB;
  reference.microbatch_group = 0;
  return run_pipeline(config, PipelineLayout::standard(1, 1, 1, config.layers), reference, steps);
}

// ||a - b|| / ||b|| over the elements [begin, end) (all when end is 0).
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b,
                             size_t begin = 0, size_t end = 0) {
  if (end == 0) end = b.size();
  double diff = 0, norm = 0;
  for (size_t i = begin; i < end; ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

inline bool is_qkv_bias(const std::string& name) {
  const std::string suffix = "attn.qkv.bias";
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// How far the key biases (the middle third of attn.qkv.bias) may be from the reference's: their
// exact gradient is zero (a softmax row is unchanged when the same q . b_k is added to every
// score), so what reaches them is rounding noise, which AdamW turns into steps of up to the
// learning rate whose sign depends on the order of the sums. kFromZero bounds the values
// themselves (a reference whose own noise is negligible), kFromReference their distance.
enum class KeyBiasBound { kFromZero, kFromReference };

// Every replica's every tensor against `reference` within `relative` (||got - ref|| / ||ref||),
// the key biases within `key_bias_bound` instead; the replicas bit for bit equal to replica 0's;
// the last stage's lm_head copy equal to wte when the model has several stages.
inline void expect_replicas_match(const std::vector<Weights>& replicas, const Weights& reference,
                                  size_t C, double relative, double key_bias_bound,
                                  KeyBiasBound bound, bool several_stages) {
  for (size_t r = 0; r < replicas.size(); ++r) {
    const Weights& got = replicas[r];
    for (const auto& [name, values] : reference) {
      ASSERT_TRUE(got.count(name)) << name << " missing on replica " << r;
      const std::vector<float>& mine = got.at(name);
      if (is_qkv_bias(name)) {
        EXPECT_LE(relative_error(mine, values, 0, C), relative) << name << " (query)";
        EXPECT_LE(relative_error(mine, values, 2 * C, 3 * C), relative) << name << " (value)";
        for (size_t i = C; i < 2 * C; ++i) {
          const double moved =
              bound == KeyBiasBound::kFromZero ? std::abs(mine[i]) : std::abs(mine[i] - values[i]);
          EXPECT_LE(moved, key_bias_bound) << name << " (key) " << i;
        }
      } else {
        EXPECT_LE(relative_error(mine, values), relative) << name << " replica " << r;
      }
      EXPECT_EQ(mine, replicas[0].at(name)) << name << " replica " << r;
    }
    if (several_stages) {
      EXPECT_EQ(got.at("lm_head.weight"), got.at("wte.weight")) << "replica " << r;
    }
  }
}

}  // namespace tessel::stage::testing
