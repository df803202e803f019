#include "noderuntime/transport/nccl_communicator.h"

#include <nccl.h>

#include <cstdio>
#include <cstring>

#include "kernels/cuda/device.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {
namespace {

static_assert(sizeof(ncclUniqueId) == kNcclIdBytes, "kNcclIdBytes must be NCCL_UNIQUE_ID_BYTES");

constexpr auto kPoll = std::chrono::microseconds(50);

std::string list_text(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

void check_cuda(cudaError_t e, const std::string& where, const char* call) {
  if (e != cudaSuccess) throw TransportError(where + call + " failed: " + cuda_text(e));
}

std::string nccl_text(ncclResult_t r, ncclComm_t comm) {
  std::string out = ncclGetErrorString(r);
  const char* last = comm ? ncclGetLastError(comm) : ncclGetLastError(nullptr);
  if (last && *last) out += std::string(" (") + last + ")";
  return out;
}

NcclId nccl_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) throw TransportError("ncclGetUniqueId failed: " + nccl_text(r, nullptr));
  NcclId out;
  std::memcpy(out.data(), id.internal, kNcclIdBytes);
  return out;
}

// Polls a non-blocking communicator until its last call has finished being issued (or set up).
ncclResult_t settle(ncclComm_t comm, std::chrono::steady_clock::time_point deadline) {
  ncclResult_t state = ncclInProgress;
  while (true) {
    const ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    if (std::chrono::steady_clock::now() > deadline) return ncclInProgress;
    std::this_thread::sleep_for(kPoll);
  }
}

std::string pointer_text(const void* p) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", p);
  return buffer;
}

}  // namespace

// ---- NcclCommunicator ------------------------------------------------------------------------

NcclCommunicator::NcclCommunicator(NcclGroupOptions options) : options_(std::move(options)) {
  check_nccl_group_options(options_);
  const std::string at = "nccl group " + list_text(options_.island) + " at rank " +
                         std::to_string(options_.rank) + " (device " +
                         std::to_string(options_.device) + "): ";
  if (const auto reason = kernels::cuda::gpu_unavailable_reason()) {
    throw TransportError(at + "no usable GPU: " + *reason);
  }
  int devices = 0;
  check_cuda(cudaGetDeviceCount(&devices), at, "cudaGetDeviceCount");
  if (options_.device >= devices) {
    throw TransportError(at + "device " + std::to_string(options_.device) + " out of range [0, " +
                         std::to_string(devices) + ")");
  }
  group_ = agree_on_nccl_group(options_, nccl_unique_id);

  check_cuda(cudaSetDevice(options_.device), at, "cudaSetDevice");
  int least = 0, greatest = 0;
  check_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest), at,
             "cudaDeviceGetStreamPriorityRange");
  check_cuda(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest), at,
             "cudaStreamCreateWithPriority");

  ncclUniqueId id;
  std::memcpy(id.internal, group_.id.data(), kNcclIdBytes);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, group_.nranks, id, group_.nccl_rank, &config);
  if (r == ncclSuccess || r == ncclInProgress) {
    r = settle(comm, std::chrono::steady_clock::now() + options_.timeout);
  }
  if (r != ncclSuccess) {
    const std::string why = r == ncclInProgress
                                ? "NCCL set-up did not finish within " +
                                      std::to_string(options_.timeout.count()) +
                                      " ms (a member missing or unreachable?)"
                                : "ncclCommInitRankConfig failed: " + nccl_text(r, comm);
    if (comm) ncclCommAbort(comm);
    cudaStreamDestroy(stream_);
    throw TransportError(at + why);
  }
  comm_ = comm;
  watcher_ = std::thread([this] { watch(); });
}

NcclCommunicator::~NcclCommunicator() { close(); }

std::string NcclCommunicator::where() const {
  return "nccl group " + list_text(options_.island) + " at rank " + std::to_string(options_.rank) +
         " (nccl rank " + std::to_string(group_.nccl_rank) + " of " +
         std::to_string(group_.nranks) + ", device " + std::to_string(options_.device) + "): ";
}

void NcclCommunicator::check_device_pointer(const void* data, const std::string& what) const {
  cudaPointerAttributes attributes{};
  const cudaError_t e = cudaPointerGetAttributes(&attributes, data);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear it
    throw TransportError(where() + what + ": data " + pointer_text(data) +
                         " is not a CUDA pointer: " + cuda_text(e));
  }
  const bool device =
      attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  if (!device || attributes.device != options_.device) {
    throw TransportError(where() + what + ": data " + pointer_text(data) + " is " +
                         (device ? "device memory of device " + std::to_string(attributes.device)
                                 : std::string("host memory")) +
                         "; need device memory of device " + std::to_string(options_.device));
  }
}

template <typename Enqueue>
Request NcclCommunicator::submit(const std::string& what, const Enqueue& enqueue) {
  auto completion = std::make_shared<Completion>();
  std::lock_guard lock(mu_);
  if (!failure_.empty()) throw TransportError(where() + what + ": " + failure_);
  if (closing_) throw TransportError(where() + what + ": communicator closed");
  check_cuda(cudaSetDevice(options_.device), where() + what + ": ", "cudaSetDevice");
  ncclResult_t r = enqueue();
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  if (r == ncclInProgress) r = settle(comm_, deadline);
  if (r != ncclSuccess) {
    const std::string why =
        r == ncclInProgress
            ? "NCCL did not accept it within " + std::to_string(options_.timeout.count()) + " ms"
            : nccl_text(r, comm_);
    abort_locked(what + " failed: " + why);
    throw TransportError(where() + failure_);
  }
  cudaEvent_t done = nullptr;
  check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), where() + what + ": ",
             "cudaEventCreateWithFlags");
  const cudaError_t recorded = cudaEventRecord(done, stream_);
  if (recorded != cudaSuccess) {
    cudaEventDestroy(done);
    check_cuda(recorded, where() + what + ": ", "cudaEventRecord");
  }
  pending_.push_back({done, completion, what, deadline});
  wake_.notify_all();
  return Request(completion);
}

Request NcclCommunicator::all_reduce(float* data, size_t count) {
  if (count == 0) return Request();
  check_device_pointer(data, "all-reduce");
  return submit("all-reduce of " + std::to_string(count) + " elements", [&] {
    return ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, stream_);
  });
}

namespace {

// Whether every member's block has the same length (NCCL's in-place collectives need that).
bool equal_blocks(std::span<const size_t> bounds) {
  for (size_t j = 1; j + 1 < bounds.size(); ++j) {
    if (bounds[j + 1] - bounds[j] != bounds[1] - bounds[0]) return false;
  }
  return true;
}

}  // namespace

Request NcclCommunicator::reduce_scatter(float* data, std::span<const size_t> bounds) {
  check_bounds(bounds, size(), where() + "reduce-scatter");
  if (bounds.back() == 0) return Request();
  check_device_pointer(data, "reduce-scatter");
  const size_t block = bounds[1] - bounds[0];
  const bool equal = equal_blocks(bounds);
  const std::string what = "reduce-scatter of " + std::to_string(bounds.back()) + " elements";
  if (equal) {
    return submit(what, [&] {
      return ncclReduceScatter(data, data + static_cast<size_t>(position()) * block, block,
                               ncclFloat32, ncclSum, comm_, stream_);
    });
  }
  return submit(what, [&] {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    for (int j = 0; j < size(); ++j) {
      const size_t length = bounds[j + 1] - bounds[j];
      if (length == 0) continue;
      r = ncclReduce(data + bounds[j], data + bounds[j], length, ncclFloat32, ncclSum, j, comm_,
                     stream_);
      if (r != ncclSuccess && r != ncclInProgress) break;
    }
    const ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess && r != ncclInProgress ? r : end;
  });
}

Request NcclCommunicator::all_gather(float* data, std::span<const size_t> bounds) {
  check_bounds(bounds, size(), where() + "all-gather");
  if (bounds.back() == 0) return Request();
  check_device_pointer(data, "all-gather");
  const size_t block = bounds[1] - bounds[0];
  const bool equal = equal_blocks(bounds);
  const std::string what = "all-gather of " + std::to_string(bounds.back()) + " elements";
  if (equal) {
    return submit(what, [&] {
      return ncclAllGather(data + static_cast<size_t>(position()) * block, data, block, ncclFloat32,
                           comm_, stream_);
    });
  }
  return submit(what, [&] {
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return r;
    for (int j = 0; j < size(); ++j) {
      const size_t length = bounds[j + 1] - bounds[j];
      if (length == 0) continue;
      r = ncclBroadcast(data + bounds[j], data + bounds[j], length, ncclFloat32, j, comm_, stream_);
      if (r != ncclSuccess && r != ncclInProgress) break;
    }
    const ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess && r != ncclInProgress ? r : end;
  });
}

void NcclCommunicator::wait_for(cudaEvent_t ready) {
  std::lock_guard lock(mu_);
  check_cuda(cudaStreamWaitEvent(stream_, ready, 0), where() + "wait_for: ", "cudaStreamWaitEvent");
}

void NcclCommunicator::abort_locked(const std::string& reason) {
  if (failure_.empty()) failure_ = reason;
  if (comm_) {
    cudaSetDevice(options_.device);
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  for (Pending& p : pending_) {
    p.completion->fail(where() + p.what + ": " + reason);
    cudaEventDestroy(p.done);
  }
  pending_.clear();
}

void NcclCommunicator::watch() {
  cudaSetDevice(options_.device);
  std::unique_lock lock(mu_);
  while (true) {
    if (pending_.empty()) {
      if (closing_) return;
      wake_.wait(lock, [&] { return closing_ || !pending_.empty(); });
      continue;
    }
    Pending& p = pending_.front();
    const cudaError_t e = cudaEventQuery(p.done);
    if (e == cudaSuccess) {
      p.completion->complete();
      cudaEventDestroy(p.done);
      pending_.pop_front();
      continue;
    }
    if (e != cudaErrorNotReady) {
      abort_locked("CUDA error while waiting for " + p.what + ": " + cuda_text(e));
      continue;
    }
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
      abort_locked(p.what + " failed: " + nccl_text(r != ncclSuccess ? r : state, comm_));
    } else if (std::chrono::steady_clock::now() > p.deadline) {
      abort_locked(p.what + " did not complete within " + std::to_string(options_.timeout.count()) +
                   " ms (a member gone or stuck?); communicator aborted");
    } else {
      wake_.wait_for(lock, kPoll);
    }
  }
}

void NcclCommunicator::close() {
  {
    std::lock_guard lock(mu_);
    if (closing_) return;
    closing_ = true;
    if (!pending_.empty()) abort_locked("communicator closed");
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  std::lock_guard lock(mu_);
  if (comm_) {
    cudaSetDevice(options_.device);
    ncclResult_t r = ncclCommFinalize(comm_);
    if (r == ncclSuccess || r == ncclInProgress) {
      r = settle(comm_, std::chrono::steady_clock::now() + options_.timeout);
    }
    if (r == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }
  if (stream_) {
    cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }
}

// ---- StagedCrossAllReduce --------------------------------------------------------------------

StagedCrossAllReduce::StagedCrossAllReduce(Communicator& host, cudaStream_t stream, int device)
    : host_(host), stream_(stream), device_(device) {}

StagedCrossAllReduce::~StagedCrossAllReduce() {
  if (staging_) cudaFreeHost(staging_);
}

Request StagedCrossAllReduce::all_reduce(float* data, size_t count, const std::vector<int>& ring) {
  const std::string at = "staged all-reduce over ring " + list_text(ring) + " at rank " +
                         std::to_string(host_.rank()) + ": ";
  if (count == 0) return Request();
  check_cuda(cudaSetDevice(device_), at, "cudaSetDevice");
  if (count > capacity_) {
    if (staging_) cudaFreeHost(staging_);
    staging_ = nullptr;
    capacity_ = 0;
    check_cuda(cudaMallocHost(reinterpret_cast<void**>(&staging_), count * sizeof(float)), at,
               "cudaMallocHost");
    capacity_ = count;
  }
  const size_t bytes = count * sizeof(float);
  check_cuda(cudaMemcpyAsync(staging_, data, bytes, cudaMemcpyDeviceToHost, stream_), at,
             "cudaMemcpyAsync (device to host)");
  check_cuda(cudaStreamSynchronize(stream_), at, "cudaStreamSynchronize");
  host_.all_reduce(staging_, count, DType::kF32, ring);
  check_cuda(cudaMemcpyAsync(data, staging_, bytes, cudaMemcpyHostToDevice, stream_), at,
             "cudaMemcpyAsync (host to device)");
  check_cuda(cudaStreamSynchronize(stream_), at, "cudaStreamSynchronize");
  return Request();
}

}  // namespace tessel::transport
