// How the replicas of a stage keep their parameters together, as the cost model prices it:
// synchronous data parallelism (every step's gradients all-reduced over the whole stage group),
// or the low-communication mode (docs/low-communication.md; the runtime's is
// noderuntime/stage/outer_sync.h): the replicas of one island sum their gradients every step,
// and every sync_every = H steps the islands exchange the stage's parameter delta, encoded at
// delta_bits, overlapped with the next inner step when delayed.
//
// The cost model's islands are sites (the topology's Device::site): the devices that reach
// each other over the intra-site network. The workload carries the mode (Workload::data_parallel,
// its YAML section data_parallel:); `tessel local` fills it from the job file's section.
#pragma once

#include <cstdint>
#include <string>

namespace tessel::placement {

enum class DataParallelKind { Synchronous, LowCommunication };
const char* to_string(DataParallelKind kind);  // "synchronous", "low-communication"
// Throws WorkloadError naming the value and what is accepted.
DataParallelKind parse_data_parallel_kind(const std::string& text);

// The runtime's bound on H (noderuntime/stage/training_options.h kMaxSyncEvery).
inline constexpr int kMaxSyncEvery = 10000;

// The H the planner chooses from (sync_period.h), smallest first. Up to 1000: DiLoCo's runs
// sync every 100 to 500 steps; the convergence study (docs/low-communication.md) measured 10 to
// 100, and past 1000 nothing says what H costs in loss per token.
inline constexpr int kSyncEveryLadder[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
// The planner's tolerance for H: the amortised outer sync may add at most this fraction of the
// inner step (the iteration with no cross-site exchange at all).
inline constexpr double kDefaultSyncOverhead = 0.05;
// An overhead of more than the whole inner step would let the sync double the iteration.
inline constexpr double kMaxSyncOverhead = 1.0;

struct DataParallelMode {
  DataParallelKind kind = DataParallelKind::Synchronous;
  int sync_every = 50;  // H, 1..kMaxSyncEvery (the runtime's default)
  int delta_bits = 8;   // 32, 8 or 4
  bool delayed = true;  // the exchange overlaps the next inner step (else it is waited)
  // The planner's choices (tessel plan and simulate; the runtime takes H and bits as given).
  // choose_sync_every: the cost model picks H for each layout it prices, the smallest of
  // kSyncEveryLadder whose outer sync adds at most sync_overhead of the inner step
  // (sync_period.h); sync_every is then unused. choose_delta_bits: delta_bits was chosen by
  // choose_delta_bits() (sync_period.h), which the plan says.
  bool choose_sync_every = false;
  bool choose_delta_bits = false;
  double sync_overhead = kDefaultSyncOverhead;  // (0, kMaxSyncOverhead]

  bool low_communication() const { return kind == DataParallelKind::LowCommunication; }
  // Throws WorkloadError "source: data_parallel.<field>: why" for a value out of range.
  void validate(const std::string& source) const;
  bool operator==(const DataParallelMode&) const = default;
};

// Bytes of one encoded delta of `parameters` values at `bits` (noderuntime/stage/delta_codec.h
// encoded_words x 4): 4 n at 32 bits; per block of 128 one fp32 scale and n or ceil(n/2) bytes
// of codes at 8 or 4 bits, padded to 4 bytes. Throws std::invalid_argument for other bits.
double delta_encoding_bytes(int64_t parameters, int bits);

}  // namespace tessel::placement
