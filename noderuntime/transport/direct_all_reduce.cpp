#include "noderuntime/transport/direct_all_reduce.h"

#include <exception>

#include "noderuntime/transport/ring_allreduce.h"
#include "noderuntime/transport/transport_error.h"

namespace tessel::transport {

void direct_all_reduce(Communicator& comm, std::span<float> data, const std::vector<int>& group,
                       uint64_t sequence) {
  check_group(comm, group);
  const size_t n = group.size();
  if (n == 1) return;
  TensorInfo info{Tag::kAllReduce, sequence, ring_group_id(group), kDirectChunk, DType::kF32, {}};
  info.shape = {static_cast<int64_t>(data.size())};
  const std::vector<float> mine(data.begin(), data.end());
  std::vector<std::vector<float>> theirs(n, std::vector<float>(data.size()));
  std::vector<Request> pending;
  for (size_t i = 0; i < n; ++i) {
    if (group[i] == comm.rank()) continue;
    pending.push_back(comm.isend(group[i], info, std::as_bytes(std::span(mine))));
    pending.push_back(comm.irecv(group[i], info, std::as_writable_bytes(std::span(theirs[i]))));
  }
  // Every operation must be over before the buffers go away, also when one fails.
  std::exception_ptr failure;
  for (Request& r : pending) {
    try {
      r.wait();
    } catch (const TransportError&) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  for (size_t e = 0; e < data.size(); ++e) {
    float sum = 0;
    for (size_t i = 0; i < n; ++i) sum += group[i] == comm.rank() ? mine[e] : theirs[i][e];
    data[e] = sum;
  }
}

}  // namespace tessel::transport
