#include "kube/informer.h"

#include <stdexcept>
#include <utility>

#include "kube/stoppable_sleep.h"

namespace tessel::kube {

SharedInformer::SharedInformer(Client& client, ResourceInfo info, std::string ns,
                               InformerOptions options)
    : info_(info),
      namespace_(ns),
      resync_period_(options.resync_period),
      clock_(options.reflector.clock ? *options.reflector.clock : Clock::real()),
      reflector_(client, std::move(info), std::move(ns), store_, std::move(options.reflector)) {
  if (resync_period_ < Clock::duration::zero()) {
    throw std::invalid_argument("informer " + info_.gvr.resource +
                                ": resync_period must not be negative");
  }
}

SharedInformer::~SharedInformer() { stop(); }

void SharedInformer::start() {
  if (started_) throw std::logic_error("informer " + info_.gvr.resource + " started twice");
  started_ = true;
  reflector_thread_ = std::jthread([this](std::stop_token stop) { reflector_.run(stop); });
  if (resync_period_ > Clock::duration::zero()) {
    resync_thread_ = std::jthread([this](std::stop_token stop) { resync_loop(stop); });
  }
}

void SharedInformer::stop() {
  for (std::jthread* thread : {&resync_thread_, &reflector_thread_}) {
    if (thread->joinable()) {
      thread->request_stop();
      thread->join();
    }
  }
}

void SharedInformer::resync_loop(std::stop_token stop) {
  while (sleep_unless_stopped(clock_, resync_period_, stop)) {
    if (reflector_.has_synced()) store_.resync();
  }
}

}  // namespace tessel::kube
