// The stated limits of tessel's inputs, checked arithmetic, and the memory estimate guard:
// every count and size that comes from outside (a flag, a topology, model or job file) is
// checked against one of these limits before it is used in arithmetic or to size an
// allocation, and every product of counts is computed with an overflow check. docs/limits.md
// says each limit and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace tessel::placement {

// --- topologies ---
// Devices in one topology (and stages x replicas of a job): its two N x N matrices of doubles
// take 16 N^2 bytes, 1 GiB at 8192.
inline constexpr int kMaxDevices = 8192;
// Sites in one topology: the site-pair table is sites^2, and a generated file lists
// sites (sites - 1) / 2 pairs (523,776 lines at 1024).
inline constexpr int kMaxSites = 1024;
// Measured device pairs listed in one topology file.
inline constexpr int kMaxDevicePairs = 1 << 20;
// Physical bounds of a link: 1 kbit/s (a modem) to 100 Tbit/s (7x an NVLink 5 port); a
// latency from 0 to one minute (a geostationary satellite hop is 0.6 s).
inline constexpr double kMinBandwidthGbps = 1e-6;
inline constexpr double kMaxBandwidthGbps = 1e5;
inline constexpr double kMaxLatencyMs = 60'000;
// A device: at most 100,000 TFLOP/s (50x a 2024 GPU's dense 16-bit peak) and 100,000 GiB.
inline constexpr double kMaxPeakTflops = 1e5;
inline constexpr double kMaxDeviceMemoryGib = 1e5;

// --- models and batches ---
// GPT-3 175B has 96 layers of hidden 12288 (ffn 49152), 96 heads; the limits leave room for
// models ten times wider and deeper while keeping every int product below 2^63.
inline constexpr int kMaxLayers = 1024;
inline constexpr int kMaxHidden = 65536;
inline constexpr int kMaxFfnHidden = 4 * kMaxHidden;
inline constexpr int kMaxSeqLen = 1 << 20;       // 1M-token context
inline constexpr int kMaxVocab = 1 << 22;        // 4M tokens (today's largest: 256k)
inline constexpr int kMaxMicroBatch = 65536;     // sequences per micro-batch
inline constexpr int kMaxGlobalBatch = 1 << 20;  // sequences per iteration (GPT-3: 1536)

// --- pipelines and schedules ---
// Stages of one pipeline: every stage needs a layer.
inline constexpr int kMaxStages = kMaxLayers;
// Data-parallel replicas the planner can place: its bottleneck matching holds one 64-bit
// adjacency mask per replica (placement/bottleneck_matching.h, kMaxBottleneckSize).
inline constexpr int kMaxReplicas = 64;
inline constexpr int kMaxMicroBatches = 1 << 20;  // micro-batches per iteration and replica
inline constexpr int kMaxChunks = 64;             // model chunks per rank (interleaved)
// Cells (rank, micro-batch, chunk) of one schedule, p x m x v: instruction lists, the replay's
// and the simulator's state take about kScheduleBytesPerCell each (measured 0.3-0.9 KiB).
inline constexpr int64_t kMaxScheduleCells = int64_t{1} << 21;
inline constexpr int64_t kScheduleBytesPerCell = 1024;

// --- files ---
inline constexpr uint64_t kMaxTopologyFileBytes = uint64_t{64} << 20;  // 64 MiB
inline constexpr uint64_t kMaxModelFileBytes = uint64_t{1} << 20;      // 1 MiB
inline constexpr uint64_t kMaxJobFileBytes = uint64_t{1} << 20;        // 1 MiB
// A training text (byte tokens), and a synthetic corpus: 1 GiB, loaded whole by each stage
// process that reads tokens.
inline constexpr uint64_t kMaxTextBytes = uint64_t{1} << 30;

// --- job.json (noderuntime/stage/job_spec.h reads it, api/stage_job_file.h writes it) ---
// A path it names: Linux's PATH_MAX (the reader checks the token and CA files, the writer
// every path, data, checkpoints and traces too).
inline constexpr size_t kMaxJobFilePath = 4096;
// A rank's island label ("<cluster>/<node>"): a Kubernetes node name's limit, a DNS subdomain's.
inline constexpr size_t kMaxIslandLabel = 253;
// An environment variable's name (rendezvous.advertise_env).
inline constexpr size_t kMaxEnvVarName = 128;

// --- runs ---
inline constexpr int64_t kMaxSteps = 10'000'000;  // ~10x the longest LLM pre-training runs
inline constexpr double kMaxGraceSeconds = 3600;  // time the stages get to stop
inline constexpr double kMaxComputeMs = 3.6e6;    // one micro-batch's forward or backward: 1 hour

// --- checked arithmetic ---
inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t result = 0;
  if (__builtin_mul_overflow(a, b, &result)) return std::nullopt;
  return result;
}
inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t result = 0;
  if (__builtin_add_overflow(a, b, &result)) return std::nullopt;
  return result;
}

// "1.5 GiB", "640 KiB", "12 bytes".
std::string format_bytes(double bytes);
// "1e-06" and "100000" style: the shortest text that reads back as the value.
std::string number_text(double value);

// Bytes of memory this process can still get: the smallest of the machine's MemAvailable,
// its control group's memory.max less memory.current, and RLIMIT_AS; nullopt when unknown.
std::optional<double> available_memory_bytes();
// Requests smaller than this are taken to fit without asking the system.
inline constexpr double kMemoryCheckFloorBytes = 64.0 * (1 << 20);
// Empty when `bytes` fits the memory available; else the reason, e.g. "needs about 12.0 GiB,
// more than the 9.5 GiB this machine has available".
std::string memory_shortfall(double bytes);

// Reads a whole regular file of at most `limit` bytes, reading no more than that. On failure
// returns nullopt and sets *error to the reason ("is not a regular file", "is 70.0 MiB, more
// than the limit of 64.0 MiB", "cannot open: No such file or directory"); the caller names
// the file and throws its own error type.
std::optional<std::string> read_file_bounded(const std::string& path, uint64_t limit,
                                             std::string* error);

// job.json's rules on its values, shared by its reader and its writer. An island label: 1 to
// kMaxIslandLabel characters of [A-Za-z0-9._:/-]; empty when valid, else the rule it breaks.
std::string island_label_violation(const std::string& label);
// A path job.json names: 1 to kMaxJobFilePath characters, no NUL; empty when valid, else the
// rule it breaks.
std::string job_file_path_violation(const std::string& path);
// "host:port": the host not empty (a name, an IPv4 address or [IPv6]), the port in [1, 65535].
bool is_host_port(const std::string& address);
// An environment variable's name: 1 to kMaxEnvVarName characters of [A-Za-z0-9_].
bool is_env_var_name(const std::string& name);

// Kubernetes' DNS-1123 label: 1 to 63 lowercase letters, digits and '-', starting and ending
// with a letter or digit. Empty when valid; else the rule it breaks.
std::string dns1123_label_violation(const std::string& name);

}  // namespace tessel::placement
