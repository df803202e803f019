// job.json: everything one tessel-stage process needs, the same file for every rank of a job
// (each process is told its rank on the command line). Written by the launcher (`tessel
// local`) from a placement, or by hand. Every field is checked; an error names the file and
// the field, e.g. "job.json: pipeline.layer_split: has 3 entries, stages x chunks is 4".
//
// {
//   "format_version": 1,
//   "job_id": 7,                  optional (default 1): the transport rejects peers of another job
//   "workload": {...},            the placement workload in its YAML form, written as JSON
//                                 (placement/workload.h: "preset" and/or "model": {layers, hidden,
//                                 ffn_hidden, heads, seq_len, vocab, precision,
//                                 recompute_activations}, "training": {micro_batch,
//                                 global_batch}). precision: fp32 or bf16 (tessel-stage's --device
//                                 auto picks the CUDA backend, bf16 mixed precision, for a bf16
//                                 job on a machine with a GPU; the CPU backend computes in fp32
//                                 whatever the precision); recompute_activations is a cost-model
//                                 input the runtime ignores (it keeps activations). Micro-batches
//                                 per replica m = global_batch / (replicas x micro_batch).
//   "training": {"steps": 100,    required, >= 1
//                "learning_rate": 3e-4, "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95,
//                "eps": 1e-8, "grad_clip": 1.0 (0: off), "seed": 1337, "threads": 1,
//                "optimizer": "adamw" | "sgd"},  sgd: plain SGD with learning_rate, weight_decay
//   "data_parallel": {"mode": "synchronous"}     optional; synchronous (the default) sums every
//                                 step's gradients over the replicas
//         | {"mode": "low-communication", "sync_every": 50 (H, 1 to kMaxSyncEvery),
//            "delta_bits": 32 | 8 | 4, "outer_learning_rate": 0.7, "outer_momentum": 0.9 ([0, 1)),
//            "nesterov": true, "delayed": true, "stagger": false}
//                                 DiLoCo-style (outer_sync.h): H inner steps per replica (its
//                                 island's gradients summed every step), then the stage's
//                                 replicas average the parameter delta and take an outer
//                                 Nesterov step; checkpoints hold its outer state
//                                 (checkpoint_outer_state.h)
//   "data": {"kind": "synthetic", "seed": 1, "bytes": 1000000}
//         | {"kind": "text", "path": "corpus.txt"},   byte-level tokens (vocab >= 256)
//   "schedule": {"kind": "gpipe" | "1f1b" | "interleaved", "chunks": 1 (v), "microbatch_group":
//                0 (G, 0: P), "overlap": true},
//   "pipeline": {"stages": 2, "replicas": 2, "layer_split": [6, 6]},  layer_split optional
//                                 (even), one entry per virtual stage (stages x chunks)
//   "ranks": [{"stage": 0, "replica": 0, "host": "127.0.0.1", "port": 41000}, ...],
//                                 index = rank; every (stage, replica) exactly once. Optional
//                                 "island": "node-a" (1 to 253 of [A-Za-z0-9._:/-]): the ranks of
//                                 one data-parallel group with the same label form one island,
//                                 GPUs NCCL reaches (one node, or one cluster); without it a rank
//                                 is an island of its own. A group with an island of more than one
//                                 rank sums its gradients by the hierarchical all-reduce
//                                 (gradient_sync.h: NCCL inside on the CUDA backend, the TCP ring
//                                 across; the TCP ring at both levels on the CPU); else by the
//                                 flat TCP ring. A CUDA rank uses its process's current device
//                                 (CUDA_VISIBLE_DEVICES chooses it), one per rank of an island.
//   "links": {"default": {"gbps": 10, "latency_ms": 1},                optional: link shaping
//             "pairs": [{"a": 0, "b": 1, "gbps": 1, "latency_ms": 20}]},  a pair shapes both
//                                 directions between ranks a and b; gbps 0 means unlimited.
//            or {"topology": "topo.yaml", "devices": [3, 7, ...]}: every link shaped like the
//                                 placement topology's link between the two ranks' devices
//                                 (devices[rank]; one device's ranks unshaped), "pairs" on top.
//             "shape": false (default true): the network between the ranks' hosts is itself
//                                 the link (real, or emulated where the kernel's TCP sees it):
//                                 nothing is shaped in user space, and each link's bandwidth
//                                 sizes its TCP streams (stream_plan.h) with the measured RTT
//   "timeouts": {"connect_s": 60, "io_s": 300},   io_s must exceed the longest compute a peer
//                                 can wait through (a silent peer fails after io_s)
//   "checkpoint": {"dir": "ckpt", "interval": 10 (0: only when stopped), "resume": true,
//                  "keep": 3, "shared": true},   keep: step folders kept, >= 1 (checkpoint.h:
//                                 the newest keep, and the step the run resumed from). resume:
//                                 continue from the step dir/manifest.json names; with no
//                                 checkpoint yet (no dir, or no step folder with a manifest) the
//                                 run starts at step 0 and rank 0 says so on stderr; a damaged
//                                 checkpoint is an error. shared (default true): every rank sees
//                                 the same dir (rank 0 writes the manifests); false: each rank's
//                                 dir is its own (pods in different clusters), every rank writes
//                                 the manifests into its own and the ranks agree on the step
//                                 they resume from (checkpoint.h)
//   "trace": {"path": "trace-{rank}.json"},  optional; {rank} is replaced by the rank
//   "rendezvous": {"address": "127.0.0.1:7071", "token_file": "/run/tessel/token",
//                  "advertise_env": "POD_IP", "ca_file": "/etc/tessel/stage/ca.crt"}
//                                 optional: the ranks find each other through the
//                                 Rendezvous service: each binds its host (port 0 in "ranks" binds
//                                 a port the kernel picks), joins with the address it is reached
//                                 at (its host, or advertise_env's value) and takes the peer table
//                                 from the service, not from "ranks". ca_file (optional): a PEM CA
//                                 that verifies the service over TLS; without it the channel is
//                                 insecure (the launcher's loopback service)
//   "progress": {"address": "127.0.0.1:7070", "token_file": "/run/tessel/token",
//                "ca_file": "/etc/tessel/stage/ca.crt"}
//                                 optional: where the StageProgress gRPC service
//                                 (proto/tessel/v1alpha1/progress.proto) listens. token_file
//                                 (optional): the stream carries "authorization: Bearer <token>";
//                                 ca_file (optional): TLS verified by that PEM CA, else insecure
// }
// Every file path (token_file, ca_file) is 1 to kMaxJobFilePath characters, without NUL. A
// relative token_file or ca_file is taken relative to the job file's folder (joined lexically,
// so "../stage/token" beside /etc/tessel/job/job.json is /etc/tessel/stage/token even where
// /etc/tessel/job is a symlink): the operator's pods mount the token beside the job file.
//
// Progress: over gRPC to progress.address; without one, tessel-stage prints one JSON object
// per line on stdout (stage_process.h lists the events), e.g.
//   {"event":"step","rank":1,"stage":1,"replica":0,"step":3,"loss":5.12,"grad_norm":0.93,
//    "tokens":4096,"tokens_per_s":5230.1,"step_s":0.78,"compute_s":0.51,
//    "bubble_fraction":0.35,"network_wait_s":0.21}
// The loss is the mean over the global batch and the same on every rank.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "noderuntime/stage/gpt_config.h"
#include "noderuntime/stage/pipeline_layout.h"
#include "noderuntime/stage/token_data.h"
#include "noderuntime/stage/training_options.h"
#include "noderuntime/transport/link_emulator.h"
#include "noderuntime/transport/peer_address.h"
#include "placement/limits.h"
#include "placement/workload.h"

namespace tessel::stage {

struct DataSpec {
  enum class Kind { kSynthetic, kText } kind = Kind::kSynthetic;
  std::string path;         // text
  uint64_t seed = 1;        // synthetic
  int64_t bytes = 1 << 20;  // synthetic
};

struct CheckpointSpec {
  std::string dir;  // empty: no checkpoints
  int interval = 0;
  bool resume = false;
  int keep = 3;  // step folders kept (checkpoint.h kDefaultCheckpointKeep), >= 1
  // false: each rank's dir is its own, not one folder every rank sees (checkpoint.h).
  bool shared = true;
};

// Where the ranks find each other when no ports are handed out in advance (the Rendezvous
// service, proto/tessel/v1alpha1/rendezvous.proto).
struct RendezvousSpec {
  std::string address;     // host:port of the service
  std::string token_file;  // holds the job's token (16 to 4096 bytes; a final newline is dropped)
  // When set, the environment variable whose value is the host this rank is reached at (a pod's
  // IP through the downward API); else the rank's "host".
  std::string advertise_env;
  std::string ca_file;  // PEM CA that verifies the service over TLS; empty: an insecure channel
};

struct JobSpec {
  uint64_t job_id = 1;
  placement::Workload workload;
  GptConfig model;
  TrainingOptions training;
  int steps = 0;
  int threads = 1;
  DataSpec data;
  PipelineLayout layout;
  std::vector<transport::PeerAddress> addresses;  // per rank; label "stage s replica r"
  // Per rank, its island's label ("" for none); empty when no rank has one.
  std::vector<std::string> islands;
  std::optional<transport::LinkEmulator> links;
  // links."shape": false keeps `links` as what the network provides (its bandwidths size the TCP
  // streams) and shapes nothing in user space.
  bool shape_links = true;
  // links."warmup": false sends no warm-up on long fat links (transport/link_warmup.h); for
  // measuring what it does.
  bool warm_up_links = true;
  std::chrono::milliseconds connect_timeout{60000};
  std::chrono::milliseconds io_timeout{300000};
  CheckpointSpec checkpoint;
  std::string trace_path;        // may hold "{rank}"
  std::string progress_address;  // host:port of the StageProgress service; empty: stdout
  // The StageProgress stream's token (sent as "authorization: Bearer <token>"; read like the
  // rendezvous token) and the PEM CA that verifies the service over TLS; empty: none, insecure.
  std::string progress_token_file;
  std::string progress_ca_file;
  std::optional<RendezvousSpec> rendezvous;
};

// The longest path a job file may name (token_file, ca_file) and the longest island label: one
// definition for the reader and the writer (api/stage_job_file.h).
using placement::kMaxIslandLabel;
using placement::kMaxJobFilePath;

// job.json's "data_parallel" mode of a LowCommunication job. The launcher and the operator write
// job.json with api/stage_job_file.h, from the TrainingJob's spec.dataParallel (api/ cannot
// include the stage; tests/stage/stage_job_file_data_parallel_test.cpp checks that what it
// writes parses back here as the spec says).
inline constexpr const char* kLowCommunicationMode = "low-communication";

// source names the text in errors (the file's path). Throws ConfigError.
JobSpec parse_job_spec(const std::string& text, const std::string& source);
JobSpec load_job_spec(const std::string& path);

// The trace path of one rank ("{rank}" replaced), empty when no trace was asked for.
std::string trace_path_for(const JobSpec& job, int rank);

// The job's corpus. Throws ConfigError naming the file when it cannot be read.
TokenCorpus load_corpus(const DataSpec& data, int vocab);

}  // namespace tessel::stage
