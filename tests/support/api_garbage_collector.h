// The controllers a kube-apiserver needs beside it for deletion to finish, as
// kube-controller-manager and the apiextensions server run them: the garbage collector
// (dependents of deleted owners by ownerReferences, foreground deletion waiting for blocking
// dependents, orphaning), the namespace controller (empties a terminating namespace, then
// finalizes it), the CRD finalizer (deletes a CRD's custom resources before the CRD) and the
// node TTL controller (annotates every Node with node.alpha.kubernetes.io/ttl).
// They run on a thread of their own after every change that may give them work (a pass looks
// at every object), asynchronously as on a real cluster.
#pragma once

#include "tests/support/api_resources.h"
#include "tests/support/api_store.h"
#include "tests/support/api_verbs.h"
#include "tests/support/background_pass.h"

namespace tessel::testing {

class GarbageCollector {
 public:
  GarbageCollector(ObjectStore& store, ServedResources& resources, ApiVerbs& verbs);
  GarbageCollector(const GarbageCollector&) = delete;
  GarbageCollector& operator=(const GarbageCollector&) = delete;

  // Told of every change (under the store's lock): runs a pass soon when the change may give
  // the controllers work.
  void observe(const StoredEvent& change);
  // Whether a change can give the controllers work. Deletions can (an owner, or the last
  // object of a terminating namespace or CRD, may be gone), and so can changes to objects being
  // deleted or with owner references (before or after the change), to CRDs (an owner's kind may
  // now be served), and to Nodes without the TTL annotation. Other writes, most of them, cannot.
  static bool may_give_work(const StoredEvent& change);
  // One pass over every object; returns whether it changed anything. (The thread calls it;
  // tests may too.)
  bool run_once();

 private:
  ObjectStore& store_;
  ServedResources& resources_;
  ApiVerbs& verbs_;
  BackgroundPass pass_;  // last: it stops before the members its passes read go
};

}  // namespace tessel::testing
