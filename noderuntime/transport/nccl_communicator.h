// The NCCL backend of the inner level of the hierarchical all-reduce (hierarchical_all_reduce.h):
// all_reduce, reduce_scatter and all_gather of fp32 device buffers over a group of GPUs that NCCL
// reaches (the GPUs of one node or one cluster, one rank per GPU: NCCL refuses two ranks of one
// communicator on the same device). Built only when CMake finds CUDA and NCCL (TESSEL_HAVE_NCCL).
//
// Set-up: agree_on_nccl_group (nccl_group.h) checks the group and moves the ncclUniqueId from
// the group's first member to the others through the caller's exchange function (the
// rendezvous); then every member creates a non-blocking NCCL communicator on its device, waiting
// at most options.timeout for the others to join.
//
// Streams and completion: every collective is queued on this communicator's own CUDA stream
// (non-blocking, highest priority) in call order and returns at once. Its Request completes when
// the GPU has finished it; for ordering on the GPU without the host, make this stream wait for the
// producer (wait_for) and record an event on stream() after the call for the consumer. The buffer
// must stay valid and untouched until then.
//
// Failures: an NCCL error, or a collective that has not completed within options.timeout (a member
// gone or stuck), aborts the communicator: every pending request fails with a TransportError
// naming the group, this rank, its NCCL rank and device, and NCCL's error; later calls throw the
// same. NCCL cannot say which peer failed, so the group is named instead.
//
// Uneven blocks: reduce_scatter / all_gather with equal blocks use ncclReduceScatter /
// ncclAllGather in place; otherwise one grouped ncclReduce / ncclBroadcast per non-empty block,
// rooted at the block's owner.
#pragma once

#include <cuda_runtime_api.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "noderuntime/transport/hierarchical_all_reduce.h"
#include "noderuntime/transport/nccl_group.h"

struct ncclComm;  // nccl.h's opaque communicator

namespace tessel::transport {

class NcclCommunicator final : public IslandCollective {
 public:
  // Agrees on the group and sets NCCL up. Throws TransportError naming the group and this rank:
  // invalid options, no usable GPU or device (with the CUDA runtime's reason), a failed
  // exchange, or NCCL failing or not finishing its set-up within options.timeout.
  explicit NcclCommunicator(NcclGroupOptions options);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int size() const override { return group_.nranks; }
  int position() const override { return group_.nccl_rank; }
  // `data` must be device memory (throws TransportError otherwise, or for bad bounds).
  Request reduce_scatter(float* data, std::span<const size_t> bounds) override;
  Request all_gather(float* data, std::span<const size_t> bounds) override;
  Request all_reduce(float* data, size_t count) override;

  cudaStream_t stream() const { return stream_; }
  int device() const { return options_.device; }
  // Collectives queued after this call start on the GPU only once `ready` has completed.
  void wait_for(cudaEvent_t ready);
  // Aborts NCCL when operations are pending (each fails with "communicator closed"), else
  // finalizes and destroys it (aborting it if finalizing takes longer than options.timeout).
  // Idempotent; the destructor closes.
  void close();

 private:
  struct Pending {
    cudaEvent_t done = nullptr;
    std::shared_ptr<Completion> completion;
    std::string what;
    std::chrono::steady_clock::time_point deadline;
  };
  template <typename Enqueue>
  Request submit(const std::string& what, const Enqueue& enqueue);
  void check_device_pointer(const void* data, const std::string& what) const;
  void abort_locked(const std::string& reason);
  void watch();
  std::string where() const;

  NcclGroupOptions options_;
  NcclGroup group_;
  ncclComm* comm_ = nullptr;
  cudaStream_t stream_ = nullptr;

  std::mutex mu_;  // guards everything below and every call into comm_
  std::condition_variable wake_;
  std::deque<Pending> pending_;
  std::string failure_;  // non-empty once aborted
  bool closing_ = false;
  std::thread watcher_;
};

// The cross-island all-reduce of device buffers over a host Communicator (the TCP ring): each
// call copies the shard to a pinned host buffer on `stream`, all-reduces it over the ring, and
// copies it back, blocking until done (so the hierarchical all-reduce runs its rings one after
// another, in ascending shard order on every member). Give it the inner communicator's stream
// so that the copy starts after the reduce-scatter.
class StagedCrossAllReduce final : public CrossIslandAllReduce {
 public:
  StagedCrossAllReduce(Communicator& host, cudaStream_t stream, int device);
  ~StagedCrossAllReduce() override;
  StagedCrossAllReduce(const StagedCrossAllReduce&) = delete;
  StagedCrossAllReduce& operator=(const StagedCrossAllReduce&) = delete;
  Request all_reduce(float* data, size_t count, const std::vector<int>& ring) override;

 private:
  Communicator& host_;
  cudaStream_t stream_;
  int device_;
  float* staging_ = nullptr;  // pinned
  size_t capacity_ = 0;       // elements
};

}  // namespace tessel::transport
