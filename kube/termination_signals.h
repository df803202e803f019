// How a daemon of tessel (the operator, the prober) learns it should stop: the kubelet sends
// SIGTERM when it stops the pod, a person at a terminal SIGINT.
#pragma once

#include <stop_token>

namespace tessel::kube {

// Blocks SIGTERM and SIGINT in the calling thread and starts a detached thread that takes them
// with sigwait: the first one requests a stop of the returned source. Call it at the start of
// main, before any other thread starts (threads inherit the blocked mask; one that did not would
// get the default action and end the process).
std::stop_source stop_on_termination_signals();

}  // namespace tessel::kube
