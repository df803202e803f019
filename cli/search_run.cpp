#include "cli/search_run.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

namespace tessel::cli {
namespace {

using namespace tessel::placement;

// Set by the SIGINT handler; read by the search between batches.
std::atomic<bool> g_interrupt{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler stores to it");

extern "C" void on_sigint(int) { g_interrupt.store(true); }

// Installs the handler for its lifetime (one-shot: SA_RESETHAND gives a second Ctrl-C its
// default effect) and restores what was there before.
class SigintCatcher {
 public:
  SigintCatcher() {
    g_interrupt.store(false);
    struct sigaction action {};
    action.sa_handler = on_sigint;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    installed_ = sigaction(SIGINT, &action, &previous_) == 0;
  }
  ~SigintCatcher() {
    if (installed_) sigaction(SIGINT, &previous_, nullptr);
  }
  SigintCatcher(const SigintCatcher&) = delete;
  SigintCatcher& operator=(const SigintCatcher&) = delete;

 private:
  struct sigaction previous_ {};
  bool installed_ = false;
};

}  // namespace

std::string duration_text(double seconds) {
  char text[32];
  if (seconds >= 2 * 3600)
    std::snprintf(text, sizeof text, "%.1f h", seconds / 3600);
  else if (seconds >= 120)
    std::snprintf(text, sizeof text, "%.0f min", seconds / 60);
  else
    std::snprintf(text, sizeof text, "%.0f s", seconds);
  return text;
}

SearchResult run_search(const PlanInputs& in, const char* command, bool interruptible) {
  SearchOptions options = in.search;
  const bool tty = isatty(STDERR_FILENO);
  struct State {
    std::chrono::steady_clock::time_point last_line;
    bool estimated = false;
    bool line_shown = false;
  };
  auto state = std::make_shared<State>();
  const std::string name = command;
  const std::string stop_hint = interruptible
                                    ? "Ctrl-C stops it and prints the best placement found so far"
                                    : "Ctrl-C stops it";
  options.progress = [state, tty, name, stop_hint](const SearchProgress& p) {
    if (!state->estimated && p.elapsed_s >= kSearchEstimateAfterS && p.evaluations > 0) {
      state->estimated = true;
      const double rate = p.evaluations / p.elapsed_s;
      const double left_s = p.budget > 0 ? (p.budget - p.evaluations) / rate : 0;
      if (left_s > kSearchWarnAfterS) {
        std::fprintf(stderr,
                     "%s%s: %.0f evaluations a second: the budget of %ld evaluations needs about "
                     "%s more (%s; --evaluations or --time-limit bound it)\n",
                     state->line_shown ? "\r\033[K" : "", name.c_str(), rate, p.budget,
                     duration_text(left_s).c_str(), stop_hint.c_str());
      }
    }
    if (!tty) return;
    // A progress line, at most ten updates a second.
    const auto now = std::chrono::steady_clock::now();
    if (now - state->last_line < std::chrono::milliseconds(100)) return;
    state->last_line = now;
    state->line_shown = true;
    std::fprintf(stderr, "\r%s: %ld evaluations, best %.4f s, %.1f s elapsed   ", name.c_str(),
                 p.evaluations, p.best_cost, p.elapsed_s);
  };
  std::unique_ptr<SigintCatcher> catcher;
  if (interruptible) {
    catcher = std::make_unique<SigintCatcher>();
    options.cancel = &g_interrupt;
  }
  SearchResult result = search_placement(in.objective(), options);
  catcher.reset();
  if (state->line_shown) std::fprintf(stderr, "\r\033[K");
  return result;
}

}  // namespace tessel::cli
