// The NCCL communicator (built with CUDA and NCCL only). Without a GPU: invalid groups are named
// before the GPU is touched, and construction fails naming the group, the rank, the device and
// the CUDA runtime's reason. With a GPU: a one-rank communicator's all-reduce, reduce-scatter and
// all-gather on device buffers (NCCL refuses two ranks of one communicator on one GPU, so one
// GPU cannot hold a larger group), a host buffer rejected by name, and the hierarchical
// all-reduce of two islands of one GPU rank each (two communicators on the one GPU) with the
// TCP ring across them, staged through pinned host memory.
#if TESSEL_HAVE_NCCL

#include "noderuntime/transport/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cuda/device.h"
#include "local_mesh.h"

namespace tessel::transport {
namespace {

using testing::Comms;
using testing::connect_local;
using testing::Contains;
using testing::integer_input;
using testing::on_every_rank;

NcclGroupOptions one_rank(int rank) {
  NcclGroupOptions o;
  o.island = {rank};
  o.rank = rank;
  o.exchange = [](const std::optional<NcclId>& root) { return root.value(); };
  o.timeout = std::chrono::seconds(60);  // a generous bound: a failure must not hang the run
  return o;
}

std::string construction_error(NcclGroupOptions options) {
  try {
    NcclCommunicator comm(std::move(options));
  } catch (const TransportError& e) {
    return e.what();
  }
  return "";
}

#define SKIP_WITHOUT_GPU()                                         \
  if (const auto reason = kernels::cuda::gpu_unavailable_reason()) \
  GTEST_SKIP() << "no GPU: " << *reason

// A device copy of `host`, freed on scope exit.
struct DeviceBuffer {
  explicit DeviceBuffer(const std::vector<float>& host) : count(host.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data), std::max<size_t>(1, count) * 4),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data, host.data(), count * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data); }
  std::vector<float> host() const {
    std::vector<float> out(count);
    EXPECT_EQ(cudaMemcpy(out.data(), data, count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  float* data = nullptr;
  size_t count;
};

TEST(NcclCommunicator, InvalidGroupsAreNamedBeforeTheGpuIsTouched) {
  auto o = one_rank(0);
  o.island = {1, 2};
  EXPECT_TRUE(Contains(construction_error(o),
                       "nccl group [1, 2] at rank 0: rank 0 (this rank) is not in the group"));
  o = one_rank(0);
  o.exchange = nullptr;
  EXPECT_TRUE(Contains(construction_error(o), "no id exchange function"));
}

TEST(NcclCommunicator, WithoutAGpuConstructionFailsNamingTheRankAndTheReason) {
  const auto reason = kernels::cuda::gpu_unavailable_reason();
  if (!reason) GTEST_SKIP() << "a GPU is present: the failure without one cannot be shown";
  bool exchanged = false;
  auto o = one_rank(3);
  o.island = {3};
  o.exchange = [&](const std::optional<NcclId>& root) {
    exchanged = true;
    return root.value();
  };
  EXPECT_TRUE(Contains(construction_error(o),
                       "nccl group [3] at rank 3 (device 0): no usable GPU: " + *reason));
  EXPECT_FALSE(exchanged) << "a member without a GPU fails before the exchange";
}

TEST(NcclCommunicator, OneRankCollectivesOnDeviceBuffers) {
  SKIP_WITHOUT_GPU();
  NcclCommunicator comm(one_rank(0));
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.position(), 0);
  const auto input = integer_input(0, 100'003);
  DeviceBuffer buffer(input);
  comm.all_reduce(buffer.data, buffer.count).wait();
  EXPECT_EQ(buffer.host(), input);
  const std::vector<size_t> bounds = {0, buffer.count};
  comm.reduce_scatter(buffer.data, bounds).wait();
  comm.all_gather(buffer.data, bounds).wait();
  EXPECT_EQ(buffer.host(), input);
  // The stream is the communicator's own and stays usable by the caller.
  EXPECT_NE(comm.stream(), nullptr);
  EXPECT_EQ(cudaStreamSynchronize(comm.stream()), cudaSuccess);
  std::vector<float> host(4);
  try {
    comm.all_reduce(host.data(), host.size());
    ADD_FAILURE() << "a host buffer was accepted";
  } catch (const TransportError& e) {
    EXPECT_TRUE(Contains(e.what(),
                         "nccl group [0] at rank 0 (nccl rank 0 of 1, device 0): "
                         "all-reduce: data "))
        << e.what();
    EXPECT_TRUE(Contains(e.what(), "need device memory of device 0")) << e.what();
  }
  comm.close();
  try {
    comm.all_reduce(buffer.data, buffer.count);
    ADD_FAILURE() << "a closed communicator accepted a collective";
  } catch (const TransportError& e) {
    EXPECT_TRUE(Contains(e.what(), "communicator closed")) << e.what();
  }
}

TEST(NcclCommunicator, TwoIslandsOfOneGpuRankSumOverTcp) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::vector<int>> islands = {{0}, {1}};
  Comms comms = connect_local(2);
  const size_t count = 65537;
  std::vector<std::vector<float>> results(2);
  std::vector<std::string> errors(2);
  on_every_rank(2, [&](int r) {
    try {
      NcclGroupOptions o;
      o.island = {r};
      o.rank = r;
      o.exchange = communicator_id_exchange(*comms[r], o.island, 1);
      o.timeout = std::chrono::seconds(60);
      NcclCommunicator inner(std::move(o));
      StagedCrossAllReduce cross(*comms[r], inner.stream(), inner.device());
      const HierarchicalGroup layout({0, 1}, islands, r);
      DeviceBuffer buffer(integer_input(r, count));
      hierarchical_all_reduce(buffer.data, count, layout, inner, cross);
      results[r] = buffer.host();
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  });
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  const auto a = integer_input(0, count), b = integer_input(1, count);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(results[0][i], a[i] + b[i]) << i;
  EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), count * 4), 0);
}

}  // namespace
}  // namespace tessel::transport

#endif  // TESSEL_HAVE_NCCL
