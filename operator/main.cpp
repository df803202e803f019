// tessel-operator: see operator/app/operator_app.h and docs/operator.md.
#include <csignal>
#include <iostream>
#include <stop_token>
#include <thread>

#include "operator/app/operator_app.h"
#include "operator/app/operator_flags.h"

int main(int argc, char** argv) {
  tessel::app::OperatorFlags flags;
  try {
    if (!tessel::app::parse_operator_flags(argc, argv, flags)) return 0;
  } catch (const std::exception& e) {
    std::cerr << "tessel-operator: " << e.what() << "\n(see tessel-operator --help)\n";
    return 2;
  }
  // SIGTERM and SIGINT ask for a clean stop: blocked here, taken by a thread with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::stop_source stop;
  std::thread waiter([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    stop.request_stop();
  });
  waiter.detach();
  try {
    return tessel::app::run_operator(flags, stop.get_token());
  } catch (const std::exception& e) {
    std::cerr << "tessel-operator: " << e.what() << "\n";
    return 1;
  }
}
