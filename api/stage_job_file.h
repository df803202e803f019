// job.json, the writing side: the file every tessel-stage process of a job reads
// (noderuntime/stage/job_spec.h documents the format and parses it). This is the one place that
// writes its field names: `tessel local` (noderuntime/launcher/job_file.h) and the operator
// (operator/controller/pod_builder.h) both build it here, from a TrainingJob's spec plus what
// they decide (ranks and their addresses, the services, the paths inside the process's view).
// Every value the caller decides is checked before anything is written: the operator cannot run
// the stage's parser, and a job.json the stages refuse would only fail once the pods start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/trainingjob.h"

namespace tessel::api {

// One rank of the job; its index in StageJobFile::ranks is the rank.
struct StageRank {
  int stage = 0;
  int replica = 0;
  std::string host = "0.0.0.0";  // the address it binds
  int port = 0;                  // 0: a port the kernel picks (needs a rendezvous)
  std::string island;            // "": an island of its own; else ranks whose GPUs NCCL reaches
};

// A gRPC service the stage processes call (the rendezvous, the progress stream).
struct StageEndpoint {
  std::string address;     // host:port
  std::string token_file;  // the job's token; "": none (the rendezvous needs one)
  std::string ca_file;     // the PEM CA that verifies the service over TLS; "": insecure
};

struct StageJobFile {
  uint64_t job_id = 1;           // the transport and the services tell jobs apart by it
  std::string model_name;        // workload.model.name; "": the spec's preset, if any
  std::vector<int> layer_split;  // one entry per virtual stage; empty: an even split
  std::vector<StageRank> ranks;  // index = rank; every (stage, replica) exactly once
  std::string data_path;         // text data: the path the stages open (resolved); else ""
  std::string checkpoint_dir;    // "": no checkpoints
  bool checkpoint_resume = true;
  bool checkpoint_shared = true;  // false: every rank's dir is its own (no shared volume)
  std::optional<StageEndpoint> rendezvous;
  std::string advertise_env;  // with a rendezvous: the variable holding the rank's address
  std::optional<StageEndpoint> progress;  // none: progress lines on stdout
  std::string trace_pattern;              // "{rank}" in it; "": no traces
  nlohmann::ordered_json links;           // job.json's "links" as is; null: an unshaped network
  std::string optimizer;  // training.optimizer: "adamw" or "sgd"; "": the stage's default, adamw
};

// One pair of ranks on different hosts and the link between them as measured, for job.json's
// links.pairs (the link is the same both ways).
struct StageLinkPair {
  int a = 0, b = 0;       // ranks, a != b
  double gbps = 0;        // the link's bandwidth, Gbit/s, > 0
  double latency_ms = 0;  // one way, >= 0
};

// job.json's "links" where the network between the ranks' hosts is itself the link (pods on
// clusters): {"shape": false, "pairs": [{"a", "b", "gbps", "latency_ms"}, ...]}. The stages shape
// nothing; each listed pair's bandwidth sizes its TCP streams and socket buffers with the round
// trip the kernel measures (noderuntime/transport/stream_plan.h); an unlisted pair keeps one
// stream and the kernel's buffer autotuning. No "pairs" when `pairs` is empty. stage_job_json
// checks the pairs against the ranks.
nlohmann::ordered_json unshaped_links_json(const std::vector<StageLinkPair>& pairs);

// The most job.json may hold: under a ConfigMap's 1 MiB (its keys and values together), where
// the operator puts it.
inline constexpr size_t kMaxStageJobFileBytes = 1'000'000;

// The job.json of `spec` run as `file` says. Its "data_parallel" section is spec.data_parallel's
// (absent for synchronous data parallelism, the stage's default); a low-communication spec needs
// its H and bits filled in (the planner's choice for the placement,
// placement/data_parallel_choice.h, where the TrainingJob left them out), else
// data_parallel.sync_every / delta_bits are refused. Throws ManifestError (source "job.json")
// naming every field at fault, by its job.json path ("ranks[3].island: ...").
nlohmann::ordered_json stage_job_json(const TrainingJobSpec& spec, const StageJobFile& file);

// The same as the file's text (two-space indents, a final newline); also throws ManifestError
// when it is longer than kMaxStageJobFileBytes.
std::string stage_job_text(const TrainingJobSpec& spec, const StageJobFile& file);

// The job id of one start attempt of a TrainingJob on clusters: a stable hash (64-bit FNV-1a,
// the same on every build and machine, so an operator that restarts finds the same id) of its
// metadata.uid and, after the first, the attempt ("<uid>#<attempt>"), folded to 63 bits and never
// 0. Each attempt has its own id so that stage processes of an earlier attempt still running (in
// a member that could not be reached to delete them) can neither rendezvous with nor report into
// the current one. Throws std::invalid_argument for an empty uid or a negative attempt.
uint64_t stage_job_id(const std::string& uid, int64_t attempt);

}  // namespace tessel::api
