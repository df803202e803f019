// Streams and events, owned (RAII), so a runtime can run compute and communication on separate
// streams and order them with events: record an event after the producer's work on one stream,
// make the consumer's stream wait for it, and neither host thread blocks.
#pragma once

#include <cuda_runtime_api.h>

namespace tessel::kernels::cuda {

class Event;

class Stream {
 public:
  // A non-blocking stream (no implicit ordering with the legacy default stream). Lower priority
  // numbers run first when both have work ready: greatest_stream_priority() for communication.
  explicit Stream(int priority = 0);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  // Work queued on this stream after this call starts only once `event` has completed.
  void wait(const Event& event) const;
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// The most urgent stream priority of the current device (a negative number on current GPUs).
int greatest_stream_priority();

class Event {
 public:
  enum class Timing { kOff, kOn };
  // kOff events are cheaper to record and wait on; kOn ones can be timed (elapsed_ms).
  explicit Event(Timing timing = Timing::kOff);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  void synchronize() const;
  // Whether all work captured by the last record() has completed (never blocks).
  bool done() const;
  // Milliseconds from `start` to this event; both recorded with Timing::kOn and completed.
  float elapsed_ms_since(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace tessel::kernels::cuda
