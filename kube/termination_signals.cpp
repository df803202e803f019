#include "kube/termination_signals.h"

#include <pthread.h>

#include <csignal>
#include <thread>

namespace tessel::kube {

std::stop_source stop_on_termination_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::stop_source stop;
  std::thread([signals, stop]() mutable {
    int signal = 0;
    sigwait(&signals, &signal);
    stop.request_stop();
  }).detach();
  return stop;
}

}  // namespace tessel::kube
