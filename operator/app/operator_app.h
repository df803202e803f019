// The tessel-operator process: its servers (HTTPS for the webhooks, metrics and probes; gRPC
// for the stage pods), and, while it holds the leader Lease, its controllers (TrainingJobs and
// MemberClusters) with their informers in the hub and in every member cluster.
//
// Every replica serves the webhooks and probes; only the leader reconciles and serves stage
// pods, and with --pod-name labels its own Pod so that the stage Service selects it alone
// (stage_service_label.h). A replica that loses the Lease exits (as client-go's leader election intends): a fresh
// process starts over from what the API holds.
#pragma once

#include <stop_token>

#include "operator/app/operator_flags.h"

namespace tessel::app {

// Runs until `stop` is requested (SIGTERM) or leadership is lost. Returns the exit code: 0 after
// a requested stop, 1 when leadership was lost or the controllers failed. Throws
// std::runtime_error naming the flag or file at fault when something cannot start.
int run_operator(const OperatorFlags& flags, std::stop_token stop);

}  // namespace tessel::app
