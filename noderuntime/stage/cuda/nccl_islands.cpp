#include "noderuntime/stage/cuda/nccl_islands.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "noderuntime/transport/nccl_communicator.h"
#include "noderuntime/transport/nccl_group.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::stage {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw transport::TransportError(std::string("NCCL island: ") + what + ": " +
                                    cudaGetErrorString(status));
  }
}

int current_device() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

transport::NcclGroupOptions group_options(transport::Communicator& comm,
                                          const std::vector<int>& island, int device,
                                          const transport::NcclIdExchange& exchange,
                                          std::chrono::milliseconds timeout) {
  transport::NcclGroupOptions options;
  options.island = island;
  options.rank = comm.rank();
  options.device = device;
  options.exchange = exchange;
  options.timeout = timeout;
  return options;
}

class NcclIslandLevels final : public IslandLevels {
 public:
  NcclIslandLevels(transport::Communicator& comm, const std::vector<int>& island, int device,
                   const transport::NcclIdExchange& exchange, std::chrono::milliseconds timeout)
      : device_(device),
        nccl_(group_options(comm, island, device, exchange, timeout)),
        cross_(comm, nccl_.stream(), device) {}

  bool on_device() const override { return true; }
  transport::IslandCollective& inner() override { return nccl_; }
  transport::CrossIslandAllReduce& cross() override { return cross_; }

  std::function<void()> ready_after(CUstream_st* stream) override {
    cudaEvent_t created = nullptr;
    check(cudaEventCreateWithFlags(&created, cudaEventDisableTiming), "cudaEventCreate");
    // Destroyed with the function, run or not (a recorded event may be destroyed while a
    // stream still waits for it).
    const std::shared_ptr<CUevent_st> event(created, [](cudaEvent_t e) { cudaEventDestroy(e); });
    check(cudaEventRecord(event.get(), stream), "cudaEventRecord");
    return [this, event] { nccl_.wait_for(event.get()); };
  }
  void thread_started() override { check(cudaSetDevice(device_), "cudaSetDevice"); }
  void abort() override { nccl_.close(); }

 private:
  const int device_;
  transport::NcclCommunicator nccl_;
  transport::StagedCrossAllReduce cross_;
};

}  // namespace

IslandLevelsFactory nccl_island_levels(std::chrono::milliseconds timeout) {
  return [timeout](transport::Communicator& comm, const std::vector<int>& island,
                   const transport::NcclIdExchange& exchange) {
    return std::make_unique<NcclIslandLevels>(comm, island, current_device(), exchange, timeout);
  };
}

}  // namespace tessel::stage
