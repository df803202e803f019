// A TrainingJob manifest (crds/, api/trainingjob.h) run by `tessel local`: the same spec the
// operator runs on clusters, here on this machine's processes over the links of a topology
// file (a TrainingJob names no network: in a cluster the prober measures it).
#pragma once

#include <string>

#include "api/trainingjob.h"
#include "noderuntime/launcher/local_job.h"

namespace tessel::launcher {

// The local form of the job. Relative data paths are resolved against base_dir. Throws
// LocalJobError naming the manifest and the field when the job asks for something the CPU
// runtime does not do (a precision other than fp32 and bf16, the paper cost model, activation
// recomputation).
LocalJob local_job_from_trainingjob(const api::TrainingJob& job, const std::string& source,
                                    const std::string& base_dir, const std::string& topology_file);

// A job file of either form: a TrainingJob manifest (kind: TrainingJob), which needs
// topology_file, or a local job file (examples/local/), which names its own topology
// (topology_file must then be empty). Errors name the file and the field.
LocalJob load_job_file(const std::string& path, const std::string& topology_file);
// The same for the file's text, read from `path` (which names it in errors; relative paths in it
// are resolved against its folder).
LocalJob parse_job_file(const std::string& text, const std::string& path,
                        const std::string& topology_file);

}  // namespace tessel::launcher
