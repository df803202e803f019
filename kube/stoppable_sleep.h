// A wait on an injectable Clock that a std::stop_token cuts short, for the loops of the
// reflector, the informer's resync and the event recorder's tests.
#pragma once

#include <mutex>
#include <stop_token>

#include "kube/clock.h"

namespace tessel::kube {

// Sleeps until `clock` reaches now + duration, or until stop is requested. Returns false when
// stopped (also when stop was requested before the call).
inline bool sleep_unless_stopped(Clock& clock, Clock::duration duration, std::stop_token stop) {
  const Clock::time_point deadline = clock.now() + duration;
  std::mutex mutex;
  ClockCondition condition(clock, mutex);
  std::stop_callback wake(stop, [&] {
    std::lock_guard lock(mutex);
    condition.notify_all();
  });
  std::unique_lock lock(mutex);
  while (!stop.stop_requested() && clock.now() < deadline) condition.wait_until(lock, deadline);
  return !stop.stop_requested();
}

}  // namespace tessel::kube
