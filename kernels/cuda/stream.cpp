#include "kernels/cuda/stream.h"

#include <utility>

#include "kernels/cuda/check.h"

namespace tessel::kernels::cuda {

Stream::Stream(int priority) {
  TESSEL_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
}

Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);  // a destructor reports nothing
}

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  std::swap(stream_, other.stream_);
  return *this;
}

void Stream::wait(const Event& event) const {
  TESSEL_CUDA_CHECK(cudaStreamWaitEvent(stream_, event.get(), 0));
}

void Stream::synchronize() const { TESSEL_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

int greatest_stream_priority() {
  int least = 0;
  int greatest = 0;
  TESSEL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return greatest;
}

Event::Event(Timing timing) {
  TESSEL_CUDA_CHECK(cudaEventCreateWithFlags(
      &event_, timing == Timing::kOn ? cudaEventDefault : cudaEventDisableTiming));
}

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  std::swap(event_, other.event_);
  return *this;
}

void Event::record(cudaStream_t stream) { TESSEL_CUDA_CHECK(cudaEventRecord(event_, stream)); }

void Event::synchronize() const { TESSEL_CUDA_CHECK(cudaEventSynchronize(event_)); }

bool Event::done() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) return false;
  TESSEL_CUDA_CHECK(status);
  return true;
}

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  TESSEL_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

}  // namespace tessel::kernels::cuda
