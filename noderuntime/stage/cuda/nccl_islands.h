// The levels of the data-parallel all-reduce over islands (gradient_sync.h) on the CUDA backend:
// NCCL inside the island, on the chunk's fp32 device gradients (ChunkModel::device_gradients),
// started on the GPU after the chunk's compute stream has made the bucket final (an event, not
// the host); the TCP ring across the islands through pinned host memory (StagedCrossAllReduce,
// on NCCL's stream after the reduce-scatter). The NCCL communicator is on the process's current
// CUDA device (the chunks' device); NCCL refuses two ranks of one island on one GPU.
//
// NCCL's unique id goes from the island's first rank to the others through the exchange the
// GradientSync hands the factory: the job's rendezvous (rendezvous_id_exchange) when it has one,
// else the job's TCP communicator (communicator_id_exchange, nccl_group.h); no side channel.
//
// Built only with CUDA and NCCL (TESSEL_HAVE_NCCL).
#pragma once

#include <chrono>

#include "noderuntime/stage/gradient_sync.h"

namespace tessel::stage {

// `timeout` bounds NCCL's set-up and every collective (a member gone or stuck fails the step).
IslandLevelsFactory nccl_island_levels(std::chrono::milliseconds timeout);

}  // namespace tessel::stage
