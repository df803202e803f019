// tessel-operator: see operator/app/operator_app.h and docs/operator.md.
#include <iostream>
#include <stop_token>

#include "kube/termination_signals.h"
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
  const std::stop_source stop = tessel::kube::stop_on_termination_signals();
  try {
    return tessel::app::run_operator(flags, stop.get_token());
  } catch (const std::exception& e) {
    std::cerr << "tessel-operator: " << e.what() << "\n";
    return 1;
  }
}
