// The job.json every stage process of a local job reads (noderuntime/stage/job_spec.h), built
// from the local job and its plan by the one writer of the file (api/stage_job_file.h, which the
// operator uses too): ranks r = replica x stages + stage on 127.0.0.1 (or the hosts given), each
// binding a port the kernel picks and finding the others through the launcher's rendezvous, each
// link shaped like the (localized) topology's link between the two ranks' devices (or, with
// shape_links false, described by it: the network between the hosts is the link).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "noderuntime/launcher/local_job.h"
#include "noderuntime/launcher/local_plan.h"

namespace tessel::launcher {

struct JobFilePaths {
  std::string topology;            // the topology YAML the links are shaped from
  std::string trace_pattern;       // "{rank}" in it; empty: no traces
  std::string checkpoint_dir;      // used when the job checkpoints
  std::string progress_address;    // the launcher's progress server; empty: stdout
  std::string rendezvous_address;  // the launcher's rendezvous server
  std::string token_file;          // the job's token for it
  // Per rank, the host it binds and is reached at; empty: every rank on 127.0.0.1.
  std::vector<std::string> rank_hosts;
  // false: links."shape": false (noderuntime/stage/job_spec.h), nothing shaped in user space.
  bool shape_links = true;
  // false: links."warmup": false.
  bool warm_up_links = true;
};

// Throws LocalJobError when a value cannot go into the file (e.g. a path that is not UTF-8, or
// rank_hosts neither empty nor one per rank).
nlohmann::ordered_json make_job_json(const LocalJob& job, const LocalPlan& plan,
                                     const JobFilePaths& paths, uint64_t job_id);

// The H an earlier run's job.json ran (data_parallel.sync_every), when the file is there and
// holds one in [1, kMaxSyncEvery]; else nullopt. A resumed run keeps it (local_plan.h).
std::optional<int> sync_every_of_job_file(const std::string& path);

// "stage 1 replica 0"
std::string tasklet_label(int stage, int replica);

}  // namespace tessel::launcher
