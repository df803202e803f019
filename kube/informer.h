// client-go's SharedInformer: a Reflector keeping an ObjectStore in step with one resource,
// the handlers told of every change, and a periodic resync that hands every cached object to
// on_update again (so that level-triggered controllers revisit everything now and then).
//
//   SharedInformer jobs(client, trainingjobs, "");
//   jobs.add_event_handler(enqueue_keys(queue));
//   jobs.start();
//   jobs.wait_for_sync(stop);
//   ... jobs.store().get("default/gpt-a") ...
#pragma once

#include <chrono>
#include <stop_token>
#include <string>
#include <thread>

#include "kube/client.h"
#include "kube/clock.h"
#include "kube/object_store.h"
#include "kube/reflector.h"
#include "kube/resource.h"

namespace tessel::kube {

struct InformerOptions {
  ReflectorOptions reflector;  // selectors, page size, backoff, clock, logger
  // Every this long, on_update(object, object) for every cached object; zero: never.
  Clock::duration resync_period = Clock::duration::zero();
};

class SharedInformer {
 public:
  // The client must outlive the informer. `ns` "" for all namespaces.
  SharedInformer(Client& client, ResourceInfo info, std::string ns, InformerOptions options = {});
  // Stops and joins the threads.
  ~SharedInformer();
  SharedInformer(const SharedInformer&) = delete;
  SharedInformer& operator=(const SharedInformer&) = delete;

  // Handlers and indexes may be added before or after start(); a handler added later first
  // hears on_add for every cached object.
  void add_event_handler(EventHandler handler) { store_.add_handler(std::move(handler)); }
  void add_index(const std::string& name, IndexFunction index) {
    store_.add_index(name, std::move(index));
  }

  // Starts listing and watching (and resyncing) on threads of its own. Throws
  // std::logic_error when called twice.
  void start();
  // Stops the threads and waits for them; idempotent.
  void stop();

  bool has_synced() const { return reflector_.has_synced(); }
  // Blocks until the first list is cached or stop is requested; returns has_synced().
  bool wait_for_sync(std::stop_token stop) const { return reflector_.wait_for_sync(stop); }

  const ObjectStore& store() const { return store_; }
  ObjectStore& store() { return store_; }
  const ResourceInfo& resource() const { return info_; }
  const std::string& namespace_name() const { return namespace_; }
  const Reflector& reflector() const { return reflector_; }

 private:
  void resync_loop(std::stop_token stop);

  const ResourceInfo info_;
  const std::string namespace_;
  const Clock::duration resync_period_;
  Clock& clock_;
  ObjectStore store_;
  Reflector reflector_;
  std::jthread reflector_thread_;
  std::jthread resync_thread_;
  bool started_ = false;
};

}  // namespace tessel::kube
